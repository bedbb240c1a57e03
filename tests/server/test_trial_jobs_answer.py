"""NNI's trial-jobs answer kept up to date (expmgr/server/trial_jobs.py): byte for byte the
answer built afresh after every kind of change, and at 10,000 trials an answer after one
change rebuilds that trial's view alone; on real SQLite files."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from expmgr.layout import ExperimentPaths
from expmgr.server import trial_jobs, views
from expmgr.server.trial_jobs import TrialJobsAnswer
from expmgr.states import TrialState
from expmgr.store import ExperimentStore, MetricRecord, TrialRecord
from expmgr.training import trial_files
from tests.helpers.fill import fill_store
from tests.helpers.server import get_text
from tests.helpers.store import new_store
from tests.helpers.store import count_sqlite_steps


def fresh(store: ExperimentStore, paths: ExperimentPaths, offset: int = 0, limit: int | None = None,
          status: str | None = None) -> bytes:
    """The answer as the handler built it before it was kept: every view built again."""
    return json.dumps([view for view in views.nni_trial_jobs_view(store, trial_files(paths, "local"), offset, limit)
                       if status is None or view["status"] == status]).encode()


def add(store: ExperimentStore, trial_id: str, sequence_id: int) -> None:
    store.add_trial(TrialRecord(trial_id, sequence_id, {"x": sequence_id, "name": "é"}, TrialState.WAITING,
                                time.time()))


def final(store: ExperimentStore, trial_id: str, attempt: int, value: object) -> None:
    assert store.add_metric(MetricRecord(trial_id, attempt, 99, "FINAL", value))


@pytest.mark.parametrize("block", [2, trial_jobs.BLOCK])
def test_the_kept_answer_is_the_fresh_one_byte_for_byte_after_each_kind_of_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int):
    monkeypatch.setattr(trial_jobs, "BLOCK", block)  # 2: trials spread over blocks, pages across them
    store = new_store(tmp_path / "experiment.sqlite")
    paths = ExperimentPaths(tmp_path)
    kept = TrialJobsAnswer(trial_files(paths, "local"))
    pages = [(0, None, None), (1, 2, None), (3, None, None), (0, None, "RUNNING"), (0, None, "SUCCEEDED"),
             (0, 1, "WAITING"), (9, None, None), (2, 2, None), (1, 4, "SUCCEEDED")]

    def same() -> None:
        for offset, limit, status in pages:
            assert b"".join(kept.answer(store, offset, limit, status)) == fresh(store, paths, offset, limit, status), \
                (offset, limit, status)

    same()  # no trials: []
    for index in range(3):  # new trials
        add(store, f"t{index}", index)
    same()
    store.start_attempt("t0", 1, time.time(), host="node-a")  # a state change, a host
    store.start_attempt("t1", 1, time.time())
    same()
    store.add_metric(MetricRecord("t0", 1, 0, "PERIODICAL", 0.5))  # an intermediate result: no change
    final(store, "t0", 1, {"default": 0.75, "loss": float("nan")})  # a final result
    same()
    store.end_attempt("t0", 1, TrialState.SUCCEEDED, time.time(), 0, None)
    final(store, "t1", 1, 0.25)  # the final result of an attempt that then fails: retried
    store.end_attempt("t1", 1, TrialState.FAILED, time.time(), 1, None, trial_status=TrialState.WAITING)
    same()
    store.start_attempt("t1", 2, time.time(), host="node-b")  # its retry: the first final no longer counts
    same()
    final(store, "t1", 2, float("inf"))
    store.end_attempt("t1", 2, TrialState.SUCCEEDED, time.time(), 0, None)
    store.start_attempt("t2", 1, time.time())
    store.record_kill("t2")  # a killed trial
    store.end_attempt("t2", 1, TrialState.USER_CANCELED, time.time(), None, 15)
    add(store, "t3", 3)
    same()
    add(store, "t6", 6)
    same()
    add(store, "t5", 5)  # before one kept (the runner numbers trials in order; the store does not insist)
    same()
    assert [json.loads(t["hyperParameters"][0])["parameter_id"] for t in json.loads(b"".join(kept.answer(store)))] \
        == [0, 1, 2, 3, 5, 6]


def test_the_kept_answer_starts_over_from_a_cursor_its_store_does_not_know(tmp_path: Path):
    paths = ExperimentPaths(tmp_path)
    first = new_store(tmp_path / "first.sqlite")
    add(first, "a0", 0)
    add(first, "a1", 1)
    kept = TrialJobsAnswer(trial_files(paths, "local"))
    assert b"".join(kept.answer(first)) == fresh(first, paths)
    other = new_store(tmp_path / "other.sqlite")  # another experiment: its cursor is not the kept one's
    add(other, "b5", 5)
    assert b"".join(kept.answer(other)) == fresh(other, paths)
    assert [t["trialJobId"] for t in json.loads(b"".join(kept.answer(other)))] == ["b5"]


@pytest.mark.parametrize("change", ["new trial", "state change", "final result"])
def test_at_10000_trials_an_answer_after_one_change_rebuilds_that_trial_alone(tmp_path: Path, change: str):
    """The scale of issue 15: counted in views built and SQLite virtual-machine steps, not timed."""
    store = new_store(tmp_path / "experiment.sqlite")
    fill_store(store, trials=10_000, metrics_per_trial=5)
    paths = ExperimentPaths(tmp_path)
    kept = TrialJobsAnswer(trial_files(paths, "local"))
    steps = count_sqlite_steps(store)
    assert len(json.loads(b"".join(kept.answer(store)))) == 10_000
    full_steps, full_views = steps.taken(), kept.views_built
    assert full_views == 10_000

    add(store, "late", 10_000)
    if change != "new trial":
        store.start_attempt("late", 1, time.time())
        b"".join(kept.answer(store))
        steps.taken()
        kept.views_built = 0
        if change == "state change":
            store.end_attempt("late", 1, TrialState.FAILED, time.time(), 1, None)
        else:
            final(store, "late", 1, 0.5)
    else:
        kept.views_built = 0
    answer = b"".join(kept.answer(store))
    after_steps = steps.taken()
    assert kept.views_built == 1, "only the changed trial's view is built again"
    assert answer == fresh(store, paths)
    print(f"SQLite steps (thousands): first answer {full_steps}, after one change {after_steps}")
    assert after_steps * 100 < full_steps, f"after one change {after_steps} steps, the first answer {full_steps}"


def test_the_served_answer_is_the_fresh_one_byte_for_byte_pages_and_filters_too(filled_view):
    """Over HTTP, as sent in blocks (30 trials of a finished experiment, viewed)."""
    store = ExperimentStore.open(filled_view.paths.database, readonly=True)
    try:
        for query, args in [("", {}), ("?offset=3&limit=7", {"offset": 3, "limit": 7}),
                            ("?status=SUCCEEDED", {"status": "SUCCEEDED"}), ("?status=FAILED", {"status": "FAILED"})]:
            status, headers, body = get_text(filled_view.port, f"/api/v1/nni/trial-jobs{query}")
            assert status == 200 and headers["Content-Type"] == "application/json; charset=UTF-8"
            assert body.encode() == fresh(store, filled_view.paths, **args), query
            assert int(headers["Content-Length"]) == len(body.encode())
    finally:
        store.close()
