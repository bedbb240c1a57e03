"""expmgr.metrics: the number a metric stands for and the best result, decided once;
and the one table of fields that may change while running, as every layer reads it."""
from __future__ import annotations

import math

import pytest

from expmgr.config import UPDATABLE_FIELDS, ExperimentConfig
from expmgr.metrics import best_result, is_better, metric_number, ranked, reported_number
from expmgr.training import trial_files


@pytest.mark.parametrize("value, number", [
    (0.5, 0.5), (3, 3), ({"default": 0.25, "loss": 1}, 0.25), ({"default": -2}, -2),
    (math.nan, None), (math.inf, None), ({"default": -math.inf}, None), (10**400, None),
    (True, None), ("0.5", None), ({"loss": 1}, None), (None, None), ([1], None),
])
def test_metric_number(value: object, number: float | None) -> None:
    assert metric_number(value) == number
    assert reported_number({"default": value}) is value


def test_best_result_follows_the_direction_and_never_picks_a_non_finite_one() -> None:
    results = [("a", 0.5), ("b", {"default": 0.9}), ("c", math.nan), ("d", 0.1), ("e", math.inf),
               ("f", -math.inf), ("g", 10**400), ("h", 0.9)]
    assert best_result(results, minimize=False) == ("b", 0.9)   # the first of equals
    assert best_result(results, minimize=True) == ("d", 0.1)
    assert best_result([("x", math.nan)], minimize=True) is None
    assert best_result([], minimize=False) is None


def test_ranked_puts_the_best_first_and_the_rest_last_in_order() -> None:
    results = [("a", 0.5), ("b", None), ("c", 0.9), ("d", math.nan), ("e", 0.5), ("f", 0.1)]
    assert ranked(results, minimize=False) == (["c", "a", "e", "f"], ["b", "d"])
    assert ranked(results, minimize=True) == (["f", "a", "e", "c"], ["b", "d"])


def test_a_dict_results_number_under_another_key_and_the_ranking_by_it() -> None:
    assert metric_number({"default": 0.9, "loss": 0.3}, "loss") == 0.3
    assert metric_number({"default": 0.9, "loss": float("nan")}, "loss") is None
    assert metric_number({"default": 0.9}, "loss") is None
    assert metric_number(0.9, "loss") is None  # a plain number is the default key's alone
    assert reported_number(0.9, "loss") is None and reported_number(0.9) == 0.9
    results = [("a", {"default": 1, "loss": 3}), ("b", 2), ("c", {"default": 3, "loss": 1})]
    assert ranked(results, minimize=True, result_key="loss") == (["c", "a"], ["b"])
    assert ranked(results, minimize=True) == (["a", "b", "c"], [])


def test_is_better() -> None:
    assert is_better(1.0, None, minimize=True) and is_better(1.0, None, minimize=False)
    assert is_better(1.0, 2.0, minimize=True) and not is_better(1.0, 2.0, minimize=False)
    assert not is_better(1.0, 1.0, minimize=True) and not is_better(1.0, 1.0, minimize=False)


@pytest.mark.parametrize("tuner, minimizes", [
    ({"name": "TPE"}, True), ({"name": "Anneal"}, True), ({"name": "Evolution"}, False),
    ({"name": "TPE", "classArgs": {"optimize_mode": "maximize"}}, False),
    ({"name": "Random", "classArgs": {"optimize_mode": "minimize"}}, True), (None, False),
])
def test_the_direction_is_the_tuners_default_when_not_given(tuner: dict | None, minimizes: bool) -> None:
    assert ExperimentConfig.from_dict({"tuner": tuner} if tuner else {}).minimizes is minimizes


