"""The SQLite database under ``sqlite.py``'s store: its tables, schema version and
migrations, how a connection is opened and written (one transaction a change), and how
its rows read as records::

    conn = connect(path, readonly=False)
    with Transaction(conn, listeners):      # committed, then each listener is called
        conn.execute("UPDATE experiment SET end_time = NULL")
"""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Callable, Sequence

from expmgr.config import stored_config_minimizes, stored_config_platform
from expmgr.metrics import metric_number
from expmgr.states import ExperimentState, TrialState
from expmgr.store.records import AttemptRecord, ExperimentProfile, MetricRecord, TrialRecord
from expmgr.store.sqlite_errors import store_errors

SCHEMA_VERSION = 7
"""3 added ``metrics.value`` and the ``metrics_final`` index, 4 ``attempts.host``, 5
``trials.waiting_reason``, 6 ``experiment.platform``, ``experiment.minimizes`` and
``trials.parameter_source``; an older
database is migrated when opened for writing and read as it is when opened read-only."""

SCHEMA = """
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
    log_dir TEXT NOT NULL,
    platform TEXT NOT NULL,
    minimizes INTEGER NOT NULL
);
CREATE TABLE trials (
    trial_id TEXT PRIMARY KEY,
    sequence_id INTEGER NOT NULL UNIQUE,
    parameters_json TEXT NOT NULL,
    status TEXT NOT NULL,
    submit_time REAL NOT NULL,
    start_time REAL,
    end_time REAL,
    attempts INTEGER NOT NULL DEFAULT 0,
    waiting_reason TEXT,
    parameter_source TEXT NOT NULL DEFAULT 'algorithm'
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
    host TEXT,
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
    value REAL,
    UNIQUE (trial_id, attempt, sequence)
);
CREATE INDEX metrics_by_trial ON metrics (trial_id, id);
CREATE INDEX metrics_final ON metrics (trial_id, attempt, id) WHERE type = 'FINAL';
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started REAL NOT NULL,
    ended REAL,
    same_manager INTEGER NOT NULL DEFAULT 0
);
"""


def connect(path: Path, readonly: bool) -> sqlite3.Connection:
    """A connection to the database at ``path``: WAL mode when writing, rows by column name."""
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


def metric_number_of_json(value_json: str) -> float | None:
    """``metrics.metric_number`` of a stored value, for a version 2 database and the migration."""
    try:
        return metric_number(json.loads(value_json))
    except ValueError:
        return None


def migrate_2_to_3(conn: sqlite3.Connection) -> None:
    """Version 3 keeps each metric's number in ``metrics.value`` (the changes answer reads
    200,000 of them; parsing ``value_json`` there took most of its time) and indexes
    FINAL metrics."""
    with Transaction(conn):
        if conn.execute("SELECT version FROM schema_version").fetchone()[0] != 2:
            return  # another process migrated it meanwhile
        conn.execute("ALTER TABLE metrics ADD COLUMN value REAL")
        rows = conn.execute("SELECT id, value_json FROM metrics").fetchall()
        conn.executemany("UPDATE metrics SET value = ? WHERE id = ?",
                         [(metric_number_of_json(value_json), metric_id) for metric_id, value_json in rows])
        conn.execute("CREATE INDEX metrics_final ON metrics (trial_id, attempt, id) WHERE type = 'FINAL'")
        conn.execute("UPDATE schema_version SET version = 3")


def migrate_3_to_4(conn: sqlite3.Connection) -> None:
    """Version 4 keeps the host each attempt ran on (earlier attempts: unknown, NULL)."""
    with Transaction(conn):
        if conn.execute("SELECT version FROM schema_version").fetchone()[0] != 3:
            return  # another process migrated it meanwhile
        conn.execute("ALTER TABLE attempts ADD COLUMN host TEXT")
        conn.execute("UPDATE schema_version SET version = 4")


def migrate_4_to_5(conn: sqlite3.Connection) -> None:
    """Version 5 keeps why a WAITING trial waits (``TrialRecord.waiting_reason``; none before)."""
    with Transaction(conn):
        if conn.execute("SELECT version FROM schema_version").fetchone()[0] != 4:
            return  # another process migrated it meanwhile
        conn.execute("ALTER TABLE trials ADD COLUMN waiting_reason TEXT")
        conn.execute("UPDATE schema_version SET version = 5")


def migrate_5_to_6(conn: sqlite3.Connection) -> None:
    """Version 6 keeps the facts resolved from the config when the experiment was created:
    its platform and optimize direction (filled in here from its stored config) and each
    trial's parameter source (earlier trials: "algorithm", as they were shown)."""
    with Transaction(conn):
        if conn.execute("SELECT version FROM schema_version").fetchone()[0] != 5:
            return  # another process migrated it meanwhile
        conn.execute("ALTER TABLE experiment ADD COLUMN platform TEXT NOT NULL DEFAULT 'local'")
        conn.execute("ALTER TABLE experiment ADD COLUMN minimizes INTEGER NOT NULL DEFAULT 0")
        conn.execute("ALTER TABLE trials ADD COLUMN parameter_source TEXT NOT NULL DEFAULT 'algorithm'")
        config = json.loads(conn.execute("SELECT config_json FROM experiment").fetchone()[0])
        conn.execute("UPDATE experiment SET platform = ?, minimizes = ?",
                     (stored_config_platform(config), int(stored_config_minimizes(config))))
        conn.execute("UPDATE schema_version SET version = 6")


