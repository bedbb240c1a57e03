"""``expctl experiment list`` and ``expctl trial ls``: tables of what the registry
and an experiment's store hold (``--json`` for scripts)."""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from expmgr.cli.common import EXIT_OK, find_experiment, is_running, print_table, registry, shown_status
from expmgr.layout import ExperimentPaths
from expmgr.manager.store import ExperimentStore


def add_parsers(commands: argparse._SubParsersAction) -> None:
    experiment = commands.add_parser("experiment", help="list experiments")
    experiment_commands = experiment.add_subparsers(dest="experiment_command", required=True, metavar="COMMAND")
    listing = experiment_commands.add_parser("list", help="the running experiments (--all: every one)")
    listing.add_argument("--all", action="store_true", help="also the finished ones")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(handler=list_experiments)

    trial = commands.add_parser("trial", help="list an experiment's trials")
    trial_commands = trial.add_subparsers(dest="trial_command", required=True, metavar="COMMAND")
    trial_ls = trial_commands.add_parser("ls", help="an experiment's trials")
    trial_ls.add_argument("id", nargs="?", help="experiment id or a unique prefix (default: the only running one)")
    trial_ls.add_argument("--status", help="only trials in this state, e.g. SUCCEEDED")
    trial_ls.add_argument("--json", action="store_true", help="print JSON")
    trial_ls.set_defaults(handler=list_trials)


def _when(seconds: float | None) -> str:
    return "" if seconds is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


def list_experiments(args: argparse.Namespace) -> int:
    rows = [{"id": entry.id, "name": entry.name or "", "status": shown_status(entry), "port": entry.port,
             "started": _when(entry.start_time), "ended": _when(entry.end_time), "dir": entry.dir}
            for entry in registry().entries() if args.all or is_running(entry)]
    print_table(rows, ["id", "name", "status", "port", "started", "ended", "dir"], args.json)
    return EXIT_OK


def list_trials(args: argparse.Namespace) -> int:
    entry = find_experiment(args.id)
    store = ExperimentStore.open(ExperimentPaths(Path(entry.dir)).database, readonly=True)
    try:
        trials = store.trials()
        finals = store.final_metrics()
    finally:
        store.close()
    wanted = args.status.upper() if args.status else None
    rows = []
    for trial in trials:
        if wanted and trial.status.value != wanted:
            continue
        final = finals.get(trial.trial_id)
        duration = (trial.end_time or time.time()) - trial.start_time if trial.start_time else None
        rows.append({"trial": trial.trial_id, "seq": trial.sequence_id, "status": trial.status.value,
                     "attempts": trial.attempts, "seconds": "" if duration is None else f"{duration:.1f}",
                     "final": "" if final is None else json.dumps(final.value),
                     "parameters": json.dumps(trial.parameters)})
    print_table(rows, ["trial", "seq", "status", "attempts", "seconds", "final", "parameters"], args.json)
    return EXIT_OK
