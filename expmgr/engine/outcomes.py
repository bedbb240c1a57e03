"""How an attempt ends, from how its process exited (the exit-code contract of
docs/architecture.md): SUCCEEDED on exit 0; FAILED on another exit code; CRASHED when
killed by a signal nobody asked for; PREEMPTED when the trial said ``mark_preempting()``
(or its node was taken away); the runner's own reason when it stopped the trial. And
whether the trial runs again: a preempted trial first in line, a failed or crashed one
while ``maxTrialRetries`` allows; never once the experiment stops::

    outcome = exit_outcome(exit_code, signum, stop_reason=None, preempted=False, failed=False,
                           stopping=False, marked_preempting=lambda: files.marked_preempting(trial_id, 1),
                           failed_attempts=lambda: store.failed_attempts(trial_id), max_retries=2)
    if outcome.again: ...                     # requeue (outcome.first: before the others)

And how the experiment ends: its trials still running or waiting end as
``cancel_reason(error, stopping)``, the experiment as ``final_state(error, stopping)``,
with ``failure_text(exception)`` as its error when the loop raised.
"""
from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from expmgr.engine.dispatching import DispatcherError
from expmgr.states import ExperimentState, TrialState
from expmgr.training.base import TrainingServiceError


class StrategyFailed(Exception):
    """The strategy raised; its traceback is the message."""


class HandlerFailed(Exception):
    """An event handler of the loop raised (a bug of ours); its traceback is the message."""


@dataclass(frozen=True)
class ExitOutcome:
    status: TrialState
    """How the attempt ended (stored with the attempt)."""
    again: bool
    """The trial runs again as its next attempt (it goes back to WAITING); otherwise it
    ended as ``status``."""

    @property
    def first(self) -> bool:
        """Run before the others (a preempted trial): counted neither as a failure nor as a new trial."""
        return self.again and self.status == TrialState.PREEMPTED

    def describe(self, trial_id: str, attempt: int, exit_code: int | None, signum: int | None) -> tuple[int, str]:
        """The log level and line that say it: a failure, a crash or a preemption is a
        WARNING (yellow on a terminal), so that it does not look like a success."""
        if self.status == TrialState.PREEMPTED:
            return logging.WARNING, (f"trial {trial_id} attempt {attempt} PREEMPTED; "
                                     + ("it runs again first" if self.again else "a resume runs it again first"))
        how = f"exit code {exit_code}" if signum is None else f"signal {signum}"
        level = logging.WARNING if self.status in (TrialState.FAILED, TrialState.CRASHED) else logging.INFO
        if self.again:
            return level, f"trial {trial_id} attempt {attempt} {self.status.value} ({how}); retrying"
        return level, f"trial {trial_id} {self.status.value} ({how})"


def exit_outcome(exit_code: int | None, signum: int | None, *, stop_reason: TrialState | None,
                 preempted: bool, failed: bool, stopping: bool, marked_preempting: Callable[[], bool],
                 failed_attempts: Callable[[], int], max_retries: int) -> ExitOutcome:
    """The end of an attempt that exited with ``exit_code`` or by ``signum``.
    ``stop_reason``: why the runner stopped it, if it did; ``preempted``: the service says
    its node was taken away; ``failed``: the service killed it for a fault of its own;
    ``stopping``: the experiment stops (nothing runs again now; a resume runs a preempted
    trial). ``marked_preempting`` and ``failed_attempts`` are asked only when they matter
    (they read the trial's files and the store)."""
    if preempted or (exit_code != 0 and stop_reason != TrialState.EARLY_STOPPED and marked_preempting()):
        return ExitOutcome(TrialState.PREEMPTED, again=not stopping)
    if stop_reason is not None:
        status = stop_reason
    elif exit_code == 0:
        status = TrialState.SUCCEEDED
    elif signum is not None and not failed:
        status = TrialState.CRASHED
    else:
        status = TrialState.FAILED
    # Only failures count against maxTrialRetries (preemptions and stops do not).
    again = (status in (TrialState.FAILED, TrialState.CRASHED) and not stopping
             and failed_attempts() < max_retries)
    return ExitOutcome(status, again)


def cancel_reason(error: str | None, stopping: bool) -> TrialState:
    """How the trials still running or waiting end with the experiment: USER_CANCELED when
    a user stopped it, SYS_CANCELED when it ended by itself or failed (``error``)."""
    return TrialState.USER_CANCELED if error is None and stopping else TrialState.SYS_CANCELED


def final_state(error: str | None, stopping: bool) -> ExperimentState:
    """ERROR when it failed (``error``), STOPPED when a stop was asked for, DONE otherwise."""
    if error is not None:
        return ExperimentState.ERROR
    return ExperimentState.STOPPED if stopping else ExperimentState.DONE


def failure_text(failure: Exception) -> str:
    """The experiment's error when its loop raised ``failure``: what failed and its
    traceback (ours, when the exception is a bug of ours). Called in its except block."""
    if isinstance(failure, DispatcherError):
        return f"the tuner failed:\n{failure}"
    if isinstance(failure, StrategyFailed):
        return f"the strategy failed:\n{failure}"
    if isinstance(failure, (HandlerFailed, TrainingServiceError)):
        return str(failure)
    return traceback.format_exc()   # a bug of ours: the experiment must still end cleanly
