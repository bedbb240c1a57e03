"""The experiment store on a real SQLite file."""
from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from expmgr.store.registry import Registry, RegistryEntry
from expmgr.layout import ExperimentPaths
from expmgr.store import (ExperimentProfile, ExperimentStore, MetricRecord, StoreError, StoreUnwritable, TrialRecord,
                          create_store, open_store)
from expmgr.states import ExperimentState, TrialState
from tests.helpers.store import new_store


def test_store_is_in_wal_mode_and_refuses_another_schema_version(tmp_path: Path):
    path = tmp_path / "db" / "experiment.sqlite"
    new_store(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.execute("UPDATE schema_version SET version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="schema version 99"):
        ExperimentStore.open(path)
    with pytest.raises(StoreError, match="already exists"):
        new_store(path)


def test_trial_attempts_and_metrics_are_recorded_and_repeated_metrics_ignored(tmp_path: Path):
    store = new_store(tmp_path / "experiment.sqlite")
    store.add_trial(TrialRecord("t1", 0, {"x": 1}, TrialState.WAITING, time.time()))
    store.start_attempt("t1", 1, time.time())
    store.end_attempt("t1", 1, TrialState.FAILED, time.time(), 3, None, trial_status=TrialState.WAITING)
    store.start_attempt("t1", 2, time.time())
    assert store.add_metric(MetricRecord("t1", 2, 0, "FINAL", {"default": 0.5}))
    assert not store.add_metric(MetricRecord("t1", 2, 0, "FINAL", {"default": 0.9}))
    store.end_attempt("t1", 2, TrialState.SUCCEEDED, time.time(), 0, None)
    reader = ExperimentStore.open(store.path, readonly=True)
    trial = reader.trial("t1")
    assert (trial.status, trial.attempts) == (TrialState.SUCCEEDED, 2)
    assert [(a.attempt, a.status, a.exit_code) for a in reader.attempts("t1")] == [
        (1, TrialState.FAILED, 3), (2, TrialState.SUCCEEDED, 0)]
    assert reader.final_metrics()["t1"].value == {"default": 0.5}
    statuses = [row[0] for row in sqlite3.connect(store.path).execute(
        "SELECT json_extract(detail_json, '$.status') FROM events WHERE trial_id = 't1' ORDER BY id")]
    assert statuses == ["WAITING", "RUNNING", "WAITING", "RUNNING", "SUCCEEDED"]
    with pytest.raises(StoreUnwritable):
        reader.set_experiment_status(ExperimentState.DONE)  # a reader cannot write


def test_registry_lists_experiments_and_tracks_their_status(tmp_path: Path):
    registry = Registry(tmp_path)
    assert registry.entries() == []
    registry.add(RegistryEntry("abcd1234", "n", str(tmp_path / "abcd1234"), 8080, 42,
                               ExperimentState.RUNNING, time.time()))
    registry.update("abcd1234", status=ExperimentState.DONE, end_time=time.time())
    entry = registry.get("abcd1234")
    assert (entry.status, entry.pid) == (ExperimentState.DONE, None)
    assert registry.get("zzzz0000") is None


def test_registry_survives_experiments_registering_at_the_same_moment(tmp_path: Path):
    import threading
    for round_number in range(10):  # a fresh registry each round: its creation is the racy part
        home = tmp_path / str(round_number)
        barrier = threading.Barrier(8)
        errors = []

        def register(number: int) -> None:
            barrier.wait()
            try:
                Registry(home).add(RegistryEntry(f"exp{number:05d}", None, str(home), None, None,
                                                 ExperimentState.INITIALIZED, time.time()))
            except Exception as error:  # noqa: BLE001 - collected and asserted below
                errors.append(error)

        threads = [threading.Thread(target=register, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert sorted(e.id for e in Registry(home).entries()) == [f"exp{n:05d}" for n in range(8)]


def test_store_refuses_a_trial_state_change_the_transition_table_does_not_allow(tmp_path: Path):
    from expmgr.states import TRIAL_TRANSITIONS
    store = new_store(tmp_path / "experiment.sqlite")
    store.add_trial(TrialRecord("t1", 0, {"x": 1}, TrialState.WAITING, time.time()))
    store.start_attempt("t1", 1, time.time())
    store.end_attempt("t1", 1, TrialState.SUCCEEDED, time.time(), 0, None)
    with pytest.raises(StoreError, match="cannot go from SUCCEEDED to RUNNING"):
        store.start_attempt("t1", 2, time.time())
    final = {TrialState.SUCCEEDED, TrialState.FAILED, TrialState.CRASHED, TrialState.EARLY_STOPPED}
    assert {state for state in TrialState if not TRIAL_TRANSITIONS[state]} == final
    assert TrialState.PREEMPTED.can_become(TrialState.WAITING) and not TrialState.FAILED.can_become(TrialState.WAITING)


def test_open_store_gives_the_experiments_store_and_closes_it_after_the_block_even_on_error(tmp_path: Path):
    paths = ExperimentPaths(tmp_path / "abcd1234")
    paths.create()
    create_store(paths, ExperimentProfile(
        id="abcd1234", name="t", config={}, status=ExperimentState.INITIALIZED, error=None,
        start_time=time.time(), end_time=None, port=None, log_dir=str(paths.root), platform="local",
        minimizes=False)).close()
    with open_store(paths, readonly=True) as store:
        assert store.profile().id == "abcd1234"
        with pytest.raises(StoreUnwritable, match="readonly"):
            store.set_experiment_status(ExperimentState.RUNNING)
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        store.profile()
    with pytest.raises(RuntimeError, match="in the block"):
        with open_store(paths) as store:
            raise RuntimeError("in the block")
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        store.profile()
    with pytest.raises(StoreError, match="no experiment database"):
        open_store(ExperimentPaths(tmp_path / "elsewhere"))


def test_a_trial_carries_the_host_of_its_latest_attempt_and_the_store_lists_the_hosts(tmp_path: Path):
    store = new_store(tmp_path / "experiment.sqlite")
    store.add_trial(TrialRecord("t1", 0, {"x": 1}, TrialState.WAITING, time.time()))
    store.add_trial(TrialRecord("t2", 1, {"x": 2}, TrialState.WAITING, time.time()))
    assert store.trial("t1").host is None and store.hosts() == [], "not started: nowhere yet"
    store.start_attempt("t1", 1, time.time(), host="node-b")
    store.end_attempt("t1", 1, TrialState.FAILED, time.time(), 1, None, trial_status=TrialState.WAITING)
    store.start_attempt("t1", 2, time.time(), host="node-a")
    store.start_attempt("t2", 1, time.time())  # a service that names no host
    assert [(t.trial_id, t.host) for t in store.trials()] == [("t1", "node-a"), ("t2", None)]
    assert store.trial_by_sequence(0).host == "node-a"
    assert [(t.trial_id, t.host) for t in store.changes(None, limit=10).trials] == [("t1", "node-a"), ("t2", None)]
    assert store.hosts() == ["node-a", "node-b"]
    store.close()
