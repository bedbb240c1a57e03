"""The store's interface: what the server, the CLI and the Experiment API read (``Store``),
what the trial runner writes (``WritableStore``), and how a backend opens and creates one
(``StoreBackend``). ``sqlite.py`` implements them; code above the store names these, never
the SQLite class, so another backend is one module and the ``BACKEND`` line in
``expmgr/store/__init__.py``::

    def best(store: Store) -> str | None:      # any backend, opened read-only or not
        numbers = {t: n for t, n in store.final_numbers().items() if n is not None}
        return max(numbers, key=numbers.__getitem__, default=None)

Errors are the store's own (``errors.py``), never a backend's: a read of damaged data
raises ``StoreUnreadable``, a store of a newer schema ``StoreTooNew``, and a read or write
refused for now ``StoreUnavailable`` (``StoreBusy``: locked by another process;
``StoreUnwritable``: a full or read-only disk), which the runner waits out.
"""
from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol, Sequence

from expmgr.layout import ExperimentPaths
from expmgr.states import ExperimentState, TrialState
from expmgr.store.records import AttemptRecord, Changes, ExperimentProfile, MetricRecord, TrialRecord


class Store(Protocol):
    """One experiment's store, as read: by the server (on the runner's store or a read-only
    one), the CLI and the Experiment API (read-only ones of their own)."""

    @property
    def path(self) -> Path:
        """Where it is kept, for messages."""
        ...

    def __enter__(self) -> Store: ...

    def __exit__(self, *exc_info: object) -> None: ...

    def close(self) -> None: ...

    def snapshot(self) -> AbstractContextManager[None]:
        """``with store.snapshot():`` the reads inside see one committed state."""
        ...

    def add_commit_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after each committed write, in the writing thread (never, on
        a read-only store); it must return quickly."""
        ...

    def remove_commit_listener(self, listener: Callable[[], None]) -> None: ...

    def profile(self) -> ExperimentProfile: ...

    def trials(self, offset: int = 0, limit: int | None = None) -> list[TrialRecord]:
        """Trials in sequence order; ``offset`` and ``limit`` select a page."""
        ...

    def trial(self, trial_id: str) -> TrialRecord | None: ...

    def trial_by_sequence(self, sequence_id: int) -> TrialRecord | None: ...

    def sequence_ids(self) -> dict[str, int]:
        """trial id -> sequence id, of every trial."""
        ...

    def next_sequence_id(self) -> int: ...

    def status_counts(self) -> dict[TrialState, int]: ...

    def attempts(self, trial_id: str | None = None) -> list[AttemptRecord]:
        """Attempts (of one trial, or all) by start time."""
        ...

    def hosts(self) -> list[str]:
        """The hosts attempts ran on, as their training services named them (those known), sorted."""
        ...

    def failed_attempts(self, trial_id: str) -> int:
        """How many of the trial's ended attempts FAILED or CRASHED."""
        ...

    def metrics(self, trial_id: str | None = None) -> list[MetricRecord]:
        """Metrics (of one trial, or all) in the order stored."""
        ...

    def final_metrics(self, trial_ids: Iterable[str] | None = None) -> dict[str, MetricRecord]:
        """The last FINAL metric of each trial's last attempt, for trials that have one."""
        ...

    def final_results(self) -> list[tuple[str, int, dict[str, Any], Any]]:
        """(trial id, sequence id, parameters, final result's value) of each trial with a final
        result (as ``final_metrics``), in the order the results were stored: what the web UI's
        analysis (importance, the best trials under a key) reads, without whole trial records."""
        ...

    def final_result_keys(self) -> tuple[list[str | None], list[Any]]:
        """The keys final results (as ``final_metrics``) have a number under, each once, in
        the order first reported (None: a plain number's), and the values the store could
        not look into (a dict holding NaN), for the caller to read: ``results.stored_result_keys``
        makes one list of them, without reading every result."""
        ...

    def final_numbers(self) -> dict[str, float | None]:
        """The number (``metrics.metric_number``) of each final result, by trial id."""
        ...

    def latest_metrics(self) -> list[MetricRecord]:
        """Each trial's latest PERIODICAL metric and its final one, in the order stored."""
        ...

    def metrics_of_sequence_range(self, first: int, last: int) -> list[MetricRecord]:
        """The metrics of the trials whose sequence id is in [first, last], in the order stored."""
        ...

    def killed_trials(self) -> set[str]:
        """The trials the user killed: a resume does not rerun them."""
        ...

    def checkpoint_sources(self) -> dict[str, str]:
        """trial id -> the trial whose checkpoint folder it started from."""
        ...

    def was_preempted(self) -> bool:
        """Whether the last run ended on a preemption notice."""
        ...

    def latest_preemption(self, after_event: int = 0) -> tuple[float | None, int]:
        """The time of the latest preemption notice among the events after ``after_event``
        (None: none) and the last event's id, to keep ``was_preempted`` up to date."""
        ...

    def preempted_in_last_run(self, notice_time: float | None) -> bool:
        """Whether a preemption notice at ``notice_time`` (None: none) ended the last run."""
        ...

    def open_run(self) -> tuple[int, float] | None:
        """The latest run with no end recorded (its manager died, or runs): its id and the
        time of its last recorded event (its start if none)."""
        ...

    def seconds_run(self, until: float | None = None) -> float:
        """How long managers ran the experiment so far (a run without an end: until ``until``)."""
        ...

    def runs(self) -> list[tuple[float, float | None, bool]]:
        """(started, ended, same_manager) of each run of a manager (the first start, then each
        resume or more trials after DONE), in the order they began; ended is None while that
        run's manager runs, or after it died until a resume ends it where it was last known
        alive; same_manager: begun by the manager that served the experiment since the run
        before (more trials after DONE), so no manager was away in between."""
        ...

    def cursor(self) -> str:
        """The cursor of the current state: ``changes(since=cursor())`` is empty until a write."""
        ...

    def changes(self, since: str | None = None, limit: int | None = None, *, metrics: bool = True) -> Changes:
        """The trials and metrics changed after ``since``; see ``Changes``. With ``metrics``
        False, the changed trials alone (``metrics_json`` empty, the cursor past every metric)."""
        ...


