"""The registry of experiments: ``registry.sqlite`` in the experiments' home.

Each experiment process updates its own row; ``expctl`` lists them::

    Registry(home).add(RegistryEntry(id="ab12cd34", ...))
"""
from __future__ import annotations

import os
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from expmgr.layout import PRIVATE_FILE_MODE, REGISTRY_FILE, make_private_dir
from expmgr.states import ExperimentState
from expmgr.store._disk import machine_trouble

_SCHEMA = """
CREATE TABLE IF NOT EXISTS experiments (
    id TEXT PRIMARY KEY,
    name TEXT,
    dir TEXT NOT NULL,
    port INTEGER,
    pid INTEGER,
    status TEXT NOT NULL,
    start_time REAL NOT NULL,
    end_time REAL,
    platform TEXT
)
"""
_ADDED_COLUMNS = {"platform": "TEXT"}
"""Columns added since the first registry, added to an older one when it is opened."""


class RegistryError(Exception):
    """``registry.sqlite`` cannot be read or written: damaged, overwritten, busy, or kept
    from being used by the machine (a full or read-only disk, no free file descriptor)."""


@dataclass
class RegistryEntry:
    id: str
    name: str | None
    dir: str
    port: int | None
    pid: int | None
    status: ExperimentState
    start_time: float
    end_time: float | None = None
    platform: str | None = None
    """Where its trials run (``expmgr.config.PLATFORMS``); None: listed by an expmgr before
    the registry kept it (its store's profile has it)."""


def experiment_process_alive(entry: RegistryEntry) -> bool:
    """Whether the process recorded for ``entry`` still runs it: the pid exists, is not a
    zombie, and was started before the experiment (a reused pid was started after).
    That is while its search runs and, once it ended (DONE, ERROR), while its server
    still answers: the pid is cleared when the server closes (``closed``)."""
    if entry.pid is None:
        return False
    import psutil
    try:
        process = psutil.Process(entry.pid)
        return process.status() != psutil.STATUS_ZOMBIE and process.create_time() <= entry.start_time + 1
    except psutil.Error:
        return False


def _add_new_columns(conn: sqlite3.Connection) -> None:
    """Add to an older registry the columns it lacks (``_ADDED_COLUMNS``); another process
    adding them at the same time is fine."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(experiments)")}
    for name, kind in _ADDED_COLUMNS.items():
        if name not in present:
            try:
                conn.execute(f"ALTER TABLE experiments ADD COLUMN {name} {kind}")
            except sqlite3.OperationalError as error:
                if "duplicate column" not in str(error):
                    raise


class Registry:
    """Every experiment under one home folder; each call opens and closes its connection."""

    def __init__(self, home: Path) -> None:
        self.path = home / REGISTRY_FILE

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        """A connection for one call; SQLite's errors, and the system's in making the file,
        become a RegistryError naming the file."""
        conn = None
        try:
            conn = self._connect()
            yield conn
        except (sqlite3.DatabaseError, OSError) as error:
            raise self._error(error) from None
        finally:
            if conn is not None:
                conn.close()

    def _error(self, error: sqlite3.DatabaseError | OSError) -> RegistryError:
        if getattr(error, "sqlite_errorname", None) in ("SQLITE_BUSY", "SQLITE_LOCKED"):
            return RegistryError(f"{self.path}: busy ({error}); another process holds it, try again")
        trouble = machine_trouble(self.path, error)   # a full disk is no reason to move it aside
        if trouble is not None or isinstance(error, OSError):
            return RegistryError(trouble or f"{self.path}: cannot be used ({error})")
        return RegistryError(f"{self.path}: not a valid expmgr registry ({error}); move it aside and a new, "
                             f"empty one is made (the experiments' folders in {self.path.parent} are kept, "
                             "but no longer listed)")

    def _connect(self) -> sqlite3.Connection:
        make_private_dir(self.path.parent)
        self._create_private()
        conn = sqlite3.connect(self.path, timeout=10, isolation_level=None)
        # Switching to WAL does not wait for a busy database the way other statements
        # do (two experiments creating the registry at once): retry it briefly.
        deadline = time.monotonic() + 10
        while True:
            try:
                if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(_SCHEMA)
                _add_new_columns(conn)
                break
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() > deadline:
                    conn.close()
                    raise
                time.sleep(0.01)
        conn.row_factory = sqlite3.Row
        return conn

    def _create_private(self) -> None:
        """Create the registry file readable by its owner only (0600, whatever the umask);
        an empty file is an empty SQLite database, and SQLite gives its ``-wal`` and
        ``-shm`` files the same mode."""
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_FILE_MODE)
        except FileExistsError:
            return
        try:
            os.fchmod(fd, PRIVATE_FILE_MODE)
        finally:
            os.close(fd)

    def add(self, entry: RegistryEntry) -> None:
        with self._connection() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO experiments (id, name, dir, port, pid, status, start_time, end_time, platform) "
                "VALUES (?,?,?,?,?,?,?,?,?)",
                (entry.id, entry.name, entry.dir, entry.port, entry.pid, entry.status.value,
                 entry.start_time, entry.end_time, entry.platform),
            )

    def update(self, exp_id: str, *, status: ExperimentState, pid: int | None = None,
               end_time: float | None = None) -> None:
        with self._connection() as conn:
            conn.execute("UPDATE experiments SET status = ?, pid = ?, end_time = ? WHERE id = ?",
                         (status.value, pid, end_time, exp_id))

    def closed(self, exp_id: str) -> None:
        """The experiment's process no longer serves it (its server closed, after its
        search ended): the entry keeps its status and times, without a pid."""
        with self._connection() as conn:
            conn.execute("UPDATE experiments SET pid = NULL WHERE id = ?", (exp_id,))

    def remove(self, exp_id: str) -> None:
        with self._connection() as conn:
            conn.execute("DELETE FROM experiments WHERE id = ?", (exp_id,))

    def get(self, exp_id: str) -> RegistryEntry | None:
        return next((entry for entry in self.entries() if entry.id == exp_id), None)

    def entries(self) -> list[RegistryEntry]:
        if not self.path.exists():
            return []
        with self._connection() as conn:
            rows = conn.execute("SELECT * FROM experiments ORDER BY start_time").fetchall()
        try:
            return [RegistryEntry(id=r["id"], name=r["name"], dir=r["dir"], port=r["port"], pid=r["pid"],
                                  status=ExperimentState(r["status"]), start_time=r["start_time"],
                                  end_time=r["end_time"], platform=r["platform"]) for r in rows]
        except ValueError as error:  # a status no expmgr writes
            raise RegistryError(f"{self.path}: not a valid expmgr registry ({error})") from None
