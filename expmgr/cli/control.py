"""``expctl stop``: stop running experiments, gracefully or (``--cancel``) at once, and
close the servers of ended ones (a DONE or ERROR experiment serves until stopped, as NNI's).

A stop is SIGTERM to the experiment's process, which stops it as Ctrl+C does (so only
its owner can: the REST route that stops it needs the access token when there is one);
``--cancel`` sends a second SIGTERM once it is stopping, which kills its trials
without waiting out ``trialGracePeriod``. ``--keep-trials`` sends SIGUSR2 instead: the
experiment stops and its running trials run on, for ``expctl resume`` (of this or a newer
expmgr) to take over within the experiment's ``reattachWindow``.
"""
from __future__ import annotations

import argparse
import os
import signal
import time
from typing import cast

from expmgr.cli.common import (EXIT_OK, CliError, current_entry, experiment_store, find_experiment, is_running,
                               is_serving, port_number, registry, shown_status)
from expmgr.server.lifecycle import ActionRefused, send_stop
from expmgr.store.registry import RegistryEntry
from expmgr.states import ExperimentState

_STOP_TIMEOUT_AFTER_GRACE = 30.0


def add_parser(commands: argparse._SubParsersAction) -> None:
    stop = commands.add_parser("stop", help="stop running experiments")
    stop.add_argument("id", nargs="?", help="experiment id or a unique prefix (default: the only running one)")
    stop.add_argument("--all", "-a", action="store_true", help="stop every running experiment")
    stop.add_argument("--port", "-p", type=port_number, help="stop the running experiment on this port")
    stop.add_argument("--cancel", action="store_true", help="kill the trials at once instead of gracefully")
    stop.add_argument("--keep-trials", action="store_true",
                      help="leave the running trials running, for 'expctl resume' to take over within the "
                           "experiment's reattachWindow (an upgrade of expmgr, say)")
    stop.add_argument("--timeout", type=float, default=None,
                      help="seconds to wait for the end (default: the grace period plus 30)")
    stop.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if sum(bool(choice) for choice in (args.id is not None, args.all, args.port is not None)) > 1:
        raise CliError("give one of an experiment id, --all or --port")
    if args.cancel and args.keep_trials:
        raise CliError("give --cancel (kill the trials) or --keep-trials (leave them running), not both")
    if args.port is not None:
        targets = [entry for entry in registry().entries() if entry.port == args.port and is_serving(entry)]
        if not targets:
            raise CliError(f"--port {args.port}: no running experiment uses this port")
    elif args.all:
        targets = [entry for entry in registry().entries() if is_serving(entry)]
        if not targets:
            print("no experiment is running")
            return EXIT_OK
    elif args.id is None and not any(is_serving(entry) for entry in registry().entries()):
        print("no experiment is running")  # nothing to do, as nnictl stop: not an error
        return EXIT_OK
    else:
        targets = [find_experiment(args.id, running=True, served=True)]
    for entry in targets:
        if not is_serving(entry):
            print(f"experiment {entry.id} is not running ({shown_status(entry)})")
            continue
        if args.keep_trials:
            _stop_keeping_trials(entry, timeout=args.timeout)
        else:
            _stop(entry, cancel=args.cancel, timeout=args.timeout)
    return EXIT_OK


def _stop_keeping_trials(entry: RegistryEntry, *, timeout: float | None) -> None:
    window = _reattach_window(entry)
    if not window:
        raise CliError(f"--keep-trials: the trials of experiment {entry.id} cannot outlive it: that takes "
                       f"trainingService.reattachWindow (platform local or remote) in its config; 'expctl stop {entry.id}' "
                       f"stops them", status=1)
    deadline = time.monotonic() + (timeout if timeout is not None else _STOP_TIMEOUT_AFTER_GRACE)
    try:
        send_stop(entry, keep_trials=True)
    except ActionRefused as refused:
        raise CliError(str(refused), status=1) from None
    if not _wait_for(entry, lambda e: not is_serving(e), deadline):
        raise CliError(f"experiment {entry.id} did not stop in time (pid {entry.pid})", status=1)
    ended = current_entry(entry)
    print(f"experiment {entry.id} {shown_status(ended)}; its running trials run on for up to {window:g} s "
          f"(reattachWindow): 'expctl resume {entry.id}' takes them over")


def _reattach_window(entry: RegistryEntry) -> float:
    """The experiment's ``trainingService.reattachWindow`` in seconds; 0 when none (or unreadable)."""
    try:
        with experiment_store(entry) as store:
            service = store.profile().config.get("trainingService")
    except CliError:
        return 0.0
    if not isinstance(service, dict) or service.get("platform") not in ("local", "remote"):
        return 0.0
    window = service.get("reattachWindow")
    return float(window) if isinstance(window, (int, float)) and not isinstance(window, bool) else 0.0


def _stop(entry: RegistryEntry, *, cancel: bool, timeout: float | None) -> None:
    grace = _grace_period(entry)
    deadline = time.monotonic() + (timeout if timeout is not None else grace + _STOP_TIMEOUT_AFTER_GRACE)
    pid = cast(int, entry.pid)  # the caller checked that it serves: it has its pid
    try:
        send_stop(entry)
    except ActionRefused as refused:
        raise CliError(str(refused), status=1) from None
    if cancel:
        # A second signal sent before the first was handled would be merged into it.
        _wait_for(entry, lambda e: e.status in (ExperimentState.STOPPING,) or e.status.is_finished(), deadline)
        if is_running(current_entry(entry)):
            os.kill(pid, signal.SIGTERM)
    # Its pid is cleared when its server closed, after the search's end was recorded.
    if not _wait_for(entry, lambda e: not is_serving(e), deadline):
        raise CliError(f"experiment {entry.id} did not stop in time (pid {entry.pid})", status=1)
    ended = current_entry(entry)
    if shown_status(ended) == "GONE":  # it died before it recorded its end: not a stop
        raise CliError(f"experiment {entry.id} died while it stopped (GONE: its trials' ends are not recorded); "
                       f"see its experiment.log, and 'expctl resume {entry.id}' to run them again", status=1)
    print(f"experiment {entry.id} {ended.status.value}")


def _wait_for(entry: RegistryEntry, condition, deadline: float) -> bool:  # noqa: ANN001
    while time.monotonic() < deadline:
        current = registry().get(entry.id)
        if current is None or condition(current):
            return True
        time.sleep(0.05)
    return False


def _grace_period(entry: RegistryEntry) -> float:
    """The experiment's ``trialGracePeriod``; 30 s when its store cannot be read (a
    damaged database must not keep a running experiment from being stopped)."""
    try:
        with experiment_store(entry) as store:
            return float(store.profile().config.get("trialGracePeriod", 30.0))
    except CliError:
        return 30.0
