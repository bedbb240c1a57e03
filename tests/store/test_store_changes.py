"""What changed since a cursor, commit listeners, schema 2 stores, and the changes of a
large store, on real SQLite files."""
from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from expmgr.layout import ExperimentPaths
from expmgr.server.live import changes_answer
from expmgr.store import SCHEMA_VERSION, ExperimentStore, MetricRecord, StoreError, TrialRecord
from expmgr.states import TrialState
from expmgr.training import trial_files
from tests.helpers.fill import fill_store
from tests.helpers.store import new_store
from tests.helpers.store import count_sqlite_steps, downgrade_to_schema_2, downgrade_to_schema_3, downgrade_to_schema_4, schema_of


def add_trial(store: ExperimentStore, trial_id: str, sequence_id: int) -> None:
    store.add_trial(TrialRecord(trial_id, sequence_id, {"x": sequence_id}, TrialState.WAITING, time.time()))


def report(store: ExperimentStore, trial_id: str, sequence: int, value: object = 0.5, kind: str = "PERIODICAL",
           attempt: int = 1) -> None:
    assert store.add_metric(MetricRecord(trial_id, attempt, sequence, kind, value))


def read(store: ExperimentStore, since: str | None, limit: int | None = None):
    with store.snapshot():
        changes = store.changes(since, limit)
    return changes, json.loads(changes.metrics_json)


def test_changes_without_a_cursor_are_everything_and_since_their_cursor_only_what_came_after(tmp_path: Path):
    store = new_store(tmp_path / "experiment.sqlite")
    add_trial(store, "t1", 0)
    store.start_attempt("t1", 1, time.time())
    report(store, "t1", 0, 1.5)
    report(store, "t1", 1, {"default": 2.5, "loss": 7})
    add_trial(store, "t2", 1)

    everything, metrics = read(store, None)
    assert everything.full and not everything.more
    assert [t.trial_id for t in everything.trials] == ["t1", "t2"]
    assert [(m[0], m[1], m[2], m[3], m[4], m[6]) for m in metrics] == [
        ("t1", 0, "PERIODICAL", 0, 1.5, 1), ("t1", 0, "PERIODICAL", 1, 2.5, 1)]
    assert isinstance(metrics[0][5], int) and abs(metrics[0][5] / 1000 - time.time()) < 60
    nothing, metrics = read(store, everything.cursor)
    assert (nothing.full, nothing.trials, metrics, nothing.cursor) == (False, [], [], everything.cursor)
    assert store.cursor() == everything.cursor

    report(store, "t1", 2, 3.5)
    store.start_attempt("t2", 1, time.time())
    after, metrics = read(store, everything.cursor)
    assert not after.full
    assert [(t.trial_id, t.status) for t in after.trials] == [("t2", TrialState.RUNNING)]
    assert [m[3] for m in metrics] == [2]

    report(store, "t1", 3, 9.0, kind="FINAL")  # a final result changes its trial's view
    final, metrics = read(store, after.cursor)
    assert [t.trial_id for t in final.trials] == ["t1"] and final.finals["t1"].value == 9.0
    assert metrics[0][2:5] == ["FINAL", 3, 9.0]


def test_a_cursor_of_another_experiment_or_unknown_to_this_store_gets_everything(tmp_path: Path):
    store = new_store(tmp_path / "experiment.sqlite")
    add_trial(store, "t1", 0)
    cursor = store.cursor()
    experiment_id, events, metrics, finals = cursor.split("-")
    for stale in ["zzzz9999-1-0-0", f"{experiment_id}-{int(events) + 5}-0-0", f"{experiment_id}-0-7-7",
                  "garbage", f"{experiment_id}-1-2", f"{experiment_id}-1-3-2", ""]:
        changes, _ = read(store, stale)
        assert changes.full and [t.trial_id for t in changes.trials] == ["t1"], stale


