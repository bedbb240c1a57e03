"""The experiment's facts in the web UI's changes kept up to date (expmgr/server/facts.py):
the same answer as read afresh after every kind of change, and at 10,000 trials a refresh
after one change reads a small part of what reading afresh reads; on real SQLite files."""
from __future__ import annotations

import json
import time
from pathlib import Path

from expmgr.layout import ExperimentPaths
from expmgr.server.facts import ExperimentFacts
from expmgr.server.live import changes_answer
from expmgr.states import TrialState
from expmgr.store import ExperimentStore, MetricRecord, TrialRecord
from expmgr.training import trial_files
from tests.helpers.fill import fill_store
from tests.helpers.store import new_store
from tests.helpers.store import count_sqlite_steps


def answer(store: ExperimentStore, paths: ExperimentPaths, facts: ExperimentFacts | None) -> dict:
    text, _ = changes_answer(store, trial_files(paths, "local"), None, None, read_only=False, facts=facts)
    decoded = json.loads(text)
    del decoded["experiment"]["execDuration"]  # seconds until now: moves between the two reads
    return {"experiment": decoded["experiment"], "statistics": decoded["statistics"]}


def add(store: ExperimentStore, trial_id: str, sequence_id: int) -> None:
    store.add_trial(TrialRecord(trial_id, sequence_id, {"x": sequence_id}, TrialState.WAITING, time.time()))


def final(store: ExperimentStore, trial_id: str, attempt: int, value: object, sequence: int = 99) -> None:
    assert store.add_metric(MetricRecord(trial_id, attempt, sequence, "FINAL", value))


def test_the_kept_facts_are_those_read_afresh_after_each_kind_of_change(tmp_path: Path):
    store = new_store(tmp_path / "experiment.sqlite")  # maximizes (the store's config names no mode)
    paths = ExperimentPaths(tmp_path)
    facts = ExperimentFacts()
    seen: list[dict] = []

    def same() -> None:
        kept, afresh = answer(store, paths, facts), answer(store, paths, None)
        assert kept == afresh
        seen.append(afresh)

    same()  # nothing yet
    store.begin_run(time.time())
    for index in range(4):
        add(store, f"t{index}", index)
    same()
    store.start_attempt("t0", 1, time.time(), host="node-a")
    store.start_attempt("t1", 1, time.time(), host="node-a")
    same()
    final(store, "t0", 1, 0.5)
    final(store, "t1", 1, 0.5)  # equal to t0's: t0, the first, stays the best
    store.end_attempt("t0", 1, TrialState.SUCCEEDED, time.time(), 0, None)
    same()
    store.end_attempt("t1", 1, TrialState.FAILED, time.time(), 1, None, trial_status=TrialState.WAITING)
    store.start_attempt("t1", 2, time.time(), host="node-b")  # a retry elsewhere: its final is gone
    same()
    final(store, "t1", 2, float("nan"))  # not finite: never the best
    store.start_attempt("t2", 1, time.time(), host="node-a")
    final(store, "t2", 1, {"default": 0.75})  # better
    same()
    store.end_attempt("t2", 1, TrialState.FAILED, time.time(), 1, None, trial_status=TrialState.WAITING)
    store.start_attempt("t2", 2, time.time(), host="node-a")  # the best's retry: the best falls back to t0
    same()
    store.start_attempt("t3", 1, time.time())
    store.record_kill("t3")
    store.end_attempt("t3", 1, TrialState.USER_CANCELED, time.time(), None, 15)
    store.record_preemption()
    same()
    store.begin_run(time.time() + 1)  # a resume: the preemption was of the earlier run
    same()
    assert [s["experiment"]["bestTrialId"] for s in seen] == [None, None, None, "t0", "t0", "t2", "t0", "t0", "t0"]
    assert [s["experiment"]["multiHost"] for s in seen] == [False] * 4 + [True] * 5
    assert [s["experiment"]["preempted"] for s in seen] == [False] * 7 + [True, False]


def test_a_retry_on_another_host_between_two_refreshes_makes_the_experiment_multi_host(tmp_path: Path):
    store = new_store(tmp_path / "experiment.sqlite")
    paths = ExperimentPaths(tmp_path)
    facts = ExperimentFacts()
    add(store, "t0", 0)
    answer(store, paths, facts)
    store.start_attempt("t0", 1, time.time(), host="node-a")
    store.end_attempt("t0", 1, TrialState.FAILED, time.time(), 1, None, trial_status=TrialState.WAITING)
    store.start_attempt("t0", 2, time.time(), host="node-b")  # node-a is no longer the trial's host
    assert answer(store, paths, facts)["experiment"]["multiHost"] is True


def test_at_10000_trials_a_refresh_after_one_change_reads_a_small_part_of_reading_afresh(tmp_path: Path):
    """Counted in SQLite virtual-machine steps (thousands), not timed."""
    store = new_store(tmp_path / "experiment.sqlite")
    fill_store(store, trials=10_000, metrics_per_trial=5)
    paths = ExperimentPaths(tmp_path)
    facts = ExperimentFacts()
    steps = count_sqlite_steps(store)
    with store.snapshot():
        facts.refresh(store)
    first_steps = steps.taken()
    add(store, "late", 10_000)
    store.start_attempt("late", 1, time.time())
    final(store, "late", 1, 2.0)  # the best now
    with store.snapshot():
        facts.refresh(store)
    after_steps = steps.taken()
    assert facts.best is not None and facts.best[0] == "late"
    assert facts.full_reads == 1, "the first refresh alone reads the final results afresh"
    print(f"SQLite steps (thousands): first refresh {first_steps}, after one change {after_steps}")
    assert after_steps * 50 < first_steps, f"after one change {after_steps}, the first refresh {first_steps}"