def migrate_6_to_7(conn: sqlite3.Connection) -> None:
    """Version 7 tells a run begun by the manager that served the experiment before it (more
    trials given to a DONE experiment) from one begun by another (a resume): only before the
    latter was a manager away. Earlier runs are taken for resumes."""
    with Transaction(conn):
        if conn.execute("SELECT version FROM schema_version").fetchone()[0] != 6:
            return  # another process migrated it meanwhile
        conn.execute("ALTER TABLE runs ADD COLUMN same_manager INTEGER NOT NULL DEFAULT 0")
        conn.execute("UPDATE schema_version SET version = 7")


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {2: migrate_2_to_3, 3: migrate_3_to_4,
                                                                4: migrate_4_to_5, 5: migrate_5_to_6,
                                                                6: migrate_6_to_7}
"""From each older version to the next; run in order when a database is opened for writing."""


_ATTEMPT_TIMES = (
    # The seconds its ended attempts ran, and the start of its attempt still open (if any):
    # what its duration is made of (views.trial_seconds), read by the primary key's index.
    "(SELECT TOTAL(MAX(0, a.end_time - a.start_time)) FROM attempts a "
    "WHERE a.trial_id = t.trial_id AND a.end_time IS NOT NULL) AS seconds_ended, "
    "(SELECT a.start_time FROM attempts a WHERE a.trial_id = t.trial_id AND a.end_time IS NULL "
    "ORDER BY a.attempt DESC LIMIT 1) AS running_since")


def trial_columns(schema_version: int) -> str:
    """The columns to select for ``trial_of_row`` from ``trials t``: its own, the host of
    its latest attempt (NULL in a version 2 or 3 store, which kept none), its waiting reason
    (NULL before version 5), its parameter source ("algorithm" before version 6) and its
    attempts' times."""
    older = "" if schema_version >= 6 else "'algorithm' AS parameter_source, "
    if schema_version < 4:
        return f"t.*, NULL AS host, NULL AS waiting_reason, {older}{_ATTEMPT_TIMES}"
    host = "(SELECT a.host FROM attempts a WHERE a.trial_id = t.trial_id AND a.attempt = t.attempts) AS host"
    if schema_version < 5:
        return f"t.*, NULL AS waiting_reason, {older}{host}, {_ATTEMPT_TIMES}"
    return f"t.*, {older}{host}, {_ATTEMPT_TIMES}"


def trial_of_row(row: sqlite3.Row) -> TrialRecord:
    """A trial of a row selected with ``trial_columns``."""
    return TrialRecord(
        trial_id=row["trial_id"], sequence_id=row["sequence_id"],
        parameters=json.loads(row["parameters_json"]), status=TrialState(row["status"]),
        submit_time=row["submit_time"], start_time=row["start_time"], end_time=row["end_time"],
        attempts=row["attempts"], host=row["host"], waiting_reason=row["waiting_reason"],
        parameter_source=row["parameter_source"], seconds_ended=row["seconds_ended"], running_since=row["running_since"],
    )


def metric_of_row(row: sqlite3.Row) -> MetricRecord:
    return MetricRecord(trial_id=row["trial_id"], attempt=row["attempt"], sequence=row["sequence"],
                        type=row["type"], value=json.loads(row["value_json"]), time=row["time"])




def attempt_of_row(row: sqlite3.Row) -> AttemptRecord:
    return AttemptRecord(trial_id=row["trial_id"], attempt=row["attempt"], status=TrialState(row["status"]),
                         start_time=row["start_time"], end_time=row["end_time"],
                         exit_code=row["exit_code"], signal=row["signal"], pid=row["pid"],
                         pid_started=row["pid_started"],
                         host=row["host"] if "host" in row.keys() else None)  # not in a version 2 or 3 store


def profile_of_row(row: sqlite3.Row) -> ExperimentProfile:
    config = json.loads(row["config_json"])
    if "platform" in row.keys():
        platform, minimizes = row["platform"], bool(row["minimizes"])
    else:  # a store before version 6, read-only (not migrated): as the migration fills them in
        platform, minimizes = stored_config_platform(config), stored_config_minimizes(config)
    return ExperimentProfile(
        id=row["id"], name=row["name"], config=config,
        status=ExperimentState(row["status"]), error=row["error"], start_time=row["start_time"],
        end_time=row["end_time"], port=row["port"], log_dir=row["log_dir"], platform=platform, minimizes=minimizes,
    )


class Snapshot:
    """A read transaction (see ``ExperimentStore.snapshot``); nested ones join the outer.
    Entered and left outside the store's methods, it raises the store's errors itself."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self._path = path
        self._owner = False

    def __enter__(self) -> None:
        if not self._conn.in_transaction:
            with store_errors(self._path):
                self._conn.execute("BEGIN")
            self._owner = True

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._owner:
            self._owner = False
            with store_errors(self._path):
                self._conn.execute("COMMIT")


class Transaction:
    """``with Transaction(conn, listeners):`` runs the block in one committed
    transaction, then calls each listener."""

    def __init__(self, conn: sqlite3.Connection, listeners: Sequence[Callable[[], None]] = ()) -> None:
        self._conn = conn
        self._listeners = listeners

    def __enter__(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self._rollback()
            return
        try:
            self._conn.execute("COMMIT")
        except sqlite3.Error:
            # A COMMIT refused (database locked, disk full) leaves the transaction open;
            # the next write would fail with "cannot start a transaction within a transaction".
            self._rollback()
            raise
        for listener in self._listeners:
            listener()