def test_paged_changes_deliver_every_trial_and_metric_once_while_writes_go_on(tmp_path: Path):
    store = new_store(tmp_path / "experiment.sqlite")
    reader = ExperimentStore.open(store.path, readonly=True)
    trials_seen: dict[str, TrialState] = {}
    metrics_seen: list[tuple] = []
    cursor = None
    written = 0
    for round_number in range(40):
        # A few writes between two pages: new trials, states, metrics, final results.
        sequence_id = round_number // 4
        trial_id = f"t{sequence_id}"
        if round_number % 4 == 0:
            add_trial(store, trial_id, sequence_id)
            store.start_attempt(trial_id, 1, time.time())
        for _ in range(3):
            report(store, trial_id, written)
            written += 1
        if round_number % 4 == 3:
            report(store, trial_id, written, kind="FINAL")
            written += 1
            store.end_attempt(trial_id, 1, TrialState.SUCCEEDED, time.time(), 0, None)
        changes, metrics = read(reader, cursor, limit=5)
        assert len(changes.trials) + len(metrics) <= 5 + len(changes.finals)
        for trial in changes.trials:
            trials_seen[trial.trial_id] = trial.status
        metrics_seen += [tuple(m) for m in metrics]
        cursor = changes.cursor
    while True:
        changes, metrics = read(reader, cursor, limit=5)
        trials_seen.update({trial.trial_id: trial.status for trial in changes.trials})
        metrics_seen += [tuple(m) for m in metrics]
        cursor = changes.cursor
        if not changes.more:
            break
    assert len(metrics_seen) == len(set(metrics_seen)) == written, "every metric once"
    assert sorted(m[3] for m in metrics_seen) == list(range(written))
    assert trials_seen == {f"t{n}": TrialState.SUCCEEDED for n in range(10)}, "every trial in its last state"


def test_metrics_that_are_not_finite_numbers_are_null_in_compact_metrics(tmp_path: Path):
    store = new_store(tmp_path / "experiment.sqlite")
    add_trial(store, "t1", 0)
    store.start_attempt("t1", 1, time.time())
    report(store, "t1", 0, float("nan"))
    report(store, "t1", 1, {"default": float("inf")})
    report(store, "t1", 2, 4)
    _, metrics = read(store, None)
    assert [m[4] for m in metrics] == [None, None, 4]


def test_commit_listeners_hear_each_committed_write_and_nothing_else(tmp_path: Path):
    store = new_store(tmp_path / "experiment.sqlite")
    heard = []
    listener = lambda: heard.append(store.cursor())  # noqa: E731
    store.add_commit_listener(listener)
    add_trial(store, "t1", 0)
    store.start_attempt("t1", 1, time.time())
    report(store, "t1", 0)
    with pytest.raises(StoreError):
        store.set_trial_status("nosuch", TrialState.SUCCEEDED)  # refused: rolled back, not heard
    store.trials(), store.changes(None)
    assert len(heard) == 3 and len(set(heard)) == 3, "each heard write is visible to the listener"
    store.remove_commit_listener(listener)
    report(store, "t1", 1)
    assert len(heard) == 3


def trial_columns(database: Path) -> list[str]:
    conn = sqlite3.connect(database)
    try:
        return [row[1] for row in conn.execute("PRAGMA table_info(trials)")]
    finally:
        conn.close()


def attempt_columns(database: Path) -> list[str]:
    conn = sqlite3.connect(database)
    try:
        return [row[1] for row in conn.execute("PRAGMA table_info(attempts)")]
    finally:
        conn.close()


def test_a_schema_2_store_is_read_as_it_is_read_only_and_migrated_when_opened_for_writing(tmp_path: Path):
    store = new_store(tmp_path / "experiment.sqlite")
    add_trial(store, "t1", 0)
    store.start_attempt("t1", 1, time.time())
    for sequence, value in enumerate([0.25, {"default": 0.5, "loss": 2}, float("nan")]):
        report(store, "t1", sequence, value)
    report(store, "t1", 3, {"default": 0.75}, kind="FINAL")
    expected, expected_metrics = read(store, None)
    store.close()
    downgrade_to_schema_2(store.path)

    old = ExperimentStore.open(store.path, readonly=True)
    changes, metrics = read(old, None)
    assert metrics == expected_metrics and changes.cursor == expected.cursor
    assert old.final_metrics()["t1"].value == {"default": 0.75}
    old.close()
    assert schema_of(store.path)[0] == 2, "read-only opening changes nothing"

    migrated = ExperimentStore.open(store.path)
    assert schema_of(store.path) == (SCHEMA_VERSION, ["id", "trial_id", "attempt", "sequence", "type",
                                                      "value_json", "time", "value"])
    assert read(migrated, None)[1] == expected_metrics
    report(migrated, "t1", 4, 1.25)
    assert read(migrated, expected.cursor)[1][0][3:5] == [4, 1.25]
    values = sqlite3.connect(store.path).execute("SELECT value FROM metrics ORDER BY id").fetchall()
    assert [v for v, in values] == [0.25, 0.5, None, 0.75, 1.25]
    assert attempt_columns(store.path)[-1] == "host", "migrated on through version 3 to the current one"
    assert [a.host for a in migrated.attempts()] == [None]


