"""The store's own errors (expmgr/store/errors.py) from a real SQLite store: no SQLite error
leaves it; each says which file, what SQLite said (its ``reason``, its ``__cause__``) and
what to do, of a kind its callers catch (busy, unwritable, unreadable, too new)."""
from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from expmgr.layout import ExperimentPaths
from expmgr.states import ExperimentState, TrialState
from expmgr.store import (ExperimentProfile, MetricRecord, Store, StoreBusy, StoreError, StoreTooNew, StoreUnavailable,
                          StoreUnreadable, StoreUnwritable, TrialRecord, WritableStore, create_store, open_store)

READ_ARGUMENTS: dict[str, tuple[Any, ...]] = {
    "trial": ("t1",), "trial_by_sequence": (0,), "failed_attempts": ("t1",), "metrics_of_sequence_range": (0, 9),
    "preempted_in_last_run": (None,),
}
"""Arguments of the reads that need some; the others are called with none."""
NOT_READS = {"path", "close", "snapshot", "add_commit_listener", "remove_commit_listener"}
"""Members of ``Store`` that do not read the database."""

WRITES: dict[str, tuple[Any, ...]] = {
    "reopen": (), "set_config": ({},), "set_experiment_status": (ExperimentState.RUNNING,), "begin_run": (1.0,),
    "end_run": (1, 2.0), "add_trial": (TrialRecord("t2", 1, {}, TrialState.WAITING, 1.0),),
    "start_attempt": ("t1", 2, 1.0), "end_attempt": ("t1", 1, TrialState.SUCCEEDED, 2.0, 0, None),
    "set_trial_status": ("t1", TrialState.USER_CANCELED), "set_waiting_reason": ("t1", "no free GPU"),
    "add_metric": (MetricRecord("t1", 1, 5, "PERIODICAL", 0.5),), "record_import": ([],),
    "record_preemption": (), "record_store_outage": (1.0, "locked"), "record_kill": ("t1",),
    "record_checkpoint_source": ("t1", "t0"),
}
"""Every write of ``WritableStore`` with arguments it could take (``set_busy_timeout`` only
sets how long the others wait)."""


def public_members(protocol: type) -> set[str]:
    return {name for name in vars(protocol) if not name.startswith("_")}


def test_the_lists_above_name_every_read_and_write_of_the_store_interface():
    assert public_members(Store) - NOT_READS - READ_ARGUMENTS.keys() == {
        "profile", "trials", "sequence_ids", "next_sequence_id", "status_counts", "attempts", "hosts", "metrics",
        "final_metrics", "final_results", "final_result_keys", "final_numbers", "latest_metrics", "killed_trials",
        "checkpoint_sources", "was_preempted", "latest_preemption", "open_run", "seconds_run", "runs", "cursor", "changes"}
    assert public_members(WritableStore) - {"set_busy_timeout"} == WRITES.keys()


@pytest.fixture
def paths(tmp_path: Path) -> ExperimentPaths:
    """An experiment with one trial that ran one attempt and reported once."""
    paths = ExperimentPaths(tmp_path / "abcd1234")
    paths.create()
    with create_store(paths, ExperimentProfile(
            id="abcd1234", name="t", config={}, status=ExperimentState.RUNNING, error=None,
            start_time=time.time(), end_time=None, port=None, log_dir=str(paths.root), platform="local", minimizes=False)) as store:
        store.add_trial(TrialRecord("t1", 0, {"x": 1}, TrialState.WAITING, time.time()))
        store.start_attempt("t1", 1, time.time())
        store.add_metric(MetricRecord("t1", 1, 0, "PERIODICAL", 0.1))
    return paths


@pytest.mark.parametrize("write", sorted(WRITES))
def test_every_write_to_a_store_another_process_holds_is_refused_as_busy_and_taken_once_it_is_free(
        paths: ExperimentPaths, write: str):
    holder = sqlite3.connect(paths.database, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    with open_store(paths) as store:
        store.set_busy_timeout(0)
        with pytest.raises(StoreBusy) as refused:
            getattr(store, write)(*WRITES[write])
        holder.execute("ROLLBACK")
        holder.close()
        assert isinstance(refused.value, StoreUnavailable)   # what the runner waits out
        assert str(refused.value) == f"{paths.database}: busy (database is locked); another process holds it, try again"
        assert refused.value.reason == "database is locked"
        assert isinstance(refused.value.__cause__, sqlite3.OperationalError)
        getattr(store, write)(*WRITES[write])   # the refused write left no transaction open


def test_every_read_of_a_database_that_is_not_an_expmgr_store_is_unreadable_naming_the_file(paths: ExperimentPaths):
    conn = sqlite3.connect(paths.database, isolation_level=None)
    for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                 "AND name NOT IN ('schema_version', 'sqlite_sequence')").fetchall():
        conn.execute(f"DROP TABLE {table}")
    conn.close()
    with open_store(paths, readonly=True) as store:
        for read in sorted(public_members(Store) - NOT_READS):
            with pytest.raises(StoreUnreadable) as unreadable:
                getattr(store, read)(*READ_ARGUMENTS.get(read, ()))
            said = f"{paths.database}: not a valid expmgr database (no such table: "
            assert str(unreadable.value).startswith(said), read
            assert "restore it from a backup, or delete the experiment" in str(unreadable.value), read
            assert isinstance(unreadable.value.__cause__, sqlite3.DatabaseError), read
        with pytest.raises(StoreUnreadable), store.snapshot():
            store.profile()


def test_a_file_that_is_not_a_database_is_unreadable_when_opened(paths: ExperimentPaths):
    paths.database.write_bytes(b"this is not a database" * 400)
    for path in paths.database.parent.glob("experiment.sqlite-*"):
        path.unlink()
    for readonly in (True, False):
        with pytest.raises(StoreUnreadable, match="not a valid expmgr database") as unreadable:
            open_store(paths, readonly=readonly)
        assert isinstance(unreadable.value.__cause__, sqlite3.DatabaseError)


@pytest.mark.parametrize("version, kind", [(99, StoreTooNew), (1, StoreUnreadable)])
def test_a_store_of_a_newer_schema_is_too_new_and_of_an_unknown_older_one_unreadable(
        paths: ExperimentPaths, version: int, kind: type[StoreError]):
    conn = sqlite3.connect(paths.database, isolation_level=None)
    conn.execute("UPDATE schema_version SET version = ?", (version,))
    conn.close()
    for readonly in (True, False):
        with pytest.raises(kind, match=f"schema version {version} is not supported .this expmgr reads 2 to"):
            open_store(paths, readonly=readonly)


def test_a_write_through_a_read_only_store_is_unwritable_not_said_to_be_damaged(paths: ExperimentPaths):
    with open_store(paths, readonly=True) as store:
        with pytest.raises(StoreUnwritable) as refused:
            store.set_waiting_reason("t1", "no free GPU")
    assert refused.value.reason == "attempt to write a readonly database"
    assert "the file itself is not shown to be damaged, so do not move it aside" in str(refused.value)
