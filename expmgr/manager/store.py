"""The experiment's store: one SQLite database (WAL mode) per experiment.

The trial runner is its only writer. The REST server reads through the
runner's connection (same thread); the Experiment API reads from any thread
through read-only connections of its own::

    store = ExperimentStore.create(paths.database, profile)
    store.add_trial(trial)
    reader = ExperimentStore.open(paths.database, readonly=True)
"""
from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from expmgr.states import ExperimentState, TrialState

SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE experiment (
    id TEXT PRIMARY KEY,
    name TEXT,
    config_json TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    start_time REAL NOT NULL,
    end_time REAL,
    port INTEGER,
    log_dir TEXT NOT NULL
);
CREATE TABLE trials (
    trial_id TEXT PRIMARY KEY,
    sequence_id INTEGER NOT NULL UNIQUE,
    parameters_json TEXT NOT NULL,
    status TEXT NOT NULL,
    submit_time REAL NOT NULL,
    start_time REAL,
    end_time REAL,
    attempts INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE attempts (
    trial_id TEXT NOT NULL REFERENCES trials(trial_id),
    attempt INTEGER NOT NULL,
    status TEXT NOT NULL,
    start_time REAL NOT NULL,
    end_time REAL,
    exit_code INTEGER,
    signal INTEGER,
    pid INTEGER,
    pid_started REAL,
    PRIMARY KEY (trial_id, attempt)
);
CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    trial_id TEXT,
    kind TEXT NOT NULL,
    detail_json TEXT
);
CREATE TABLE metrics (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    trial_id TEXT NOT NULL REFERENCES trials(trial_id),
    attempt INTEGER NOT NULL,
    sequence INTEGER NOT NULL,
    type TEXT NOT NULL,
    value_json TEXT NOT NULL,
    time REAL NOT NULL,
    UNIQUE (trial_id, attempt, sequence)
);
CREATE INDEX metrics_by_trial ON metrics (trial_id, id);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started REAL NOT NULL,
    ended REAL
);
"""


class StoreError(Exception):
    """The database is missing, of another schema version, or inconsistent."""


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


def _connect(path: Path, readonly: bool) -> sqlite3.Connection:
    if readonly:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    else:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL: in WAL mode a commit survives any crash of our processes; after a
        # power loss the last commits may roll back, the database stays consistent,
        # and trials' metrics.jsonl lines are picked up again on resume. FULL would
        # put an fsync on the event loop for every trial state change and metric.
        conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=5000")
    conn.row_factory = sqlite3.Row
    return conn


class ExperimentStore:
    """Reads and writes one experiment's database; see the module docstring."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path

    # -- opening ---------------------------------------------------------

    @classmethod
    def create(cls, path: Path, profile: ExperimentProfile) -> "ExperimentStore":
        if path.exists():
            raise StoreError(f"{path}: an experiment database already exists")
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = _connect(path, readonly=False)
        conn.executescript("BEGIN;" + _SCHEMA + "COMMIT;")
        with _transaction(conn):
            conn.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
            conn.execute(
                "INSERT INTO experiment VALUES (?,?,?,?,?,?,?,?,?)",
                (profile.id, profile.name, json.dumps(profile.config), profile.status.value,
                 profile.error, profile.start_time, profile.end_time, profile.port, profile.log_dir),
            )
        return cls(conn, path)

    @classmethod
    def open(cls, path: Path, readonly: bool = False) -> "ExperimentStore":
        if not path.is_file():
            raise StoreError(f"{path}: no experiment database here")
        conn = _connect(path, readonly=readonly)
        row = conn.execute("SELECT version FROM schema_version").fetchone()
        if row is None or row[0] != SCHEMA_VERSION:
            conn.close()
            raise StoreError(f"{path}: schema version {row and row[0]} is not the supported {SCHEMA_VERSION}")
        return cls(conn, path)

    def close(self) -> None:
        self._conn.close()

    # -- writing (the trial runner alone) ---------------------------------

    def set_config(self, config: dict[str, Any]) -> None:
        """The accepted config after a change made while the experiment runs."""
        with _transaction(self._conn):
            self._conn.execute("UPDATE experiment SET config_json = ?", (json.dumps(config),))
            self._event(None, "config_update", {})

    def record_import(self, records: list[dict[str, Any]]) -> None:
        """Results imported into the tuner (``expctl experiment import``), kept as an event."""
        with _transaction(self._conn):
            self._event(None, "import_data", {"records": records})

    def record_preemption(self) -> None:
        """The experiment process was told it is preempted (SIGUSR1) and stops resumable."""
        with _transaction(self._conn):
            self._event(None, "experiment_preempted", {})

    def was_preempted(self) -> bool:
        """Whether the last run ended on a preemption notice (a resume starts a new run)."""
        row = self._conn.execute(
            "SELECT MAX(time) FROM events WHERE kind = 'experiment_preempted'").fetchone()
        last_run = self._conn.execute("SELECT MAX(started) FROM runs").fetchone()
        return row[0] is not None and (last_run[0] is None or row[0] >= last_run[0])

    def record_kill(self, trial_id: str) -> None:
        """The user killed this trial (``expctl trial kill``): a resume does not rerun it."""
        with _transaction(self._conn):
            self._event(trial_id, "trial_killed", {})

    def record_checkpoint_source(self, trial_id: str, source_trial_id: str) -> None:
        """The trial started from a copy of ``source_trial_id``'s checkpoint folder (PBT)."""
        with _transaction(self._conn):
            self._event(trial_id, "checkpoint_copied", {"from": source_trial_id})

    def checkpoint_sources(self) -> dict[str, str]:
        """trial id -> the trial whose checkpoint folder it started from."""
        rows = self._conn.execute("SELECT trial_id, detail_json FROM events WHERE kind = 'checkpoint_copied'")
        return {trial_id: json.loads(detail)["from"] for trial_id, detail in rows}

    def killed_trials(self) -> set[str]:
        return {row[0] for row in self._conn.execute("SELECT trial_id FROM events WHERE kind = 'trial_killed'")}

    def reopen(self) -> None:
        """A resume: the experiment is running again, with no end and no error."""
        with _transaction(self._conn):
            self._conn.execute("UPDATE experiment SET end_time = NULL, error = NULL")

    def begin_run(self, started: float) -> int:
        """Record that a manager runs the experiment (first start or a resume)."""
        with _transaction(self._conn):
            return self._conn.execute("INSERT INTO runs (started) VALUES (?)", (started,)).lastrowid

    def end_run(self, run_id: int, ended: float) -> None:
        with _transaction(self._conn):
            self._conn.execute("UPDATE runs SET ended = ? WHERE id = ?", (ended, run_id))

    def seconds_run(self) -> float:
        """How long managers ran the experiment so far; a run that died without an end
        counts until its last recorded event."""
        total = 0.0
        for started, ended in self._conn.execute("SELECT started, ended FROM runs").fetchall():
            if ended is None:
                ended = self._conn.execute("SELECT MAX(time) FROM events WHERE time >= ?",
                                           (started,)).fetchone()[0] or started
            total += max(0.0, ended - started)
        return total

    def set_experiment_status(self, status: ExperimentState, *, error: str | None = None,
                              end_time: float | None = None) -> None:
        with _transaction(self._conn):
            self._conn.execute(
                "UPDATE experiment SET status = ?, error = COALESCE(?, error), end_time = COALESCE(?, end_time)",
                (status.value, error, end_time),
            )
            self._event(None, "experiment_status", {"status": status.value, "error": error})

    def add_trial(self, trial: TrialRecord) -> None:
        with _transaction(self._conn):
            self._conn.execute(
                "INSERT INTO trials (trial_id, sequence_id, parameters_json, status, submit_time) "
                "VALUES (?,?,?,?,?)",
                (trial.trial_id, trial.sequence_id, json.dumps(trial.parameters),
                 trial.status.value, trial.submit_time),
            )
            self._event(trial.trial_id, "trial_status", {"status": trial.status.value})

    def _check_transition(self, trial_id: str, new: TrialState) -> None:
        row = self._conn.execute("SELECT status FROM trials WHERE trial_id = ?", (trial_id,)).fetchone()
        if row is None:
            raise StoreError(f"no trial {trial_id!r}")
        old = TrialState(row[0])
        if old != new and not old.can_become(new):
            raise StoreError(f"trial {trial_id} cannot go from {old.value} to {new.value}")

    def start_attempt(self, trial_id: str, attempt: int, start_time: float, pid: int | None = None,
                      pid_started: float | None = None) -> None:
        """``pid`` and its process's start time let a resume find the process if it outlived
        its manager (a pid alone could be another process's by then)."""
        with _transaction(self._conn):
            self._check_transition(trial_id, TrialState.RUNNING)
            self._conn.execute(
                "INSERT INTO attempts (trial_id, attempt, status, start_time, pid, pid_started) VALUES (?,?,?,?,?,?)",
                (trial_id, attempt, TrialState.RUNNING.value, start_time, pid, pid_started),
            )
            self._conn.execute(
                "UPDATE trials SET status = ?, attempts = ?, start_time = COALESCE(start_time, ?) "
                "WHERE trial_id = ?",
                (TrialState.RUNNING.value, attempt, start_time, trial_id),
            )
            self._event(trial_id, "trial_status", {"status": "RUNNING", "attempt": attempt})

    def end_attempt(self, trial_id: str, attempt: int, status: TrialState, end_time: float,
                    exit_code: int | None, signal: int | None, trial_status: TrialState | None = None) -> None:
        """Record how an attempt ended; the trial takes ``trial_status`` (default: ``status``),
        e.g. WAITING when the attempt failed and the trial will be retried."""
        trial_status = trial_status or status
        with _transaction(self._conn):
            self._check_transition(trial_id, trial_status)
            self._conn.execute(
                "UPDATE attempts SET status = ?, end_time = ?, exit_code = ?, signal = ? "
                "WHERE trial_id = ? AND attempt = ?",
                (status.value, end_time, exit_code, signal, trial_id, attempt),
            )
            self._conn.execute(
                "UPDATE trials SET status = ?, end_time = ? WHERE trial_id = ?",
                (trial_status.value, end_time if trial_status.is_finished() else None, trial_id),
            )
            self._event(trial_id, "trial_status", {"status": trial_status.value, "attempt": attempt,
                                                   "attempt_status": status.value,
                                                   "exit_code": exit_code, "signal": signal})

    def set_trial_status(self, trial_id: str, status: TrialState, end_time: float | None = None) -> None:
        with _transaction(self._conn):
            self._check_transition(trial_id, status)
            self._conn.execute("UPDATE trials SET status = ?, end_time = ? WHERE trial_id = ?",
                               (status.value, end_time, trial_id))
            self._event(trial_id, "trial_status", {"status": status.value})

    def add_metric(self, metric: MetricRecord) -> bool:
        """Store a metric; False when this (trial, attempt, sequence) was stored before."""
        with _transaction(self._conn):
            cursor = self._conn.execute(
                "INSERT OR IGNORE INTO metrics (trial_id, attempt, sequence, type, value_json, time) "
                "VALUES (?,?,?,?,?,?)",
                (metric.trial_id, metric.attempt, metric.sequence, metric.type,
                 json.dumps(metric.value), metric.time),
            )
            return cursor.rowcount == 1

    def _event(self, trial_id: str | None, kind: str, detail: dict[str, Any]) -> None:
        self._conn.execute("INSERT INTO events (time, trial_id, kind, detail_json) VALUES (?,?,?,?)",
                           (time.time(), trial_id, kind, json.dumps(detail)))

    # -- reading -----------------------------------------------------------

    def profile(self) -> ExperimentProfile:
        row = self._conn.execute("SELECT * FROM experiment").fetchone()
        return ExperimentProfile(
            id=row["id"], name=row["name"], config=json.loads(row["config_json"]),
            status=ExperimentState(row["status"]), error=row["error"], start_time=row["start_time"],
            end_time=row["end_time"], port=row["port"], log_dir=row["log_dir"],
        )

    def trials(self) -> list[TrialRecord]:
        return [_trial(row) for row in self._conn.execute("SELECT * FROM trials ORDER BY sequence_id")]

    def trial(self, trial_id: str) -> TrialRecord | None:
        row = self._conn.execute("SELECT * FROM trials WHERE trial_id = ?", (trial_id,)).fetchone()
        return _trial(row) if row else None

    def trial_by_sequence(self, sequence_id: int) -> TrialRecord | None:
        row = self._conn.execute("SELECT * FROM trials WHERE sequence_id = ?", (sequence_id,)).fetchone()
        return _trial(row) if row else None

    def attempts(self, trial_id: str | None = None) -> list[AttemptRecord]:
        query = "SELECT * FROM attempts"
        args: tuple = ()
        if trial_id is not None:
            query += " WHERE trial_id = ?"
            args = (trial_id,)
        rows = self._conn.execute(query + " ORDER BY start_time", args)
        return [AttemptRecord(trial_id=r["trial_id"], attempt=r["attempt"], status=TrialState(r["status"]),
                              start_time=r["start_time"], end_time=r["end_time"],
                              exit_code=r["exit_code"], signal=r["signal"], pid=r["pid"],
                              pid_started=r["pid_started"]) for r in rows]

    def failed_attempts(self, trial_id: str) -> int:
        """How many of the trial's ended attempts FAILED or CRASHED."""
        return self._conn.execute(
            "SELECT COUNT(*) FROM attempts WHERE trial_id = ? AND status IN ('FAILED', 'CRASHED')",
            (trial_id,)).fetchone()[0]

    def metrics(self, trial_id: str | None = None) -> list[MetricRecord]:
        query = "SELECT * FROM metrics"
        args: tuple = ()
        if trial_id is not None:
            query += " WHERE trial_id = ?"
            args = (trial_id,)
        return [_metric(row) for row in self._conn.execute(query + " ORDER BY id", args)]

    def final_metrics(self) -> dict[str, MetricRecord]:
        """The last FINAL metric of each trial's last attempt, for trials that have one."""
        rows = self._conn.execute(
            "SELECT metrics.* FROM metrics JOIN trials USING (trial_id) "
            "WHERE type = 'FINAL' AND metrics.attempt = trials.attempts ORDER BY id")
        return {metric.trial_id: metric for metric in map(_metric, rows)}

    def status_counts(self) -> dict[TrialState, int]:
        rows = self._conn.execute("SELECT status, COUNT(*) FROM trials GROUP BY status")
        return {TrialState(status): count for status, count in rows}

    def next_sequence_id(self) -> int:
        row = self._conn.execute("SELECT MAX(sequence_id) FROM trials").fetchone()
        return 0 if row[0] is None else row[0] + 1


def _trial(row: sqlite3.Row) -> TrialRecord:
    return TrialRecord(
        trial_id=row["trial_id"], sequence_id=row["sequence_id"],
        parameters=json.loads(row["parameters_json"]), status=TrialState(row["status"]),
        submit_time=row["submit_time"], start_time=row["start_time"], end_time=row["end_time"],
        attempts=row["attempts"],
    )


def _metric(row: sqlite3.Row) -> MetricRecord:
    return MetricRecord(trial_id=row["trial_id"], attempt=row["attempt"], sequence=row["sequence"],
                        type=row["type"], value=json.loads(row["value_json"]), time=row["time"])


class _transaction:
    """``with _transaction(conn):`` runs the block in one committed transaction."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc, tb) -> None:
        self._conn.execute("ROLLBACK" if exc_type else "COMMIT")
