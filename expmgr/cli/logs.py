"""``expctl log``: print, or follow (``-f``) until it ends, an experiment's or a trial's log.

    expctl log experiment|dispatcher [ID] [-f] [--tail N]
    expctl log stdout|stderr|trial [ID] TRIAL [-f] [--tail N]
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Callable, cast

from expmgr.cli.common import EXIT_OK, CliError, check_id, current_entry, experiment_store, find_experiment, is_running
from expmgr.layout import ExperimentPaths, TrialFiles
from expmgr.store.registry import RegistryEntry

if TYPE_CHECKING:
    from expmgr.store import TrialRecord


_FOLLOW_INTERVAL = 0.2
_EXPERIMENT_LOGS = {"experiment": "experiment_log", "dispatcher": "dispatcher_log"}
_TRIAL_LOGS = {"stdout": "stdout", "stderr": "stderr", "trial": "trial_log"}


def add_parser(commands: argparse._SubParsersAction) -> None:
    log = commands.add_parser("log", help="print or follow an experiment's or a trial's log")
    log.add_argument("which", choices=[*_EXPERIMENT_LOGS, *_TRIAL_LOGS],
                     help="experiment.log, dispatcher.log, or a trial's stdout, stderr or trial.log")
    log.add_argument("ids", nargs="*", metavar="ID",
                     help="[experiment id] and, for trial logs, the trial id (unique prefixes work)")
    log.add_argument("-f", "--follow", action="store_true", help="keep printing until it ends")
    log.add_argument("--tail", type=int, metavar="N", help="start with the last N lines only")
    log.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.tail is not None and args.tail < 0:
        raise CliError(f"--tail: expected a number of lines >= 0, got {args.tail}")
    trial_log = args.which in _TRIAL_LOGS
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
    offset = _print_start(path, args.tail)
    if args.follow:
        _follow(path, offset, ended)
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


def _print_start(path: Path, tail: int | None) -> int:
    """Print the file (its last ``tail`` lines); return how far it was read."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    if tail is not None:
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
