"""Stores made without an experiment: a new store, stores downgraded to older schemas, and a
count of the SQLite steps a read costs."""
from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from expmgr.states import ExperimentState
from expmgr.store import ExperimentProfile, ExperimentStore


def new_store(path: Path) -> ExperimentStore:
    return ExperimentStore.create(path, ExperimentProfile(
        id="abcd1234", name="t", config={"trialConcurrency": 1}, status=ExperimentState.INITIALIZED,
        error=None, start_time=time.time(), end_time=None, port=8080, log_dir=str(path.parent),
        platform="local", minimizes=False))


def downgrade_to_schema_2(database: Path) -> None:
    """Make a current store what version 2 wrote: no metrics.value, no metrics_final index,
    no attempts.host."""
    downgrade_to_schema_3(database)
    conn = sqlite3.connect(database)
    conn.executescript("DROP INDEX metrics_final; ALTER TABLE metrics DROP COLUMN value; "
                       "UPDATE schema_version SET version = 2;")
    conn.close()


def downgrade_to_schema_3(database: Path) -> None:
    """Make a current store what version 3 wrote: no attempts.host (nor trials.waiting_reason)."""
    downgrade_to_schema_4(database)
    conn = sqlite3.connect(database)
    conn.executescript("ALTER TABLE attempts DROP COLUMN host; UPDATE schema_version SET version = 3;")
    conn.close()


def downgrade_to_schema_6(database: Path) -> None:
    """Make a current store what version 6 wrote: no runs.same_manager."""
    conn = sqlite3.connect(database)
    conn.executescript("ALTER TABLE runs DROP COLUMN same_manager; UPDATE schema_version SET version = 6;")
    conn.close()


def downgrade_to_schema_5(database: Path) -> None:
    """Make a current store what version 5 wrote: no experiment.platform nor .minimizes, no
    trials.parameter_source."""
    downgrade_to_schema_6(database)
    conn = sqlite3.connect(database)
    conn.executescript("ALTER TABLE experiment DROP COLUMN platform; ALTER TABLE experiment DROP COLUMN minimizes; "
                       "ALTER TABLE trials DROP COLUMN parameter_source; UPDATE schema_version SET version = 5;")
    conn.close()


def downgrade_to_schema_4(database: Path) -> None:
    """Make a current store what version 4 wrote: no trials.waiting_reason."""
    downgrade_to_schema_5(database)
    conn = sqlite3.connect(database)
    conn.executescript("ALTER TABLE trials DROP COLUMN waiting_reason; UPDATE schema_version SET version = 4;")
    conn.close()


def schema_of(database: Path) -> tuple[int, list[str]]:
    conn = sqlite3.connect(database)
    try:
        version = conn.execute("SELECT version FROM schema_version").fetchone()[0]
        columns = [row[1] for row in conn.execute("PRAGMA table_info(metrics)")]
        return version, columns
    finally:
        conn.close()


class SqliteSteps:
    """Counts a connection's virtual-machine steps, in thousands, between calls of taken()."""
    GRAIN = 1000

    def __init__(self) -> None:
        self._count = 0

    def tick(self) -> int:
        self._count += 1
        return 0  # zero lets the statement go on

    def taken(self) -> int:
        count, self._count = self._count, 0
        return count


def count_sqlite_steps(reader: ExperimentStore) -> SqliteSteps:
    steps = SqliteSteps()
    reader._conn.set_progress_handler(steps.tick, SqliteSteps.GRAIN)
    return steps
