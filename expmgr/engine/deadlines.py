"""Deadlines: the experiment's ``maxExperimentDuration`` and each running attempt's
``maxTrialDuration`` and ``trialIdleTimeout``. A ``Deadlines`` knows when the run's clock
started and each attempt's clocks (from its process's start); the runner asks it how long
it may sleep and which trials passed a deadline now, and stops those itself::

    deadlines = Deadlines(started=clock() - store.seconds_run())
    deadlines.trial_started(trial_id, attempt, now, max_trial_duration=config.max_trial_duration)
    deadlines.active(trial_id, attempt, now)             # a report came
    for trial_id, reason in deadlines.overdue(now, config.trial_idle_timeout, files.last_output_time):
        ...                                              # stop it as ``reason``
    await asyncio.wait_for(wake.wait(), deadlines.seconds_to_next(now, config))

Times are the runner's clock (a test's own clock).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from expmgr.states import TrialState

if TYPE_CHECKING:
    from expmgr.config import ResolvedConfig


@dataclass
class _TrialClocks:
    attempt: int
    deadline: float | None
    """When ``maxTrialDuration`` runs out (fixed when the process starts)."""
    last_activity: float
    """When the trial last reported or wrote output; for ``trialIdleTimeout``."""


class Deadlines:
    """The run's clock and the clocks of the attempts whose process runs and that are not
    being stopped (a trial being stopped has no deadline left to pass)."""

    def __init__(self, started: float = 0.0) -> None:
        self.started = started
        """When the experiment's clock started, earlier runs (before a resume) included."""
        self._trials: dict[str, _TrialClocks] = {}

    def experiment_time_left(self, now: float, max_experiment_duration: float | None) -> float | None:
        """Seconds left of ``maxExperimentDuration`` (0 once it ran out); None without a limit."""
        if max_experiment_duration is None:
            return None
        return max(0.0, self.started + max_experiment_duration - now)

    def trial_started(self, trial_id: str, attempt: int, now: float, *, max_trial_duration: float | None) -> None:
        """The attempt's process started: its clocks start now (not at its launch)."""
        deadline = None if max_trial_duration is None else now + max_trial_duration
        self._trials[trial_id] = _TrialClocks(attempt, deadline, last_activity=now)

    def active(self, trial_id: str, attempt: int, now: float) -> None:
        """The attempt reported: it is not idle (a report of an earlier attempt changes nothing)."""
        clocks = self._trials.get(trial_id)
        if clocks is not None and clocks.attempt == attempt:
            clocks.last_activity = now

    def forget(self, trial_id: str) -> None:
        """The trial is being stopped, or its attempt ended: it has no deadline any more."""
        self._trials.pop(trial_id, None)

    def clear(self) -> None:
        """Every trial is being stopped."""
        self._trials.clear()

    def seconds_to_next(self, now: float, config: "ResolvedConfig", also: Iterable[float] = ()) -> float | None:
        """How long until the next deadline (or any of ``also``, the runner's own times):
        how long the loop may sleep; None when there is none."""
        deadlines = list(also)
        idle_timeout = config.trial_idle_timeout
        for clocks in self._trials.values():
            if clocks.deadline is not None:
                deadlines.append(clocks.deadline)
            if idle_timeout is not None:
                deadlines.append(clocks.last_activity + idle_timeout)
        left = self.experiment_time_left(now, config.max_experiment_duration)
        if left is not None:
            deadlines.append(now + left)
        return max(0.0, min(deadlines) - now) if deadlines else None

    def overdue(self, now: float, idle_timeout: float | None,
                last_output_time: Callable[[str], float]) -> list[tuple[str, TrialState]]:
        """The trials that passed a deadline now, each with the state it ends in once stopped:
        EARLY_STOPPED past ``maxTrialDuration``, CRASHED when silent for ``idle_timeout``
        (``last_output_time(trial_id)``, the service's, counts as activity). The runner
        stops them (and tells ``forget``)."""
        found = []
        for trial_id, clocks in self._trials.items():
            if clocks.deadline is not None and now >= clocks.deadline:
                found.append((trial_id, TrialState.EARLY_STOPPED))
            elif idle_timeout is not None and now >= clocks.last_activity + idle_timeout:
                clocks.last_activity = max(clocks.last_activity, last_output_time(trial_id))
                if now >= clocks.last_activity + idle_timeout:
                    found.append((trial_id, TrialState.CRASHED))
        return found


def overdue_line(trial_id: str, reason: TrialState, idle_timeout: float | None) -> tuple[int, str]:
    """The log level and line that say an overdue trial (``Deadlines.overdue``) is stopped."""
    if reason == TrialState.EARLY_STOPPED:
        return logging.INFO, f"trial {trial_id} ran past maxTrialDuration; stopping it"
    return logging.WARNING, f"trial {trial_id} was silent for {idle_timeout:g}s (trialIdleTimeout); stopping it as crashed"
