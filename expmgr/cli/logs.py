"""``expctl log``: print, or follow (``-f``) until it ends, an experiment's or a trial's log.

    expctl log experiment|dispatcher [ID] [-f] [--tail N | --head N]
    expctl log stdout|stderr|trial [ID] TRIAL [-f] [--tail N | --head N]

and nnictl's spellings, told apart by naming no trial:

    expctl log stdout|stderr [ID] [--tail/-T N] [--head/-H N] [--path]   the daemon's output
    expctl log trial [ID] [--trial_id/-T TRIAL]                          trials' folders

A single id is the experiment's (nnictl's meaning) when it is a whole experiment id,
else a trial of the only running experiment (expctl's).
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Callable, cast

from expmgr.cli.common import (EXIT_OK, CliError, check_id, current_entry, experiment_store, find_experiment,
                               is_running, registry)
from expmgr.layout import ExperimentPaths, TrialFiles
from expmgr.store.registry import RegistryEntry

if TYPE_CHECKING:
    from expmgr.store import TrialRecord


_FOLLOW_INTERVAL = 0.2
_EXPERIMENT_LOGS = {"experiment": "experiment_log", "dispatcher": "dispatcher_log"}
_TRIAL_LOGS = {"stdout": "stdout", "stderr": "stderr", "trial": "trial_log"}


def add_parser(commands: argparse._SubParsersAction) -> None:
    log = commands.add_parser("log", help="print or follow an experiment's or a trial's log")
    which = log.add_subparsers(dest="which", required=True, metavar="LOG")
    texts = {"experiment": "experiment.log", "dispatcher": "dispatcher.log", "stdout": "a trial's stdout "
             "(no TRIAL: the daemon's output, as nnictl)", "stderr": "a trial's stderr (no TRIAL: the daemon's "
             "output, as nnictl)", "trial": "a trial's trial.log (no TRIAL or --trial_id: trials' folders, as nnictl)"}
    for name, text in texts.items():
        parser = which.add_parser(name, help=text)
        parser.add_argument("ids", nargs="*", metavar="ID",
                            help="[experiment id] and, for trial logs, the trial id (unique prefixes work)")
        parser.add_argument("-f", "--follow", action="store_true", help="keep printing until it ends")
        tail = ("--tail", "-T") if name in ("stdout", "stderr") else ("--tail",)  # nnictl's -T
        parser.add_argument(*tail, type=int, metavar="N", help="the last N lines only (then follow)")
        parser.add_argument("--head", "-H", type=int, metavar="N", help="the first N lines only")
        if name in ("stdout", "stderr"):
            parser.add_argument("--path", action="store_true", help="print the file's path (nnictl's)")
        if name == "trial":
            parser.add_argument("--trial_id", "-T", help="print this trial's folder (nnictl's)")
        parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    for flag, count in (("--tail", args.tail), ("--head", args.head)):
        if count is not None and count < 0:
            raise CliError(f"{flag}: expected a number of lines >= 0, got {count}")
    if args.head is not None and (args.tail is not None or args.follow):
        raise CliError("--head goes with neither --tail nor --follow")
    trial_log = args.which in _TRIAL_LOGS
    if trial_log and _nnictl_meaning(args):
        return _run_nnictl(args)
    accepted = (1, 2) if trial_log else (0, 1)
    if len(args.ids) not in accepted:
        raise CliError(f"log {args.which}: expected {'[ID] TRIAL' if trial_log else '[ID]'}, "
                       f"got {' '.join(args.ids) or 'nothing'}")
    experiment_id = args.ids[0] if len(args.ids) == accepted[1] else None
    entry = find_experiment(experiment_id)
    paths = ExperimentPaths(Path(entry.dir))
    if trial_log:
        trial_id = _find_trial(entry, check_id(args.ids[-1], "TRIAL"))
        path = getattr(TrialFiles(paths.trial_dir(trial_id)), _TRIAL_LOGS[args.which])
        ended = lambda: _trial_ended(trial_id, entry)  # noqa: E731
    else:
        path = getattr(paths, _EXPERIMENT_LOGS[args.which])
        ended = lambda: not is_running(current_entry(entry))  # noqa: E731
    offset = _print_start(path, args.tail, args.head)
    if args.follow:
        _follow(path, offset, ended)
    return EXIT_OK


def _nnictl_meaning(args: argparse.Namespace) -> bool:
    """Whether a trial log command is nnictl's: no trial named (no id, or one that is a
    whole experiment id), or nnictl's own flags."""
    if getattr(args, "path", False) or getattr(args, "trial_id", None) is not None:
        return True
    return not args.ids or (len(args.ids) == 1 and registry().get(args.ids[0]) is not None)