def test_every_layer_reads_the_one_table_of_updatable_fields() -> None:
    from expmgr.cli import update
    from expmgr.engine import command_checks
    from expmgr.server import rest, views
    fields = [entry.field for entry in UPDATABLE_FIELDS]
    assert list(command_checks.UPDATABLE_FIELDS) == fields
    assert {attribute for attribute in command_checks.UPDATABLE_FIELDS.values()} <= set(ExperimentConfig.__dataclass_fields__)
    assert list(rest.UPDATE_TYPES.values()) == fields
    assert [entry.field for entry in update._UPDATES.values()] == fields
    from expmgr.config import updatable_now
    assert [entry.field for entry in updatable_now(running=True, more_trials=False)] == fields
    assert [entry.field for entry in updatable_now(running=False, more_trials=True)] == [
        "maxTrialNumber", "maxExperimentDuration"]
    assert updatable_now(running=False, more_trials=False) == ()
    assert "_UPDATABLE_VIEW" not in vars(views), "the view reads updatable_now"


def _store_with_results(tmp_path, config: dict):  # noqa: ANN001, ANN202
    """A real store: trials a (0.7), b (0.2), c (NaN) SUCCEEDED; d RUNNING its second
    attempt (its first one's 0.1 no longer counts); e RUNNING without a result; f WAITING."""
    import time

    from expmgr.store import ExperimentProfile, ExperimentStore, MetricRecord, TrialRecord
    from expmgr.states import ExperimentState, TrialState
    store = ExperimentStore.create(tmp_path / "experiment.sqlite", ExperimentProfile(
        id="facts001", name=None, config=config, status=ExperimentState.RUNNING, error=None,
        start_time=time.time(), end_time=None, port=None, log_dir=str(tmp_path),
        platform="local", minimizes=ExperimentConfig.from_dict(config).minimizes))
    for sequence, (trial_id, final) in enumerate([("a", 0.7), ("b", 0.2), ("c", math.nan), ("d", 0.1), ("e", None)]):
        store.add_trial(TrialRecord(trial_id, sequence, {"x": sequence}, TrialState.WAITING, time.time()))
        store.start_attempt(trial_id, 1, time.time())
        if final is not None:
            store.add_metric(MetricRecord(trial_id, 1, 0, "FINAL", {"default": final}))
            retried = trial_id == "d"  # it reported, then crashed: a retry runs it again
            store.end_attempt(trial_id, 1, TrialState.FAILED if retried else TrialState.SUCCEEDED, time.time(),
                              1 if retried else 0, None, trial_status=TrialState.WAITING if retried else None)
    store.start_attempt("d", 2, time.time())
    store.add_trial(TrialRecord("f", 5, {"x": 5}, TrialState.WAITING, time.time()))
    return store


@pytest.mark.parametrize("tuner, mode, best", [
    ({"name": "TPE"}, "minimize", "b"),          # TPE's default: the lowest; d's old 0.1 is not its result now
    ({"name": "TPE", "classArgs": {"optimize_mode": "maximize"}}, "maximize", "a"),
    ({"name": "Evolution"}, "maximize", "a"),
])
def test_the_server_tells_the_ui_the_mode_the_best_trial_and_the_controls(tmp_path, tuner, mode, best) -> None:  # noqa: ANN001
    from expmgr.layout import ExperimentPaths
    from expmgr.server import views
    store = _store_with_results(tmp_path, {"tuner": tuner})
    try:
        profile = views.experiment_view(store)
        files = trial_files(ExperimentPaths(tmp_path), "local")
        trials = {view["trialJobId"]: view for view in views.trial_jobs_view(store, files)}
    finally:
        store.close()
    assert (profile["optimizeMode"], profile["bestTrialId"]) == (mode, best)
    assert [item["field"] for item in profile["updatableFields"]] == [entry.field for entry in UPDATABLE_FIELDS]
    assert {trial_id: view["canKill"] for trial_id, view in trials.items()} == {
        "a": False, "b": False, "c": False, "d": True, "e": True, "f": False}
    assert trials["a"]["finalNumber"] == 0.7 and trials["c"]["finalNumber"] is None
    assert "finalNumber" not in trials["e"]
