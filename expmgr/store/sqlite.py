"""The experiment's store: one SQLite database (WAL mode) per experiment.

The trial runner is its only writer. The REST server reads through the
runner's connection (same thread) or, for large answers, a read-only one on a
worker thread; the Experiment API reads from any thread through read-only
connections of its own. Listeners hear of every committed write, and
``changes(cursor)`` tells what changed since an earlier answer::

    store = create_store(paths, profile)         # expmgr.store's factories
    store.add_commit_listener(lambda: ...)
    store.add_trial(trial)
    with open_store(paths, readonly=True) as reader, reader.snapshot():
        changes = reader.changes(since=None)    # everything; then since=changes.cursor

It implements ``base.py``'s interface; ``sqlite_schema.py`` has the tables, migrations and
transactions, ``sqlite_changes.py`` the changes since a cursor. No SQLite error leaves it:
``sqlite_errors.py`` turns each into one of the store's (``errors.py``) at every public
method, its snapshots and its opening.
"""
from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from expmgr.layout import ExperimentPaths
from expmgr.metrics import metric_number  # noqa: F401 - the store's column; also imported from here by tests
from expmgr.states import ExperimentState, TrialState
from expmgr.store.errors import StoreError, StoreTooNew, StoreUnreadable
from expmgr.store.records import AttemptRecord, Changes, ExperimentProfile, MetricRecord, TrialRecord
from expmgr.store.sqlite_changes import ChangeLog
from expmgr.store.sqlite_errors import raising_store_errors, store_errors
from expmgr.store.sqlite_schema import (MIGRATIONS, SCHEMA, SCHEMA_VERSION, Snapshot, Transaction, attempt_of_row,
                                        connect, metric_number_of_json, metric_of_row, profile_of_row, trial_columns,
                                        trial_of_row)


