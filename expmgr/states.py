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
        """True for the states a trial never leaves."""
        return self in _FINISHED_TRIAL_STATES


_FINISHED_TRIAL_STATES = frozenset({
    TrialState.SUCCEEDED, TrialState.FAILED, TrialState.EARLY_STOPPED,
    TrialState.USER_CANCELED, TrialState.SYS_CANCELED, TrialState.CRASHED,
})


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
        """True once no process of the experiment runs any more."""
        return self in (ExperimentState.DONE, ExperimentState.STOPPED, ExperimentState.ERROR)
