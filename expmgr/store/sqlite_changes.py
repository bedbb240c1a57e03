"""What changed in a SQLite store since a cursor: the ``cursor()`` and ``changes()`` of
``sqlite.py``'s ExperimentStore, which hands them to a ChangeLog of its connection.

Every write that changes a trial records a row in `events` in the same transaction,
and metrics are only ever inserted; both tables have AUTOINCREMENT ids, given in
commit order by the one writer. So a cursor is a few ids: trials changed since are
those with a newer event or a newer FINAL metric (it changes the trial's final
result), metrics added since are those with a higher id. Writes cost nothing more.
"""
from __future__ import annotations

import json
import sqlite3

from expmgr.store.base import Store
from expmgr.store.records import Changes
from expmgr.store.sqlite_schema import trial_of_row


class ChangeLog:
    """The cursors and changes of one connection's database; ``reader`` reads its trials
    and final results (the store the log belongs to)."""

    def __init__(self, conn: sqlite3.Connection, metric_number_sql: str, trial_columns_sql: str,
                 reader: Store) -> None:
        self._conn = conn
        self._metric_number = metric_number_sql
        """SQL for a metric's number (see ``ExperimentStore``)."""
        self._trial_columns = trial_columns_sql
        """SQL selecting a trial's row from ``trials t`` (``sqlite_schema.trial_columns``)."""
        self._reader = reader
        self._experiment_id: str | None = None

    def cursor(self) -> str:
        """The cursor of the current state: ``changes(since=cursor())`` is empty until a write."""
        last_event, last_metric = self._last_ids()
        return self._cursor(last_event, last_metric, last_metric)

    def changes(self, since: str | None = None, limit: int | None = None, *, metrics: bool = True) -> Changes:
        """The trials and metrics changed after ``since`` (a cursor from ``cursor()`` or an
        earlier answer); everything (``full``) when ``since`` is None or not a cursor of
        this database's present or past. At most ``limit`` trials + metrics (a few more
        trials whose final result came meanwhile): then ``more`` says to ask again from
        the answer's cursor. With ``metrics`` False, no metrics are read (``metrics_json`` is
        empty and the cursor is past them all): what NNI's trial-jobs needs, the trials alone.
        Run it inside ``snapshot()`` when another connection writes."""
        last_event, last_metric = self._last_ids()
        start = self._parse_cursor(since)
        full = start is None or start[0] > last_event or start[2] > last_metric
        event_from, metric_from, finals_from = (0, 0, 0) if full or start is None else start
        # The cursor's parts: trials' events seen, metrics sent, final results reflected in
        # the trial views sent (ahead of the metrics while an answer is paged).
        if full and limit is None:
            trials, finals = self._reader.trials(), self._reader.final_metrics()
            metrics_json, metric_to = self._compact_metrics(0, None) if metrics else ("[]", last_metric)
            return Changes(cursor=self._cursor(last_event, metric_to, last_metric), full=True, more=False,
                           trials=trials, finals=finals, metrics_json=metrics_json)
        rows = self._conn.execute(
            "SELECT trial_id, MAX(id) AS last FROM events WHERE id > ? AND trial_id IS NOT NULL "
            "GROUP BY trial_id ORDER BY last LIMIT ?",
            (event_from, -1 if limit is None else limit + 1)).fetchall()
        metrics_json, metric_to = "[]", metric_from
        if limit is not None and len(rows) > limit:  # this answer holds trials only
            rows = rows[:limit]
            trial_ids = [trial_id for trial_id, _ in rows]
            event_to, finals_to, more = rows[-1][1], finals_from, True
        else:
            trial_ids = [trial_id for trial_id, _ in rows]
            known = set(trial_ids)
            for trial_id, in self._conn.execute(
                    "SELECT trial_id FROM metrics WHERE id > ? AND type = 'FINAL'", (finals_from,)):
                if trial_id not in known:
                    known.add(trial_id)
                    trial_ids.append(trial_id)
            event_to, finals_to = last_event, last_metric
            budget = None if limit is None else max(0, limit - len(rows))
            if not metrics:
                metric_to = last_metric
            elif budget != 0:
                metrics_json, metric_to = self._compact_metrics(metric_from, budget)
            more = metric_to < last_metric
        trial_rows = self._conn.execute(
            f"SELECT {self._trial_columns} FROM trials t WHERE trial_id IN (SELECT value FROM json_each(?)) "
            "ORDER BY sequence_id", (json.dumps(trial_ids),))
        return Changes(cursor=self._cursor(event_to, metric_to, finals_to), full=full, more=more,
                       trials=[trial_of_row(row) for row in trial_rows], finals=self._reader.final_metrics(trial_ids),
                       metrics_json=metrics_json)

    def _compact_metrics(self, after_id: int, limit: int | None) -> tuple[str, int]:
        """Metrics with an id above ``after_id`` (at most ``limit``) as a JSON array of
        compact metrics (see ``Changes.metrics_json``), and the last id in it."""
        text, last_id = self._conn.execute(
            "SELECT group_concat(j, ','), MAX(id) FROM (SELECT json_array(m.trial_id, t.sequence_id, m.type, "
            f"m.sequence, {self._metric_number}, CAST(m.time * 1000 AS INTEGER), m.attempt) AS j, m.id AS id "
            "FROM metrics m JOIN trials t ON t.trial_id = m.trial_id WHERE m.id > ? ORDER BY m.id LIMIT ?)",
            (after_id, -1 if limit is None else limit)).fetchone()
        return (f"[{text}]", last_id) if last_id is not None else ("[]", after_id)

    def _last_ids(self) -> tuple[int, int]:
        last_event = self._conn.execute("SELECT MAX(id) FROM events").fetchone()[0]
        last_metric = self._conn.execute("SELECT MAX(id) FROM metrics").fetchone()[0]
        return last_event or 0, last_metric or 0

    def _cursor(self, event_id: int, metric_id: int, finals_id: int) -> str:
        if self._experiment_id is None:
            self._experiment_id = self._conn.execute("SELECT id FROM experiment").fetchone()[0]
        return f"{self._experiment_id}-{event_id}-{metric_id}-{finals_id}"

    def _parse_cursor(self, cursor: str | None) -> tuple[int, int, int] | None:
        """(event id, metric id, finals id) of a cursor of this experiment; None for anything else."""
        parts = (cursor or "").split("-")
        # At most 18 digits: every id fits SQLite's 64-bit integer (more is no cursor of ours).
        if len(parts) != 4 or not all(part.isdigit() and part.isascii() and len(part) <= 18 for part in parts[1:]):
            return None
        if self._experiment_id is None:
            self._cursor(0, 0, 0)
        if parts[0] != self._experiment_id:
            return None
        event_id, metric_id, finals_id = map(int, parts[1:])
        return (event_id, metric_id, finals_id) if metric_id <= finals_id else None