def test_a_schema_3_store_is_read_without_hosts_read_only_and_gets_the_host_column_when_opened_for_writing(
        tmp_path: Path):
    store = new_store(tmp_path / "experiment.sqlite")
    add_trial(store, "t1", 0)
    store.start_attempt("t1", 1, time.time(), pid=123, pid_started=1.5)
    store.end_attempt("t1", 1, TrialState.FAILED, time.time(), 1, None, trial_status=TrialState.WAITING)
    store.close()
    downgrade_to_schema_3(store.path)

    old = ExperimentStore.open(store.path, readonly=True)
    [attempt] = old.attempts()
    assert (attempt.attempt, attempt.status, attempt.pid, attempt.host) == (1, TrialState.FAILED, 123, None)
    old.close()
    assert schema_of(store.path)[0] == 3 and "host" not in attempt_columns(store.path), \
        "read-only opening changes nothing"

    migrated = ExperimentStore.open(store.path)
    assert schema_of(store.path)[0] == SCHEMA_VERSION
    assert "host" in attempt_columns(store.path)
    migrated.start_attempt("t1", 2, time.time(), pid=124, pid_started=2.5, host="node-7")
    assert [(a.attempt, a.host) for a in migrated.attempts("t1")] == [(1, None), (2, "node-7")]
    migrated.close()
    reopened = ExperimentStore.open(store.path, readonly=True)
    assert [a.host for a in reopened.attempts("t1")] == [None, "node-7"]
    reopened.close()


def test_a_waiting_reason_is_a_change_of_its_trial_and_goes_when_the_trial_starts_or_ends(tmp_path: Path):
    store = new_store(tmp_path / "experiment.sqlite")
    add_trial(store, "t1", 0)
    add_trial(store, "t2", 1)
    cursor = store.cursor()
    store.set_waiting_reason("t1", "waiting for a GPU: GPU 0 is used by another process")
    changes = store.changes(since=cursor)
    assert [(t.trial_id, t.waiting_reason) for t in changes.trials] == [
        ("t1", "waiting for a GPU: GPU 0 is used by another process")], "a reason is sent as its trial's change"
    store.set_waiting_reason("t2", "waiting for a GPU")
    store.start_attempt("t1", 1, time.time())
    store.set_trial_status("t2", TrialState.USER_CANCELED, end_time=time.time())
    assert [(t.trial_id, t.waiting_reason) for t in store.trials()] == [("t1", None), ("t2", None)]


def test_a_schema_4_store_is_read_without_waiting_reasons_and_gets_the_column_when_opened_for_writing(
        tmp_path: Path):
    store = new_store(tmp_path / "experiment.sqlite")
    add_trial(store, "t1", 0)
    store.close()
    downgrade_to_schema_4(store.path)

    old = ExperimentStore.open(store.path, readonly=True)
    assert [(t.trial_id, t.waiting_reason) for t in old.trials()] == [("t1", None)]
    old.close()
    assert schema_of(store.path)[0] == 4 and "waiting_reason" not in trial_columns(store.path), \
        "read-only opening changes nothing"

    migrated = ExperimentStore.open(store.path)
    assert schema_of(store.path)[0] == SCHEMA_VERSION
    migrated.set_waiting_reason("t1", "waiting for a GPU")
    assert migrated.trial("t1").waiting_reason == "waiting for a GPU"
    migrated.close()


def test_changes_since_a_cursor_at_10000_trials_read_a_small_part_of_what_the_full_answer_reads(tmp_path: Path):
    """The scale of issue 7: 10,000 trials of 21 metrics each. The work is counted in SQLite
    virtual-machine steps, not timed: a timed ratio failed in CI when the other core was busy."""
    store = new_store(tmp_path / "experiment.sqlite")
    fill_store(store, trials=10_000, metrics_per_trial=20)
    paths = ExperimentPaths(tmp_path)
    reader = ExperimentStore.open(store.path, readonly=True)
    steps = count_sqlite_steps(reader)
    text, changes = changes_answer(reader, trial_files(paths, "local"), None, None, read_only=True)
    full_steps = steps.taken()
    answer = json.loads(text)
    assert len(answer["trials"]) == 10_000 and len(answer["metrics"]) == 10_000 * 21
    assert answer["statistics"] == [{"trialJobStatus": "SUCCEEDED", "trialJobNumber": 10_000}]

    store.add_trial(TrialRecord("late", 10_000, {"x": 1}, TrialState.WAITING, time.time()))
    text, _ = changes_answer(reader, trial_files(paths, "local"), changes.cursor, None, read_only=True)
    cursor_steps = steps.taken()
    assert [t["trialJobId"] for t in json.loads(text)["trials"]] == ["late"]
    print(f"SQLite steps: full answer {full_steps}, since a cursor {cursor_steps}")
    # An answer since a cursor must not re-read what the full answer read; finding the best
    # trial is the part it still pays (measured: about 1/20 of the full answer's steps).
    assert cursor_steps < full_steps / 5, f"since a cursor {cursor_steps} steps, the full answer {full_steps}"


