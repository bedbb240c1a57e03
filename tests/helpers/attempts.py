"""What the store says of a run's attempts, for the Ray tests."""
from __future__ import annotations

import sqlite3

from expmgr import Experiment


def attempts_of(experiment: Experiment) -> list[tuple[str, int, str, str | None]]:
    """(trial id, attempt, status, host) of every attempt, in order."""
    with sqlite3.connect(experiment.paths.database) as db:
        return db.execute("SELECT trial_id, attempt, status, host FROM attempts ORDER BY start_time, attempt").fetchall()
