"""``expctl top``: a live view of the running experiments and their trials, redrawn
every ``--interval`` seconds until Ctrl+C (``--once`` prints it once). States are
coloured when stdout is a terminal and ``NO_COLOR`` is unset or empty: the rule of the logs,
``expmgr.log.use_colour``."""
from __future__ import annotations

import argparse
import sys
import time

from expmgr.cli.common import (EXIT_OK, CliError, access_of, experiment_store, find_experiment, is_running,
                               is_serving, printable, registry, shown_status, shown_trial_status)
from expmgr.log import use_colour
from expmgr.metrics import best_result
from expmgr.server import views
from expmgr.store.registry import RegistryEntry
from expmgr.states import TrialState

_CLEAR = "\x1b[H\x1b[2J"
_GREEN, _RED, _YELLOW, _CYAN, _DIM = "32", "31", "33", "36", "2"
_STATE_COLOURS = {"SUCCEEDED": _GREEN, "DONE": _GREEN, "FAILED": _RED, "CRASHED": _RED, "ERROR": _RED,
                  "GONE": _RED, "EARLY_STOPPED": _YELLOW, "PREEMPTED": _YELLOW, "USER_CANCELED": _YELLOW,
                  "SYS_CANCELED": _YELLOW, "STOPPED": _YELLOW, "STOPPING": _YELLOW, "RUNNING": _CYAN,
                  "NO_MORE_TRIAL": _CYAN, "WAITING": _DIM, "PAUSED": _DIM, "INITIALIZED": _DIM}


def add_parser(commands: argparse._SubParsersAction) -> None:
    top = commands.add_parser("top", help="a live view of running experiments and their trials")
    top.add_argument("id", nargs="?", help="only this experiment (id or unique prefix)")
    top.add_argument("--interval", "--time", "-t", type=float, default=2.0,
                     help="seconds between redraws (default 2; --time is nnictl's spelling)")
    top.add_argument("--once", action="store_true", help="print the view once and exit")
    top.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.interval <= 0:
        raise CliError(f"--interval: expected a positive number of seconds, got {args.interval}")
    try:
        while True:
            entries = ([find_experiment(args.id)] if args.id is not None
                       else [e for e in registry().entries() if is_serving(e)])
            view = render(entries, colour=use_colour())
            if args.once:
                sys.stdout.write(view)
                return EXIT_OK
            sys.stdout.write(_CLEAR + time.strftime("expctl top   %H:%M:%S   (Ctrl+C to quit)\n\n") + view)
            sys.stdout.flush()
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return EXIT_OK


def render(entries: list[RegistryEntry], colour: bool = False) -> str:
    if not entries:
        return "no experiment is running\n"
    return "\n".join(_render_one(entry, colour) for entry in entries)


def _paint(text: str, state: str, colour: bool) -> str:
    """``text`` in the colour of ``state`` (its first word: "RUNNING (gone)" is gone, red)."""
    code = _RED if state.endswith("(gone)") else _STATE_COLOURS.get(state.split()[0].upper())
    return f"\x1b[{code}m{text}\x1b[0m" if colour and code else text


def _render_one(entry: RegistryEntry, colour: bool = False) -> str:
    try:
        with experiment_store(entry) as store:
            profile, trials, finals = store.profile(), store.trials(), store.final_metrics()
    except CliError as error:  # one damaged experiment does not hide the others
        return f"{entry.id}: {printable(error, lines=True)}\n"
    status, running = shown_status(entry), is_running(entry)
    gone = status == "GONE"
    counts: dict[str, int] = {}
    for state in TrialState:  # in the states' order, each with its shown name
        for trial in trials:
            if trial.status == state:
                shown = shown_trial_status(state, gone).lower()
                counts[shown] = counts.get(shown, 0) + 1
    best = best_result(((trial_id, final.value) for trial_id, final in finals.items()),
                       minimize=profile.minimizes)
    limit = profile.config.get("maxTrialNumber")
    lines = [f"{entry.id}  {printable(entry.name or '')}  {_paint(status, status, colour)}  {_address(entry)}",
             f"  trials {len(trials)}{f'/{limit}' if limit else ''}: "
             + ", ".join(f"{_paint(state, state, colour)} {count}" for state, count in counts.items())
             + (f"   best {best[1]:g} ({best[0]})" if best else "")]
    now = time.time()
    for trial in trials:
        if trial.status == TrialState.RUNNING:
            shown = shown_trial_status(trial.status, gone).lower()
            seconds = views.trial_seconds(trial, now if running else None)
            ran = "     ?" if seconds is None else f"{seconds:6.1f}"   # ?: its experiment died under it
            lines.append(f"  {trial.trial_id}  {_paint(shown, shown, colour)} {ran}s  "
                         f"attempt {trial.attempts}  {printable(trial.parameters)}")
    return "\n".join(lines) + "\n"


def _address(entry: RegistryEntry) -> str:
    """The web UI's local address (the token is left out: `top` is often on a shared screen)."""
    try:
        return access_of(entry).address(entry.port) if entry.port else ""
    except CliError:
        return f"http://127.0.0.1:{entry.port}"

