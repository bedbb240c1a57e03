"""What a store holds and answers, whatever keeps it: the records of an experiment, its
trials, their attempts and metrics, the changes since a cursor (its errors: ``errors.py``)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from expmgr.states import ExperimentState, TrialState


@dataclass
class TrialRecord:
    trial_id: str
    sequence_id: int
    parameters: dict[str, Any]
    status: TrialState
    submit_time: float
    start_time: float | None = None
    end_time: float | None = None
    attempts: int = 0
    host: str | None = None
    seconds_ended: float = 0.0
    """How long its ended attempts ran, all together (see ``views.trial_seconds``)."""
    running_since: float | None = None
    """When its attempt still open started (None: none is)."""
    """Where its latest attempt ran (``AttemptRecord.host``); None before it started, or not known."""
    waiting_reason: str | None = None
    """Why a WAITING trial is not started yet, as the runner last said (no free GPU); None
    once it starts, and for a trial that waits for nothing but its turn."""
    parameter_source: str = "algorithm"
    """NNI's ``parameter_source``: "algorithm" for the tuner's parameters, "customized" for a
    strategy's trial; written when the trial is created (trials of a store from before version
    6 read "algorithm")."""


@dataclass
class AttemptRecord:
    trial_id: str
    attempt: int
    status: TrialState
    start_time: float
    end_time: float | None
    exit_code: int | None
    signal: int | None
    pid: int | None = None
    pid_started: float | None = None
    host: str | None = None
    """Where the attempt ran, as its training service named it (None: not known)."""


@dataclass
class MetricRecord:
    trial_id: str
    attempt: int
    sequence: int
    type: str  # "PERIODICAL" or "FINAL", NNI's names
    value: Any
    time: float = field(default_factory=time.time)


@dataclass
class ExperimentProfile:
    id: str
    name: str | None
    config: dict[str, Any]
    status: ExperimentState
    error: str | None
    start_time: float
    end_time: float | None
    port: int | None
    log_dir: str
    platform: str
    """Where its trials run (``expmgr.config.PLATFORMS``' name), as resolved when it was created."""
    minimizes: bool
    """Whether lower results are better (its tuner's optimize mode), as resolved when it was
    created: readers use this, not the config's tuner."""


@dataclass
class Changes:
    """The answer of ``Store.changes``."""

    cursor: str
    """Where the next question starts: ``changes(since=cursor)``."""
    full: bool
    """Everything is here (the cursor asked from was None, of another experiment, or unknown)."""
    more: bool
    """The limit cut this answer short: ask again from ``cursor``."""
    trials: list[TrialRecord]
    """The changed trials, in their present state, by sequence id."""
    finals: dict[str, MetricRecord]
    """The final metric of each trial in ``trials`` that has one."""
    metrics_json: str
    """The added metrics as one JSON array (built by SQLite: there may be 200,000) of
    ``[trialId, sequenceId, type, sequence, number, timeMs, attempt]``, in the order stored;
    ``number`` is the value or its ``default`` (null when not finite)."""
