"""The server reads the facts stored when an experiment and its trials were created, and
does not derive them again from the stored config: the optimize direction (the experiment
view's mode and best trial, the top trials) and each trial's parameter source (NNI's
``hyperParameters``). Real stores; their configs say otherwise, to tell the two apart."""
from __future__ import annotations

import json
import time
from pathlib import Path

from expmgr.layout import ExperimentPaths
from expmgr.training import trial_files
from expmgr.server import views
from expmgr.server.results import top_trials_view
from expmgr.states import ExperimentState, TrialState
from expmgr.store import ExperimentProfile, ExperimentStore, MetricRecord, TrialRecord

MAXIMIZING_CONFIG = {"trialConcurrency": 1, "tuner": {"name": "TPE", "classArgs": {"optimize_mode": "maximize"}}}


def store_of(tmp_path: Path, minimizes: bool) -> ExperimentStore:
    """A store whose profile says ``minimizes`` (its config: maximize), with a tuner's trial
    ``low`` (result 0.1) and a strategy's trial ``high`` (result 0.9)."""
    store = ExperimentStore.create(tmp_path / "experiment.sqlite", ExperimentProfile(
        id="facts001", name=None, config=MAXIMIZING_CONFIG, status=ExperimentState.RUNNING, error=None,
        start_time=time.time(), end_time=None, port=None, log_dir=str(tmp_path), platform="local",
        minimizes=minimizes))
    for sequence, (trial_id, source, final) in enumerate([("low", "algorithm", 0.1), ("high", "customized", 0.9)]):
        store.add_trial(TrialRecord(trial_id, sequence, {"x": sequence}, TrialState.WAITING, time.time(),
                                    parameter_source=source))
        store.start_attempt(trial_id, 1, time.time())
        store.add_metric(MetricRecord(trial_id, 1, 0, "FINAL", final))
        store.end_attempt(trial_id, 1, TrialState.SUCCEEDED, time.time(), 0, None)
    return store


def test_the_best_trial_and_the_mode_follow_the_direction_stored_with_the_experiment(tmp_path: Path):
    with store_of(tmp_path, minimizes=True) as store:
        view = views.experiment_view(store)
        top = top_trials_view(store, None, 1)
    assert (view["optimizeMode"], view["bestTrialId"]) == ("minimize", "low")
    assert top["optimizeMode"] == "minimize" and [t["trialJobId"] for t in top["trials"]] == ["low"]


def test_a_strategy_trial_shows_customized_and_a_tuners_trial_algorithm(tmp_path: Path):
    with store_of(tmp_path, minimizes=False) as store:
        jobs = views.trial_jobs_view(store, trial_files(ExperimentPaths(tmp_path), "local"))
    sources = {job["trialJobId"]: json.loads(job["hyperParameters"][0])["parameter_source"] for job in jobs}
    assert sources == {"low": "algorithm", "high": "customized"}
