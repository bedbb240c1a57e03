"""``expctl top``: a live view of the running experiments and their trials, redrawn
every ``--interval`` seconds until Ctrl+C (``--once`` prints it once)."""
from __future__ import annotations

import argparse
import sys
import time

from expmgr.cli.common import EXIT_OK, CliError, access_of, experiment_store, find_experiment, is_running, registry
from expmgr.config import ExperimentConfig
from expmgr.store.registry import RegistryEntry
from expmgr.store import metric_number
from expmgr.states import TrialState

_CLEAR = "\x1b[H\x1b[2J"


def add_parser(commands: argparse._SubParsersAction) -> None:
    top = commands.add_parser("top", help="a live view of running experiments and their trials")
    top.add_argument("id", nargs="?", help="only this experiment (id or unique prefix)")
    top.add_argument("--interval", type=float, default=2.0, help="seconds between redraws (default 2)")
    top.add_argument("--once", action="store_true", help="print the view once and exit")
    top.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.interval <= 0:
        raise CliError(f"--interval: expected a positive number of seconds, got {args.interval}")
    try:
        while True:
            entries = ([find_experiment(args.id)] if args.id is not None
                       else [e for e in registry().entries() if is_running(e)])
            view = render(entries)
            if args.once:
                sys.stdout.write(view)
                return EXIT_OK
            sys.stdout.write(_CLEAR + time.strftime("expctl top   %H:%M:%S   (Ctrl+C to quit)\n\n") + view)
            sys.stdout.flush()
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return EXIT_OK


def render(entries: list[RegistryEntry]) -> str:
    if not entries:
        return "no experiment is running\n"
    return "\n".join(_render_one(entry) for entry in entries)


def _render_one(entry: RegistryEntry) -> str:
    try:
        with experiment_store(entry) as store:
            profile, trials, finals = store.profile(), store.trials(), store.final_metrics()
    except CliError as error:  # one damaged experiment does not hide the others
        return f"{entry.id}: {error}\n"
    counts = {state: sum(trial.status == state for trial in trials) for state in TrialState}
    maximize = not ExperimentConfig.from_dict(profile.config).minimizes
    scores = [(number, trial_id) for trial_id, final in finals.items()
              if (number := metric_number(final.value)) is not None]   # NaN is never the best
    best = (max if maximize else min)(scores, default=None)
    limit = profile.config.get("maxTrialNumber")
    lines = [f"{entry.id}  {entry.name or ''}  {profile.status.value}  {_address(entry)}",
             f"  trials {len(trials)}{f'/{limit}' if limit else ''}: "
             + ", ".join(f"{state.value.lower()} {count}" for state, count in counts.items() if count)
             + (f"   best {best[0]:g} ({best[1]})" if best else "")]
    now = time.time()
    for trial in trials:
        if trial.status == TrialState.RUNNING:
            lines.append(f"  {trial.trial_id}  running {now - (trial.start_time or now):6.1f}s  "
                         f"attempt {trial.attempts}  {trial.parameters}")
    return "\n".join(lines) + "\n"


def _address(entry: RegistryEntry) -> str:
    """The web UI's local address (the token is left out: `top` is often on a shared screen)."""
    try:
        return access_of(entry).address(entry.port) if entry.port else ""
    except CliError:
        return f"http://127.0.0.1:{entry.port}"