@raising_store_errors
class ExperimentStore:
    """Reads and writes one experiment's database; see the module docstring."""

    def __init__(self, conn: sqlite3.Connection, path: Path, schema_version: int = SCHEMA_VERSION) -> None:
        self._conn = conn
        self.path = path
        self._listeners: list[Callable[[], None]] = []
        self._metric_number = "m.value"
        """SQL for a metric's number; a version 2 database read as it is has no column for it."""
        if schema_version == 2:
            conn.create_function("metric_number", 1, metric_number_of_json, deterministic=True)
            self._metric_number = "metric_number(m.value_json)"
        self._schema_version = schema_version
        self._trial_columns = trial_columns(schema_version)
        """SQL selecting a trial's row for ``trial_of_row`` (with its latest attempt's host)."""
        self._change_log = ChangeLog(conn, self._metric_number, self._trial_columns, self)

    # -- opening ---------------------------------------------------------

    @classmethod
    def create(cls, path: Path, profile: ExperimentProfile) -> "ExperimentStore":
        if path.exists():
            raise StoreError(f"{path}: an experiment database already exists")
        path.parent.mkdir(parents=True, exist_ok=True)
        with store_errors(path):
            conn = connect(path, readonly=False)
            conn.executescript("BEGIN;" + SCHEMA + "COMMIT;")
            with Transaction(conn):
                conn.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
                conn.execute(
                    "INSERT INTO experiment VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (profile.id, profile.name, json.dumps(profile.config), profile.status.value,
                     profile.error, profile.start_time, profile.end_time, profile.port, profile.log_dir,
                     profile.platform, int(profile.minimizes)),
                )
        return cls(conn, path)

    @classmethod
    def open(cls, path: Path, readonly: bool = False) -> "ExperimentStore":
        """Open an existing database; one of an older schema version (2, 3) is migrated to
        the current version, unless ``readonly`` (then it is read as it is)."""
        if not path.is_file():
            raise StoreError(f"{path}: no experiment database here")
        with store_errors(path):
            conn = connect(path, readonly=readonly)
        try:
            with store_errors(path):  # garbage, a truncated file, another program's database; busy
                row = conn.execute("SELECT version FROM schema_version").fetchone()
                version = row and row[0]
                if version not in (*MIGRATIONS, SCHEMA_VERSION):
                    newer = isinstance(version, int) and version > SCHEMA_VERSION
                    unsupported = StoreTooNew if newer else StoreUnreadable
                    raise unsupported(f"{path}: schema version {version} is not supported (this expmgr reads 2 "
                                      f"to {SCHEMA_VERSION}); use the expmgr that created it")
                while version != SCHEMA_VERSION and not readonly:
                    MIGRATIONS[version](conn)
                    version += 1
        except StoreError:
            conn.close()
            raise
        return cls(conn, path, schema_version=version)

    def __enter__(self) -> ExperimentStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._conn.close()

    # -- telling others ------------------------------------------------------

    def add_commit_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after each committed write, in the writing thread (the
        runner's loop thread); it must return quickly (schedule work, do not do it)."""
        self._listeners.append(listener)

    def remove_commit_listener(self, listener: Callable[[], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _write(self) -> Transaction:
        return Transaction(self._conn, self._listeners)

    # -- writing (the trial runner alone) ---------------------------------

    def set_config(self, config: dict[str, Any]) -> None:
        """The accepted config after a change made while the experiment runs."""
        with self._write():
            self._conn.execute("UPDATE experiment SET config_json = ?", (json.dumps(config),))
            self._event(None, "config_update", {})

    def record_import(self, records: Sequence[dict[str, Any]]) -> None:
        """Results imported into the tuner (``expctl experiment import``), kept as an event."""
        with self._write():
            self._event(None, "import_data", {"records": records})

    def record_preemption(self) -> None:
        """The experiment process was told it is preempted (SIGUSR1) and stops resumable."""
        with self._write():
            self._event(None, "experiment_preempted", {})

    def was_preempted(self) -> bool:
        """Whether the last run ended on a preemption notice (a resume starts a new run)."""
        return self.preempted_in_last_run(self.latest_preemption()[0])

    def latest_preemption(self, after_event: int = 0) -> tuple[float | None, int]:
        """The time of the latest preemption notice among the events after ``after_event``
        (None: none) and the last event's id: read from ``after_event`` on, ``was_preempted``
        kept up to date costs the events added since (the web UI's pushes, server/facts.py)."""
        notice = self._conn.execute("SELECT MAX(time) FROM events WHERE id > ? AND kind = 'experiment_preempted'",
                                    (after_event,)).fetchone()[0]
        last_event = self._conn.execute("SELECT MAX(id) FROM events").fetchone()[0]
        return notice, last_event or 0

    def preempted_in_last_run(self, notice_time: float | None) -> bool:
        """Whether a preemption notice at ``notice_time`` (None: none) ended the last run."""
        last_run = self._conn.execute("SELECT MAX(started) FROM runs").fetchone()[0]
        return notice_time is not None and (last_run is None or notice_time >= last_run)

    def record_store_outage(self, since: float, error: str) -> None:
        """This database could not be written from ``since`` until now (kept as an event)."""
        with self._write():
            self._event(None, "store_unwritable", {"since": since, "error": error})

    def record_kill(self, trial_id: str) -> None:
        """The user killed this trial (``expctl trial kill``): a resume does not rerun it."""
        with self._write():
            self._event(trial_id, "trial_killed", {})

    def record_checkpoint_source(self, trial_id: str, source_trial_id: str) -> None:
        """The trial started from a copy of ``source_trial_id``'s checkpoint folder (PBT)."""
        with self._write():
            self._event(trial_id, "checkpoint_copied", {"from": source_trial_id})

    def checkpoint_sources(self) -> dict[str, str]:
        """trial id -> the trial whose checkpoint folder it started from."""
        rows = self._conn.execute("SELECT trial_id, detail_json FROM events WHERE kind = 'checkpoint_copied'")
        return {trial_id: json.loads(detail)["from"] for trial_id, detail in rows}

    def killed_trials(self) -> set[str]:
        return {row[0] for row in self._conn.execute("SELECT trial_id FROM events WHERE kind = 'trial_killed'")}

    def reopen(self) -> None:
        """A resume: the experiment is running again, with no end and no error."""
        with self._write():
            self._conn.execute("UPDATE experiment SET end_time = NULL, error = NULL")

    def begin_run(self, started: float, *, same_manager: bool = False) -> int:
        """Record that a manager runs the experiment (first start or a resume; ``same_manager``:
        more trials, by the manager that served it since the run before)."""
        with self._write():
            run_id = self._conn.execute("INSERT INTO runs (started, same_manager) VALUES (?, ?)",
                                        (started, int(same_manager))).lastrowid
        assert run_id is not None  # an INSERT always sets lastrowid
        return run_id

    def end_run(self, run_id: int, ended: float) -> None:
        with self._write():
            self._conn.execute("UPDATE runs SET ended = ? WHERE id = ?", (ended, run_id))

    def open_run(self) -> tuple[int, float] | None:
        """The latest run with no end recorded (its manager died, or runs): its id and the
        time of its last recorded event (its start if none)."""
        row = self._conn.execute("SELECT id, started FROM runs WHERE ended IS NULL ORDER BY id DESC LIMIT 1").fetchone()
        if row is None:
            return None
        last = self._conn.execute("SELECT MAX(time) FROM events WHERE time >= ?", (row[1],)).fetchone()[0]
        return row[0], max(row[1], last or row[1])

    def seconds_run(self, until: float | None = None) -> float:
        """How long managers ran the experiment so far; a run without an end counts until
        ``until`` (now, when its manager still runs) or else, having died, until its last
        recorded event."""
        total = 0.0
        for started, ended in self._conn.execute("SELECT started, ended FROM runs").fetchall():
            if ended is None and until is not None:
                ended = until
            elif ended is None:
                ended = self._conn.execute("SELECT MAX(time) FROM events WHERE time >= ?",
                                           (started,)).fetchone()[0] or started
            total += max(0.0, ended - started)
        return total

    def runs(self) -> list[tuple[float, float | None, bool]]:
        """(started, ended, same_manager) of each run, in the order they began (see ``base.Store.runs``)."""
        same_manager = "same_manager" if self._schema_version >= 7 else "0"   # older: every run a resume
        return [(started, ended, bool(same)) for started, ended, same in
                self._conn.execute(f"SELECT started, ended, {same_manager} FROM runs ORDER BY id").fetchall()]

    def set_experiment_status(self, status: ExperimentState, *, error: str | None = None,
                              end_time: float | None = None) -> None:
        with self._write():
            self._conn.execute(
                "UPDATE experiment SET status = ?, error = COALESCE(?, error), end_time = COALESCE(?, end_time)",
                (status.value, error, end_time),
            )
            self._event(None, "experiment_status", {"status": status.value, "error": error})

    def add_trial(self, trial: TrialRecord) -> None:
        with self._write():
            self._conn.execute(
                "INSERT INTO trials (trial_id, sequence_id, parameters_json, status, submit_time, parameter_source) "
                "VALUES (?,?,?,?,?,?)",
                (trial.trial_id, trial.sequence_id, json.dumps(trial.parameters),
                 trial.status.value, trial.submit_time, trial.parameter_source),
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
                      pid_started: float | None = None, host: str | None = None) -> None:
        """``pid`` and its process's start time let a resume find the process if it outlived
        its manager (a pid alone could be another process's by then); ``host`` is where it runs."""
        with self._write():
            self._check_transition(trial_id, TrialState.RUNNING)
            self._conn.execute(
                "INSERT INTO attempts (trial_id, attempt, status, start_time, pid, pid_started, host) "
                "VALUES (?,?,?,?,?,?,?)",
                (trial_id, attempt, TrialState.RUNNING.value, start_time, pid, pid_started, host),
            )
            self._conn.execute(
                "UPDATE trials SET status = ?, attempts = ?, start_time = COALESCE(start_time, ?), "
                "waiting_reason = NULL WHERE trial_id = ?",
                (TrialState.RUNNING.value, attempt, start_time, trial_id),
            )
            self._event(trial_id, "trial_status", {"status": "RUNNING", "attempt": attempt})

    def end_attempt(self, trial_id: str, attempt: int, status: TrialState, end_time: float,
                    exit_code: int | None, signal: int | None, trial_status: TrialState | None = None) -> None:
        """Record how an attempt ended; the trial takes ``trial_status`` (default: ``status``),
        e.g. WAITING when the attempt failed and the trial will be retried."""
        trial_status = trial_status or status
        with self._write():
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
        with self._write():
            self._check_transition(trial_id, status)
            # A trial that ends without starting (cancelled while it waited) waits no more.
            self._conn.execute("UPDATE trials SET status = ?, end_time = ?, waiting_reason = CASE WHEN ? "
                               "THEN waiting_reason END WHERE trial_id = ?",
                               (status.value, end_time, status == TrialState.WAITING, trial_id))
            self._event(trial_id, "trial_status", {"status": status.value})

    def set_waiting_reason(self, trial_id: str, reason: str | None) -> None:
        """Say why the WAITING trial ``trial_id`` is not started yet (None: it waits for nothing
        but its turn); cleared when an attempt starts."""
        with self._write():
            self._conn.execute("UPDATE trials SET waiting_reason = ? WHERE trial_id = ?", (reason, trial_id))
            self._event(trial_id, "trial_waiting", {"reason": reason})

    def add_metric(self, metric: MetricRecord) -> bool:
        """Store a metric; False when this (trial, attempt, sequence) was stored before."""
        with self._write():
            cursor = self._conn.execute(
                "INSERT OR IGNORE INTO metrics (trial_id, attempt, sequence, type, value_json, time, value) "
                "VALUES (?,?,?,?,?,?,?)",
                (metric.trial_id, metric.attempt, metric.sequence, metric.type,
                 json.dumps(metric.value), metric.time, _as_real(metric_number(metric.value))),
            )
            return cursor.rowcount == 1

    def set_busy_timeout(self, milliseconds: int) -> None:
        """How long a write waits for another connection's lock before it fails with
        ``StoreBusy`` (5 s by default; the runner, on the event loop, waits briefly and
        retries later instead)."""
        self._conn.execute(f"PRAGMA busy_timeout={int(milliseconds)}")

    def _event(self, trial_id: str | None, kind: str, detail: dict[str, Any]) -> None:
        self._conn.execute("INSERT INTO events (time, trial_id, kind, detail_json) VALUES (?,?,?,?)",
                           (time.time(), trial_id, kind, json.dumps(detail)))

    # -- reading -----------------------------------------------------------

    def profile(self) -> ExperimentProfile:
        return profile_of_row(self._conn.execute("SELECT * FROM experiment").fetchone())

    def snapshot(self) -> Snapshot:
        """``with store.snapshot():`` the reads inside see one committed state (a read
        transaction), as they must when another connection writes meanwhile."""
        return Snapshot(self._conn, self.path)

    def trials(self, offset: int = 0, limit: int | None = None) -> list[TrialRecord]:
        """Trials in sequence order; ``offset`` and ``limit`` select a page."""
        rows = self._conn.execute(f"SELECT {self._trial_columns} FROM trials t ORDER BY sequence_id LIMIT ? OFFSET ?",
                                  (-1 if limit is None else limit, offset))
        return [trial_of_row(row) for row in rows]

    def sequence_ids(self) -> dict[str, int]:
        """trial id -> sequence id, of every trial."""
        return dict(self._conn.execute("SELECT trial_id, sequence_id FROM trials").fetchall())

    def trial(self, trial_id: str) -> TrialRecord | None:
        row = self._conn.execute(f"SELECT {self._trial_columns} FROM trials t WHERE trial_id = ?",
                                 (trial_id,)).fetchone()
        return trial_of_row(row) if row else None

    def trial_by_sequence(self, sequence_id: int) -> TrialRecord | None:
        row = self._conn.execute(f"SELECT {self._trial_columns} FROM trials t WHERE sequence_id = ?",
                                 (sequence_id,)).fetchone()
        return trial_of_row(row) if row else None

    def attempts(self, trial_id: str | None = None) -> list[AttemptRecord]:
        query = "SELECT * FROM attempts"
        args: tuple = ()
        if trial_id is not None:
            query += " WHERE trial_id = ?"
            args = (trial_id,)
        rows = self._conn.execute(query + " ORDER BY start_time", args)
        return [attempt_of_row(row) for row in rows]

    def hosts(self) -> list[str]:
        """The hosts attempts ran on, as their training services named them (those known), sorted."""
        if self._schema_version < 4:
            return []
        return [host for host, in self._conn.execute(
            "SELECT DISTINCT host FROM attempts WHERE host IS NOT NULL ORDER BY host")]

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
        return [metric_of_row(row) for row in self._conn.execute(query + " ORDER BY id", args)]

    def final_metrics(self, trial_ids: Iterable[str] | None = None) -> dict[str, MetricRecord]:
        """The last FINAL metric of each trial's last attempt, for trials that have one
        (of those in ``trial_ids``, when given)."""
        query = ("SELECT m.* FROM trials t CROSS JOIN metrics m ON m.trial_id = t.trial_id "
                 "AND m.attempt = t.attempts AND m.type = 'FINAL'")  # CROSS: trials first, then metrics_final
        args: tuple = ()
        if trial_ids is not None:
            query += " WHERE t.trial_id IN (SELECT value FROM json_each(?))"
            args = (json.dumps(list(trial_ids)),)
        rows = self._conn.execute(query + " ORDER BY m.id", args)
        return {metric.trial_id: metric for metric in map(metric_of_row, rows)}

    def final_numbers(self) -> dict[str, float | None]:
        """The number (``metrics.metric_number``) of each final result ``final_metrics``
        gives, by trial id, without reading the values: the best trial of 10,000 in a few ms."""
        rows = self._conn.execute(
            f"SELECT m.trial_id, {self._metric_number} FROM trials t CROSS JOIN metrics m "
            "ON m.trial_id = t.trial_id AND m.attempt = t.attempts AND m.type = 'FINAL' ORDER BY m.id")
        return dict(rows.fetchall())

    def final_results(self) -> list[tuple[str, int, dict[str, Any], Any]]:
        rows = self._conn.execute(
            "SELECT t.trial_id, t.sequence_id, t.parameters_json, m.value_json FROM trials t CROSS JOIN metrics m "
            "ON m.trial_id = t.trial_id AND m.attempt = t.attempts AND m.type = 'FINAL' ORDER BY m.id")
        return [(trial_id, sequence_id, json.loads(parameters), json.loads(value))
                for trial_id, sequence_id, parameters, value in rows]

    def final_result_keys(self) -> tuple[list[str | None], list[Any]]:
        finals = ("FROM trials t CROSS JOIN metrics m ON m.trial_id = t.trial_id AND m.attempt = t.attempts "
                  "AND m.type = 'FINAL'")
        # SQLite's JSON functions read the values in place; a value with NaN or an infinity
        # is not JSON to them (json_valid false) and is read here instead
        keys = self._conn.execute(
            f"SELECT j.key, MIN(m.id) AS first {finals} "
            "JOIN json_each(CASE WHEN json_valid(m.value_json) THEN m.value_json ELSE '[]' END) j "
            "WHERE j.type IN ('integer', 'real') "
            "AND (j.key IS NULL OR json_type(m.value_json) = 'object') GROUP BY j.key ORDER BY first").fetchall()
        unreadable = self._conn.execute(f"SELECT m.value_json {finals} WHERE NOT json_valid(m.value_json) "
                                        "ORDER BY m.id").fetchall()
        return [key for key, _ in keys], [json.loads(text) for (text,) in unreadable]

    def latest_metrics(self) -> list[MetricRecord]:
        """Each trial's latest PERIODICAL metric and its final one (as in
        ``final_metrics``), in the order stored: NNI's metric-data-latest."""
        rows = self._conn.execute(
            "SELECT m.* FROM trials t JOIN metrics m ON m.id = (SELECT id FROM metrics "
            "  WHERE trial_id = t.trial_id AND type = 'PERIODICAL' ORDER BY id DESC LIMIT 1) "
            "UNION ALL "
            "SELECT m.* FROM trials t JOIN metrics m ON m.id = (SELECT id FROM metrics "
            "  WHERE trial_id = t.trial_id AND attempt = t.attempts AND type = 'FINAL' ORDER BY id DESC LIMIT 1) "
            "ORDER BY id")
        return [metric_of_row(row) for row in rows]

    def metrics_of_sequence_range(self, first: int, last: int) -> list[MetricRecord]:
        """The metrics of the trials whose sequence id is in [first, last], in the order stored."""
        rows = self._conn.execute(
            "SELECT m.* FROM trials t JOIN metrics m ON m.trial_id = t.trial_id "
            "WHERE t.sequence_id BETWEEN ? AND ? ORDER BY m.id", (first, last))
        return [metric_of_row(row) for row in rows]

    def status_counts(self) -> dict[TrialState, int]:
        rows = self._conn.execute("SELECT status, COUNT(*) FROM trials GROUP BY status")
        return {TrialState(status): count for status, count in rows}

    def next_sequence_id(self) -> int:
        row = self._conn.execute("SELECT MAX(sequence_id) FROM trials").fetchone()
        return 0 if row[0] is None else row[0] + 1

    # -- what changed since a cursor (sqlite_changes.py) ---------------------------

    def cursor(self) -> str:
        """The cursor of the current state: ``changes(since=cursor())`` is empty until a write."""
        return self._change_log.cursor()

    def changes(self, since: str | None = None, limit: int | None = None, *, metrics: bool = True) -> Changes:
        """The trials and metrics changed after ``since``; see ``ChangeLog.changes``."""
        return self._change_log.changes(since, limit, metrics=metrics)


class SqliteBackend:
    """Stores as SQLite databases, one per experiment, at ``paths.database``."""

    def open(self, paths: ExperimentPaths, readonly: bool) -> ExperimentStore:
        return ExperimentStore.open(paths.database, readonly=readonly)

    def create(self, paths: ExperimentPaths, profile: ExperimentProfile) -> ExperimentStore:
        return ExperimentStore.create(paths.database, profile)


def _as_real(number: float | None) -> float | None:
    """``metrics.value`` is a REAL, for sorting: an integer outside SQLite's 64-bit range
    (2**64 - 1) could not be bound as one; ``value_json`` keeps the exact value."""
    return None if number is None else float(number)


