"""Trial and experiment states, with the transitions allowed between them.

The names follow NNI (WAITING, RUNNING, SUCCEEDED, ...), extended with
PREEMPTED and CRASHED (after W&B) and PAUSED (after Ray Tune)::

    if TrialState(row["status"]).is_finished():
        ...
"""
from __future__ import annotations

import enum


class TrialState(str, enum.Enum):
    WAITING = "WAITING"
    """Created with parameters, not started yet (or requeued)."""
    RUNNING = "RUNNING"
    """Its process is alive."""
    SUCCEEDED = "SUCCEEDED"
    """Its process exited with status 0."""
    FAILED = "FAILED"
    """Its process exited with a non-zero status and no retries remain."""
    EARLY_STOPPED = "EARLY_STOPPED"
    """Stopped by an assessor or scheduler, or for running past ``maxTrialDuration``."""
    USER_CANCELED = "USER_CANCELED"
    """Stopped by the user (``expctl stop``, Ctrl+C, ``Experiment.stop()``)."""
    SYS_CANCELED = "SYS_CANCELED"
    """Stopped by expmgr itself: ``maxExperimentDuration`` ran out, or the experiment failed."""
    PREEMPTED = "PREEMPTED"
    """Marked itself preempting and exited; it is run again with the same parameters."""
    CRASHED = "CRASHED"
    """Killed by something else than expmgr or the user (OOM killer, lost node)."""
    PAUSED = "PAUSED"
    """Paused by a scheduler; may be resumed later."""

    def is_finished(self) -> bool:
        """True once the trial ended: SUCCEEDED, FAILED, EARLY_STOPPED and CRASHED, which it
        never leaves, and USER_CANCELED and SYS_CANCELED, which only a resume of its
        experiment turns back to WAITING (TRIAL_TRANSITIONS)."""
        return self in _FINISHED_TRIAL_STATES


    def can_become(self, other: "TrialState") -> bool:
        """Whether a trial in this state may move to ``other`` (see TRIAL_TRANSITIONS)."""
        return other in TRIAL_TRANSITIONS[self]


_FINISHED_TRIAL_STATES = frozenset({
    TrialState.SUCCEEDED, TrialState.FAILED, TrialState.EARLY_STOPPED,
    TrialState.USER_CANCELED, TrialState.SYS_CANCELED, TrialState.CRASHED,
})


_S = TrialState
TRIAL_TRANSITIONS: dict[TrialState, frozenset[TrialState]] = {
    # created, or waiting for a retry or a resume: it starts, or never runs
    _S.WAITING: frozenset({_S.RUNNING, _S.USER_CANCELED, _S.SYS_CANCELED}),
    # an attempt ends: finished, or WAITING for its next attempt (retry, preemption)
    _S.RUNNING: frozenset({_S.SUCCEEDED, _S.FAILED, _S.CRASHED, _S.EARLY_STOPPED, _S.USER_CANCELED,
                           _S.SYS_CANCELED, _S.PREEMPTED, _S.PAUSED, _S.WAITING}),
    # preempted while the experiment stopped, or paused by a scheduler: run again later
    _S.PREEMPTED: frozenset({_S.WAITING}),
    _S.PAUSED: frozenset({_S.WAITING, _S.USER_CANCELED, _S.SYS_CANCELED}),
    # stopped with its experiment: a resume runs it again
    _S.USER_CANCELED: frozenset({_S.WAITING}),
    _S.SUCCEEDED: frozenset(), _S.FAILED: frozenset(), _S.CRASHED: frozenset(),
    _S.EARLY_STOPPED: frozenset(),
    # cancelled by its experiment's end (a failure, maxExperimentDuration): a resume runs it again
    _S.SYS_CANCELED: frozenset({_S.WAITING}),
}
"""Every move a trial's state may make; the store refuses any other."""
del _S


class ExperimentState(str, enum.Enum):
    INITIALIZED = "INITIALIZED"
    """Created on disk; nothing runs yet."""
    RUNNING = "RUNNING"
    """Trials are being created and run."""
    NO_MORE_TRIAL = "NO_MORE_TRIAL"
    """No new trial will be created; the running ones are finishing."""
    DONE = "DONE"
    """Every trial has finished and the budget or the search space is spent."""
    STOPPING = "STOPPING"
    """A stop was asked for; trials are being stopped."""
    STOPPED = "STOPPED"
    """Stopped before it was done; it can be resumed."""
    ERROR = "ERROR"
    """The tuner, assessor or manager failed; the error is stored."""

    def is_finished(self) -> bool:
        """True once its search ended: no trial, tuner or watchdog runs any more (after DONE
        or ERROR its server may still answer, read-only, until stopped)."""
        return self in (ExperimentState.DONE, ExperimentState.STOPPED, ExperimentState.ERROR)