def _run_nnictl(args: argparse.Namespace) -> int:
    """nnictl's ``log stdout|stderr``: the daemon's output (stdout and stderr in one file);
    ``log trial``: each trial's folder (its logs are in it), or one trial's."""
    if len(args.ids) > 1:
        raise CliError(f"log {args.which}: expected [ID] with --{'trial_id' if args.which == 'trial' else 'path'}, "
                       f"got {' '.join(args.ids)}")
    entry = find_experiment(args.ids[0] if args.ids else None)
    paths = ExperimentPaths(Path(entry.dir))
    if args.which == "trial":
        trial_ids = [_find_trial(entry, check_id(args.trial_id, "--trial_id"))] if args.trial_id is not None else None
        with experiment_store(entry) as store:
            trial_ids = trial_ids or [trial.trial_id for trial in store.trials()]
        for trial_id in trial_ids:
            print(f"id:{trial_id} path:{paths.trial_dir(trial_id)}")
        if not trial_ids:
            print("(none)")
        return EXIT_OK
    path = paths.log_dir / "daemon.log"
    if args.path:
        print(path)
        return EXIT_OK
    offset = _print_start(path, args.tail, args.head)
    if args.follow:
        _follow(path, offset, lambda: not is_running(current_entry(entry)))
    return EXIT_OK


def _find_trial(entry: RegistryEntry, prefix: str) -> str:
    with experiment_store(entry) as store:
        matches = [trial.trial_id for trial in store.trials() if trial.trial_id.startswith(prefix)]
    if not matches:
        raise CliError(f"TRIAL: no trial {prefix!r} in experiment {entry.id}")
    if len(matches) > 1 and prefix not in matches:
        raise CliError(f"TRIAL: {prefix!r} is ambiguous: " + ", ".join(matches))
    return prefix if prefix in matches else matches[0]


def _trial_ended(trial_id: str, entry: RegistryEntry) -> bool:
    # The trial was found before; a running experiment's trials stay.
    if not is_running(current_entry(entry)):
        return True
    with experiment_store(entry) as store:
        return cast("TrialRecord", store.trial(trial_id)).status.is_finished()


def _print_start(path: Path, tail: int | None, head: int | None = None) -> int:
    """Print the file (its last ``tail`` or first ``head`` lines); return how far it was read."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    if head is not None:
        _write(b"".join(data.splitlines(keepends=True)[:head]))
    elif tail is not None:
        lines = deque(data.splitlines(keepends=True), maxlen=tail)
        _write(b"".join(lines))
    else:
        _write(data)
    return len(data)


def _follow(path: Path, offset: int, ended: Callable[[], bool]) -> None:
    """Print what is appended to ``path`` until ``ended()``, then what came last."""
    while True:
        done = ended()  # checked before reading, so nothing written before the end is missed
        try:
            with open(path, "rb") as file:
                file.seek(offset)
                chunk = file.read()
        except FileNotFoundError:
            chunk = b""
        _write(chunk)
        offset += len(chunk)
        if done:
            return
        time.sleep(_FOLLOW_INTERVAL)


def _write(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.flush()
