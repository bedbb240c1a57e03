"""``expctl experiment list|show|status|export|delete`` and ``expctl trial ls``: what
the registry and an experiment's store hold. ``trial ls`` and ``experiment status`` print a
table on a terminal and nnictl's JSON elsewhere (``--table``/``--nnictl`` choose; see
common.output_form); exports are nnictl's (server/downloads.py)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, cast

from expmgr.cli.common import (EXIT_OK, CliError, access_of, add_output_flags, experiment_store, find_experiment,
                               is_running, is_serving, output_form, print_nnictl_json, print_table, printable, registry,
                               shown_status, shown_trial_status)
from expmgr.layout import ExperimentPaths
from expmgr.server.lifecycle import ActionRefused, check_can_delete, delete
from expmgr.metrics import ranked
from expmgr.server import downloads, views
from expmgr.server.home import stored_trial_files


def add_parsers(commands: argparse._SubParsersAction) -> tuple[argparse._SubParsersAction, ...]:
    """Add ``experiment``, ``trial`` and ``webui``; returns the ``experiment`` and ``trial``
    subcommands for other modules to extend."""
    experiment = commands.add_parser("experiment", help="list, show, export, import or delete experiments")
    experiment_commands = experiment.add_subparsers(dest="experiment_command", required=True, metavar="COMMAND")
    listing = experiment_commands.add_parser("list", help="the running experiments (--all: every one)")
    listing.add_argument("--all", action="store_true", help="also the finished ones")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(handler=list_experiments)

    for name, handler, text in (("show", show_experiment, "the experiment's profile and config (JSON)"),
                                ("status", experiment_status, "the experiment's state: ID STATE on a terminal, "
                                                              "nnictl's JSON elsewhere")):
        command = experiment_commands.add_parser(name, help=text)
        command.add_argument("id", nargs="?", help="experiment id or a unique prefix")
        command.set_defaults(handler=handler)
        if name == "status":
            add_output_flags(command)
    export = experiment_commands.add_parser("export", help="every trial's parameters and final result")
    export.add_argument("id", nargs="?", help="experiment id or a unique prefix")
    export.add_argument("--format", "--type", "-t", choices=("csv", "json"), default="json",
                        help="json (default) or csv; --type is nnictl's spelling")
    export.add_argument("--output", "-o", "--filename", "-f", type=Path,
                        help="write to this file instead of stdout (--filename: nnictl's spelling)")
    export.add_argument("--intermediate", "-i", action="store_true",
                        help="with each trial's intermediate results (as nnictl's export) and the attempt of each")
    export.set_defaults(handler=export_experiment)
    webui = commands.add_parser("webui", help="the web address of a running experiment")
    webui_commands = webui.add_subparsers(dest="webui_command", required=True, metavar="COMMAND")
    url = webui_commands.add_parser("url", help="print the experiment's addresses (with ?token= when it has one)")
    url.add_argument("id", nargs="?", help="experiment id or a unique prefix (default: the only running one)")
    url.set_defaults(handler=webui_url)
    delete = experiment_commands.add_parser("delete", help="delete a stopped experiment and its files")
    delete.add_argument("id", nargs="?", help="experiment id or a unique prefix")
    delete.add_argument("--all", action="store_true", help="every experiment that is not running")
    delete.add_argument("--yes", action="store_true", help="do not ask for confirmation (else y/N is read from stdin, "
                                                           "as nnictl: echo y | expctl experiment delete ID)")
    delete.set_defaults(handler=delete_experiment)

    trial = commands.add_parser("trial", help="list an experiment's trials, or kill one")
    trial_commands = trial.add_subparsers(dest="trial_command", required=True, metavar="COMMAND")
    trial_ls = trial_commands.add_parser("ls", help="an experiment's trials")
    trial_ls.add_argument("id", nargs="?", help="experiment id or a unique prefix (default: the only running one)")
    trial_ls.add_argument("--status", help="only trials in this state, e.g. SUCCEEDED")
    trial_ls.add_argument("--sort", metavar="METRIC", help="best first by this key of the final result "
                                                          "(default: the plain number), per optimize_mode")
    trial_ls.add_argument("--head", type=int, metavar="N",
                          help="the N trials with the highest final result (as nnictl); with --sort, the first N")
    trial_ls.add_argument("--tail", type=int, metavar="N",
                          help="the N trials with the lowest final result (as nnictl); with --sort, the last N")
    add_output_flags(trial_ls, expctl_json=True)
    trial_ls.set_defaults(handler=list_trials)
    return experiment_commands, trial_commands


def _when(seconds: float | None) -> str:
    return "" if seconds is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


def list_experiments(args: argparse.Namespace) -> int:
    """The registry's experiments; one whose database cannot be read is listed as
    UNREADABLE (with the reason under ``error`` and on stderr), the others as usual."""
    rows = []
    for entry in registry().entries():
        if not (args.all or is_serving(entry)):  # running, or ended with its server up
            continue
        # STARTED is the first start, as the web UI shows it; the registry has the last one's.
        # Its state (DONE) and whether its server still answers are two facts: a DONE experiment
        # served until ``expctl stop`` is not running (commands without an id do not pick it).
        served = is_serving(entry)
        row = {"id": entry.id, "name": entry.name or "", "status": shown_status(entry), "port": entry.port,
               "platform": entry.platform or "", "served": served if args.json else ("yes" if served else ""),
               "started": _when(entry.start_time), "ended": _when(entry.end_time), "dir": entry.dir}
        try:
            with experiment_store(entry) as store:
                profile = store.profile()
                row["started"], row["platform"] = _when(profile.start_time), profile.platform
        except CliError as problem:
            row["status"], row["error"] = "UNREADABLE", str(problem)
            print(f"expctl experiment list: {entry.id}: {printable(problem, lines=True)}", file=sys.stderr)
        rows.append(row)
    print_table(rows, ["id", "name", "status", "port", "platform", "served", "started", "ended", "dir"], args.json)
    return EXIT_OK


def show_experiment(args: argparse.Namespace) -> int:
    entry = find_experiment(args.id)
    with experiment_store(entry) as store:
        view = views.experiment_view(store, running=is_running(entry))
    view["status"] = shown_status(entry)  # GONE rather than the RUNNING its dead process left
    print(json.dumps(view, indent=2))
    return EXIT_OK


def experiment_status(args: argparse.Namespace) -> int:
    """``ID STATE`` (``(preempted)`` after it when its last run was; ``(manager away 75s, 2
    times)`` when no manager ran it for a while between runs, the web UI's ``managerAway``),
    or nnictl's: the JSON of ``GET check-status``, also for an experiment that is not running
    (its last state)."""
    entry = find_experiment(args.id)
    with experiment_store(entry) as store:
        preempted = store.was_preempted()
        check_status = views.check_status_view(store)
        away = views.manager_away_view(store)
    if output_form(args) == "nnictl":
        print_nnictl_json({**check_status, "status": shown_status(entry)})
    else:
        print(f"{entry.id} {shown_status(entry)}{' (preempted)' if preempted else ''}{_away(away)}")
    return EXIT_OK


def _away(view: dict[str, Any]) -> str:
    """`` (manager away 75s, 2 times)`` from ``views.manager_away_view``; nothing when never."""
    times = len(view["managerAway"])
    if not times:
        return ""
    return f" (manager away {view['managerAwaySeconds']:.0f}s, {times} time{'' if times == 1 else 's'})"


def export_experiment(args: argparse.Namespace) -> int:
    """NNI's export (downloads.export_records, as the web UI's download), as JSON or CSV."""
    with experiment_store(find_experiment(args.id)) as store:
        records = downloads.export_records(store, intermediate=args.intermediate)
    text = downloads.results_text(records, args.format)
    if args.output is None:
        # nnictl's JSON ends without a newline: a terminal's prompt gets one of its own
        sys.stdout.write(text + ("\n" if args.format == "json" and sys.stdout.isatty() else ""))
    else:
        args.output.write_text(text, encoding="utf-8")
    return EXIT_OK


def webui_url(args: argparse.Namespace) -> int:
    entry = find_experiment(args.id, running=True, served=True)
    if not is_serving(entry):
        raise CliError(f"experiment {entry.id} is not running ({shown_status(entry)}); "
                       f"expctl view {entry.id} serves it read-only")
    for url in access_of(entry).urls(cast(int, entry.port)):  # served: it has its port
        print(url)
    return EXIT_OK


def delete_experiment(args: argparse.Namespace) -> int:
    """One experiment, or with ``--all`` every one that is not running (nnictl's ``delete
    --all``; a running one is left, and said so)."""
    if args.all == (args.id is not None):
        raise CliError("give an experiment id or --all")
    if args.all:
        entries = registry().entries()
        for running in (entry for entry in entries if is_serving(entry)):
            print(f"experiment {running.id} is running or served: kept (expctl stop {running.id} first)")
        entries = [entry for entry in entries if not is_serving(entry)]
        if not entries:
            print("no experiment to delete")
            return EXIT_OK
    else:
        entries = [find_experiment(args.id)]
        try:
            check_can_delete(entries[0])
        except ActionRefused as refused:
            raise CliError(str(refused)) from None
    if not args.yes and not _confirmed(", ".join(f"{entry.id} ({entry.dir})" for entry in entries)):
        print("kept")
        return EXIT_OK
    for entry in entries:
        try:
            delete(registry(), entry)
        except ActionRefused as refused:  # it was started again meanwhile
            raise CliError(str(refused)) from None
        print(f"deleted experiment {entry.id}")
    return EXIT_OK


_ANSWER_TRIES = 3
"""Unreadable answers before deleting is refused: `yes junk | expctl experiment delete` ends."""
_ANSWER_BYTES = 1024
"""Read of one answer at most; a longer line is junk, however long it is."""


def _confirmed(named: str) -> bool:
    """Ask y/N on stdin, a terminal or not (nnictl's: ``echo y | nnictl experiment delete ID``):
    an empty answer, ``n`` or ``no`` keeps, ``y`` or ``yes`` deletes, anything else is asked
    again, up to _ANSWER_TRIES times. CliError when stdin ends (or there is none) before an
    answer, or gives none readable: a script that pipes nothing, or junk, is told about
    ``--yes`` rather than kept asking or kept silently."""
    if sys.stdin is None:
        raise CliError("deleting needs --yes or a y/N answer on stdin, and there is no stdin")
    for _ in range(_ANSWER_TRIES):
        print(f"delete experiment {named}? [y/N] ", end="", flush=True)
        line = sys.stdin.readline(_ANSWER_BYTES)
        if not line:
            print()
            raise CliError("deleting needs --yes or a y/N answer on stdin; stdin ended without one")
        if not line.endswith("\n") and len(line) >= _ANSWER_BYTES:
            _skip_rest_of_line()
            print("please answer y or n, not a line that long")
            continue
        answer = line.strip().lower()
        if answer in ("", "n", "no"):
            return False
        if answer in ("y", "yes"):
            return True
        print(f"please answer y or n, not {printable(answer)!r}")
    raise CliError(f"deleting needs --yes or a y/N answer on stdin; {_ANSWER_TRIES} answers were neither "
                   "y nor n: nothing deleted")


def _skip_rest_of_line() -> None:
    """Read past the rest of an overlong line, a bounded piece at a time."""
    while True:
        piece = sys.stdin.readline(_ANSWER_BYTES)
        if not piece or piece.endswith("\n"):
            return


def list_trials(args: argparse.Namespace) -> int:
    for flag, count in (("--head", args.head), ("--tail", args.tail)):
        if count is not None and count < 0:
            raise CliError(f"{flag}: expected a number of trials >= 0, got {count}")
    if args.head is not None and args.tail is not None:
        raise CliError("give --head or --tail, not both")
    entry = find_experiment(args.id)
    form = output_form(args)
    running, gone = is_running(entry), shown_status(entry) == "GONE"
    with experiment_store(entry) as store:
        trials = store.trials()
        finals = store.final_metrics()
        minimize = store.profile().minimizes
        several_hosts = views.runs_on_several_hosts(store)
    now = time.time()
    if args.status:
        trials = [trial for trial in trials if trial.status.value == args.status.upper()]
    if args.sort:
        trials = _sorted_by_result(trials, finals, args.sort, minimize)
    elif args.head is not None or args.tail is not None:
        # nnictl's: only trials with a final result, by its default number, highest (head) or lowest (tail) first
        trials, _ = ranked(((trial, finals[trial.trial_id].value if trial.trial_id in finals else None)
                            for trial in trials), minimize=args.tail is not None)
    if args.head is not None:
        trials = trials[:args.head]
    elif args.tail is not None:
        trials = trials[-args.tail:] if args.sort and args.tail else trials[:args.tail]
    if form == "nnictl":
        files = stored_trial_files(ExperimentPaths(Path(entry.dir)))
        print_nnictl_json([_nnictl_dates(views.nni_trial_job_view(trial, files, finals.get(trial.trial_id)))
                           for trial in trials])
        return EXIT_OK
    as_json = form == "json"
    rows = []
    for trial in trials:
        final = finals.get(trial.trial_id)
        duration = views.trial_seconds(trial, now if running else None)
        row = {"trial": trial.trial_id, "seq": trial.sequence_id, "status": shown_trial_status(trial.status, gone),
               "attempts": trial.attempts}
        if as_json:  # real numbers and objects, null for none; a non-finite number as "NaN" etc.
            row.update(host=trial.host, waiting=trial.waiting_reason,
                       seconds=None if duration is None else round(duration, 1),
                       final=None if final is None else views.json_safe(final.value),
                       parameters=views.json_safe(trial.parameters))
        else:
            row.update(host=trial.host or "", waiting=trial.waiting_reason or "",
                       seconds="" if duration is None else f"{duration:.1f}",
                       final="" if final is None else json.dumps(final.value), parameters=json.dumps(trial.parameters))
        rows.append(row)
    # The host of each trial's latest attempt: always in JSON; in the table only when the trials
    # ran on several hosts (as the web UI's Node column), since on one machine every row says the same.
    host = ["host"] if as_json or several_hosts else []
    # Why a WAITING trial is not started yet (no free GPU), as the runner stored it: always in
    # JSON; in the table only while a trial waits for something, last, as it is a sentence.
    waiting = ["waiting"] if as_json or any(trial.waiting_reason for trial in trials) else []
    print_table(rows, ["trial", "seq", "status", "attempts", *host, "seconds", "final", "parameters", *waiting],
                as_json)
    return EXIT_OK


def _nnictl_dates(view: dict) -> dict:
    """A trial's REST view as nnictl prints it: ``startTime`` and ``endTime`` as local
    ``YYYY/MM/DD HH:MM:SS`` rather than milliseconds."""
    for key in ("startTime", "endTime"):
        if view.get(key):
            view[key] = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(view[key] // 1000))
    return view


def _sorted_by_result(trials: list, finals: dict, metric: str, minimize: bool) -> list:
    """Best first by the final result's ``metric`` (``default`` is the plain number);
    trials without that number come last."""
    def result(trial) -> object:  # noqa: ANN001
        value = finals[trial.trial_id].value if trial.trial_id in finals else None
        return value if metric == "default" else (value.get(metric) if isinstance(value, dict) else None)
    # NaN and infinities come last, with the trials without a result
    best_first, without = ranked(((trial, result(trial)) for trial in trials), minimize)
    if trials and not best_first:
        raise CliError(f"--sort: no trial has a final result with a number under {metric!r}")
    return best_first + without