class WritableStore(Store, Protocol):
    """One experiment's store as the trial runner, its only writer, keeps it. Each write is
    one transaction with its event, and tells the commit listeners."""

    def set_busy_timeout(self, milliseconds: int) -> None:
        """How long a write waits for another connection's lock before it fails."""
        ...

    def reopen(self) -> None:
        """A resume: the experiment is running again, with no end and no error."""
        ...

    def set_config(self, config: dict[str, Any]) -> None: ...

    def set_experiment_status(self, status: ExperimentState, *, error: str | None = None,
                              end_time: float | None = None) -> None: ...

    def begin_run(self, started: float, *, same_manager: bool = False) -> int:
        """Record that a manager runs the experiment; the run's id, for ``end_run``.
        ``same_manager``: the one that served it since the run before (see ``runs``)."""
        ...

    def end_run(self, run_id: int, ended: float) -> None: ...

    def add_trial(self, trial: TrialRecord) -> None: ...

    def start_attempt(self, trial_id: str, attempt: int, start_time: float, pid: int | None = None,
                      pid_started: float | None = None, host: str | None = None) -> None: ...

    def end_attempt(self, trial_id: str, attempt: int, status: TrialState, end_time: float,
                    exit_code: int | None, signal: int | None, trial_status: TrialState | None = None) -> None: ...

    def set_trial_status(self, trial_id: str, status: TrialState, end_time: float | None = None) -> None: ...

    def set_waiting_reason(self, trial_id: str, reason: str | None) -> None:
        """Say why the WAITING trial is not started yet (None: nothing but its turn)."""

    def add_metric(self, metric: MetricRecord) -> bool:
        """Store a metric; False when this (trial, attempt, sequence) was stored before."""
        ...

    def record_import(self, records: Sequence[dict[str, Any]]) -> None: ...

    def record_preemption(self) -> None: ...

    def record_store_outage(self, since: float, error: str) -> None: ...

    def record_kill(self, trial_id: str) -> None: ...

    def record_checkpoint_source(self, trial_id: str, source_trial_id: str) -> None: ...


class StoreBackend(Protocol):
    """Opens and creates the stores of one kind, at an experiment's paths."""

    def open(self, paths: ExperimentPaths, readonly: bool) -> WritableStore:
        """The store at ``paths``; StoreError if there is none or it cannot be read. Opened
        ``readonly``, its writes fail."""
        ...

    def create(self, paths: ExperimentPaths, profile: ExperimentProfile) -> WritableStore:
        """A new, empty store at ``paths`` holding ``profile``; StoreError if one is there."""
        ...
