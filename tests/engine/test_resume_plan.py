"""The resume plan (engine/resume.py), read from a real store written as a run that died
would have left it: which trials run again, in which order and as which attempt, when the
dead manager was last alive, and what the fresh tuner is replayed."""
from __future__ import annotations

import math
import time
from pathlib import Path

from expmgr.engine.resume import plan_resume
from expmgr.layout import ExperimentPaths
from expmgr.states import ExperimentState, TrialState
from expmgr.store import ExperimentProfile, MetricRecord, TrialRecord, WritableStore, create_store


def make_store(tmp_path: Path) -> WritableStore:
    paths = ExperimentPaths(tmp_path / "exp")
    paths.create()
    return create_store(paths, ExperimentProfile(
        id="exp", name=None, config={}, status=ExperimentState.RUNNING, error=None, start_time=time.time(),
        end_time=None, port=None, log_dir=str(paths.root), platform="local", minimizes=False))


def trial(store: WritableStore, trial_id: str, sequence_id: int, status: TrialState, *, final: object = None,
          open_attempt_at: float | None = None, pid: int | None = None) -> None:
    store.add_trial(TrialRecord(trial_id=trial_id, sequence_id=sequence_id, parameters={"x": sequence_id},
                                status=TrialState.WAITING, submit_time=10.0))
    store.start_attempt(trial_id, 1, 20.0 if open_attempt_at is None else open_attempt_at, pid, 19.5)
    if final is not None:
        store.add_metric(MetricRecord(trial_id=trial_id, attempt=1, sequence=0, type="FINAL", value=final))
    if open_attempt_at is None:
        store.end_attempt(trial_id, 1, status, 30.0, 0, None)
    elif status != TrialState.RUNNING:
        store.set_trial_status(trial_id, status)


def test_unfinished_trials_run_again_preempted_first_and_killed_ones_not(tmp_path: Path):
    store = make_store(tmp_path)
    try:
        trial(store, "done1", 0, TrialState.SUCCEEDED, final=0.5)
        trial(store, "died1", 1, TrialState.RUNNING, open_attempt_at=100.0, pid=4242)
        trial(store, "preem", 2, TrialState.PREEMPTED)
        trial(store, "kill1", 3, TrialState.USER_CANCELED)
        store.record_kill("kill1")
        trial(store, "stop1", 4, TrialState.USER_CANCELED)
        plan = plan_resume(store, dead_run=None, now=500.0, last_output_time=lambda trial_id: 0.0)
    finally:
        store.close()
    assert [(t.record.trial_id, t.first, t.next_attempt) for t in plan.requeued] == [
        ("died1", False, 2), ("preem", True, 2), ("stop1", False, 2)]
    died = plan.requeued[0].open_attempt
    assert died is not None and (died.attempt, died.pid) == (1, 4242), "its leftover process is ended by pid"
    assert [t.open_attempt for t in plan.requeued[1:]] == [None, None]
    assert plan.trial_ids == {"done1", "died1", "preem", "kill1", "stop1"}
    assert plan.ended == {TrialState.SUCCEEDED: 1, TrialState.USER_CANCELED: 1}
    assert plan.results == [("done1", 0.5)]


def test_the_dead_manager_was_last_alive_at_its_last_event_or_a_trials_last_output_never_in_the_future(
        tmp_path: Path):
    store = make_store(tmp_path)
    try:
        trial(store, "died1", 0, TrialState.RUNNING, open_attempt_at=100.0)
        outputs = {"died1": 180.0}
        later = plan_resume(store, dead_run=(7, 150.0), now=500.0, last_output_time=outputs.__getitem__)
        capped = plan_resume(store, dead_run=(7, 150.0), now=170.0, last_output_time=outputs.__getitem__)
        alive = plan_resume(store, dead_run=None, now=500.0, last_output_time=outputs.__getitem__)
    finally:
        store.close()
    assert (later.dead_run, later.died) == (7, 180.0)
    assert capped.died == 170.0
    assert (alive.dead_run, alive.died) == (None, 500.0)
    attempt = later.requeued[0].open_attempt
    assert attempt is not None and later.open_attempt_ends(attempt) == 180.0
    early_store = make_store(tmp_path / "early")
    try:
        trial(early_store, "died1", 0, TrialState.RUNNING, open_attempt_at=100.0)
        early = plan_resume(early_store, dead_run=(1, 50.0), now=500.0, last_output_time=lambda trial_id: 0.0)
    finally:
        early_store.close()
    attempt = early.requeued[0].open_attempt
    assert attempt is not None and early.open_attempt_ends(attempt) == 100.0, "not before the attempt started"


def test_the_tuner_is_replayed_every_trial_with_only_finite_results(tmp_path: Path):
    store = make_store(tmp_path)
    try:
        trial(store, "good", 0, TrialState.SUCCEEDED, final=0.25)
        trial(store, "nan", 1, TrialState.SUCCEEDED, final=math.nan)
        trial(store, "none", 2, TrialState.FAILED)
        plan = plan_resume(store, dead_run=None, now=500.0, last_output_time=lambda trial_id: 0.0)
    finally:
        store.close()
    assert plan.history == [{"parameter": {"x": 0}, "value": 0.25}, {"parameter": {"x": 1}, "value": None},
                            {"parameter": {"x": 2}, "value": None}]
    assert plan.requeued == []
