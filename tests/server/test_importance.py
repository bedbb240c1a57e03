"""Hyperparameter importance (expmgr.server.importance, PED-ANOVA), the result keys and the
top-K route: numbers checked by hand and against optuna's own PedAnovaImportanceEvaluator on
the same trials, and the routes of a real served experiment."""
from __future__ import annotations

import itertools
import math
import random
import warnings
from pathlib import Path
from typing import Any

import pytest

from expmgr import Experiment
from expmgr.server.importance import Domain, domain_of, importances, pearson_divergence, top_quantile
from tests.helpers.fill import experiment_of_results
from tests.helpers.server import call, get

SPACE = {"lr": {"_type": "loguniform", "_value": [1e-4, 1e-1]},
         "x": {"_type": "uniform", "_value": [-5, 5]},
         "q": {"_type": "quniform", "_value": [0, 10, 2]},
         "n": {"_type": "randint", "_value": [1, 8]},
         "act": {"_type": "choice", "_value": ["relu", "tanh", "gelu"]},
         "noise": {"_type": "uniform", "_value": [0, 1]}}


def _sampled(count: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [{"lr": math.exp(rng.uniform(math.log(1e-4), math.log(1e-1))), "x": rng.uniform(-5, 5),
             "q": float(rng.choice([0, 2, 4, 6, 8, 10])), "n": rng.randrange(1, 8),
             "act": rng.choice(["relu", "tanh", "gelu"]), "noise": rng.uniform(0, 1)} for _ in range(count)]


def _loss(p: dict[str, Any]) -> float:
    return ((math.log10(p["lr"]) + 2.5) ** 2 + 0.3 * p["x"] ** 2 + (1.0 if p["act"] == "tanh" else 0.0)
            + 0.1 * p["n"] + 0.05 * p["q"])


def test_pearson_divergence_of_a_choice_matches_the_hand_computed_value() -> None:
    # 10 trials, 5 "a" and 5 "b"; the best tenth is one trial, an "a". Each estimator is a
    # mixture of one kernel per seen value (weight = its count) and a prior (weight 1); a
    # kernel puts 1 + 1/k on its value and 1/k on every value (k = kernels), normalized.
    # All: kernels [0.8, 0.2], [0.2, 0.8], prior [0.5, 0.5], weights 5, 5, 1 -> [0.5, 0.5].
    # Top: kernels [0.75, 0.25], prior [0.5, 0.5], weights 1, 1 -> [0.625, 0.375].
    # Divergence: 0.5 * (0.625 / 0.5 - 1)^2 + 0.5 * (0.375 / 0.5 - 1)^2 = 0.0625.
    domain = Domain("categorical", choices=("a", "b"))
    assert pearson_divergence(domain, [0], [0] * 5 + [1] * 5) == pytest.approx(0.0625, rel=1e-9)
    assert pearson_divergence(domain, [0, 1], [0, 1]) == pytest.approx(0.0, abs=1e-12)


def test_top_quantile_follows_the_optimize_mode_and_keeps_ties() -> None:
    numbers = __import__("numpy").asarray([5.0, 1.0, 3.0, 1.0, 9.0, 7.0, 2.0, 4.0, 6.0, 8.0])
    assert list(top_quantile(numbers, minimize=True)) == [n == 1.0 for n in numbers]  # both 1.0s: a tie
    assert list(top_quantile(numbers, minimize=False)) == [n == 9.0 for n in numbers]


@pytest.mark.parametrize(("count", "minimize"), [(40, True), (200, False), (1000, True)])
def test_importances_equal_optunas_ped_anova_on_the_same_trials(count: int, minimize: bool) -> None:
    optuna = pytest.importorskip("optuna")
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    distributions = {"lr": FloatDistribution(1e-4, 1e-1, log=True), "x": FloatDistribution(-5, 5),
                     "q": FloatDistribution(0, 10, step=2), "n": IntDistribution(1, 7),
                     "act": CategoricalDistribution(["relu", "tanh", "gelu"]), "noise": FloatDistribution(0, 1)}
    parameters = _sampled(count, seed=count)
    results = [_loss(p) if minimize else -_loss(p) for p in parameters]

    ours, skipped = importances(parameters, results, SPACE, minimize)

    study = optuna.create_study(direction="minimize" if minimize else "maximize")
    study.add_trials([optuna.trial.create_trial(params=p, distributions=distributions, value=v)
                      for p, v in zip(parameters, results)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = optuna.importance.get_param_importances(
            study, evaluator=optuna.importance.PedAnovaImportanceEvaluator())
    assert skipped == []
    assert {item["name"]: item["importance"] for item in ours} == pytest.approx(theirs, abs=1e-9)
    assert [item["name"] for item in ours][0] == "x"
    assert sum(item["importance"] for item in ours) == pytest.approx(1.0)


def test_nested_and_unknown_entries_are_skipped_with_a_reason() -> None:
    space = {"x": {"_type": "uniform", "_value": [0, 1]},
             "model": {"_type": "choice", "_value": [{"_name": "a", "depth": {"_type": "randint", "_value": [1, 3]}}]},
             "odd": {"_type": "triangular", "_value": [0, 1]}}
    parameters = [{"x": i / 20, "model": {"_name": "a", "depth": 1}, "odd": 0.5} for i in range(20)]
    scored, skipped = importances(parameters, [i / 20 for i in range(20)], space, minimize=True)
    assert [item["name"] for item in scored] == ["x"]
    reasons = {item["name"]: item["reason"] for item in skipped}
    assert "nested search space" in reasons["model"]
    assert "unknown _type 'triangular'" in reasons["odd"]


def test_a_log_scaled_parameter_is_binned_on_a_log_axis() -> None:
    domain = domain_of({"_type": "loguniform", "_value": [1e-4, 1]}, [])
    assert domain.log
    # one decade in four: on a log axis 1e-3 sits a quarter of the way, not at its very start
    from expmgr.server.importance import _grid_counts
    assert int(_grid_counts(domain, [1e-3]).argmax()) == round(49 / 4)


@pytest.fixture
def served(tmp_path: Path):
    views: list[Experiment] = []

    def serve(space: dict[str, Any], results: list[tuple[dict[str, Any], Any]], tuner: dict[str, Any] | None = None
              ) -> int:
        exp_id = experiment_of_results(tmp_path / "home", space, results, tuner=tuner)
        view = Experiment.view(exp_id, port=0, non_blocking=True, home=tmp_path / "home")
        views.append(view)
        return view.port

    yield serve
    for view in views:
        view.stop()


GRID_SPACE = {"x": {"_type": "choice", "_value": [1, 2, 3, 4, 5]}, "y": {"_type": "choice", "_value": [1, 2, 3, 4]}}


def test_importance_route_ranks_the_parameter_the_result_depends_on_and_scores_the_other_near_zero(served) -> None:
    # GridSearch over x and y; the result depends on x alone (maximize: GridSearch's default)
    port = served(GRID_SPACE, [({"x": x, "y": y}, {"default": x * 1.5, "loss": 10 - y})
                               for x, y in itertools.product(range(1, 6), range(1, 5))], {"name": "GridSearch"})

    answer = get(port, "/api/v1/expmgr/importance")

    assert answer["key"] == "default" and answer["method"] == "PED-ANOVA" and answer["gamma"] == 0.1
    assert answer["trials"] == 20 and answer["topTrials"] == 4  # the 4 trials of x = 5 tie for the best
    assert "reason" not in answer
    importance = {item["name"]: item["importance"] for item in answer["parameters"]}
    assert [item["name"] for item in answer["parameters"]] == ["x", "y"]
    assert importance["x"] > 0.99 and importance["y"] < 0.01

    # under "loss" (maximized too: the optimize mode applied to the chosen key) y alone matters
    by_loss = get(port, "/api/v1/expmgr/importance?key=loss")
    assert [item["name"] for item in by_loss["parameters"]] == ["y", "x"]
    assert by_loss["parameters"][0]["importance"] > 0.99


def test_importance_route_refuses_an_unknown_key_and_says_when_there_are_too_few_trials(served) -> None:
    port = served(GRID_SPACE, [({"x": x, "y": 1}, {"default": x, "loss": -x}) for x in range(1, 6)])

    status, answer = call(port, "GET", "/api/v1/expmgr/importance?key=accuracy")
    assert status == 400
    assert answer["error"] == "key: 'accuracy' is not a key of any final result (keys reported: 'default', 'loss')"
    status, answer = call(port, "GET", "/api/v1/expmgr/importance?key=" + "k" * 300)
    assert status == 400 and answer["error"].startswith("key: at most 200 characters")

    answer = get(port, "/api/v1/expmgr/importance?key=loss")
    assert answer["parameters"] == [] and answer["trials"] == 5
    assert answer["reason"] == "importance needs at least 10 trials with a finite final result under 'loss'; there are 5"


def test_top_route_ranks_by_the_chosen_key_in_the_optimize_mode_finite_results_only(served) -> None:
    results: list[tuple[dict[str, Any], Any]] = [
        ({"x": 1, "y": 1}, {"default": 0.5, "loss": 3.0}),
        ({"x": 2, "y": 1}, {"default": 0.9, "loss": 1.0}),
        ({"x": 3, "y": 1}, {"default": float("nan"), "loss": 2.0}),
        ({"x": 4, "y": 1}, {"default": 0.7, "loss": float("inf")}),
        ({"x": 5, "y": 1}, 0.8),
    ]
    port = served(GRID_SPACE, results, {"name": "TPE", "classArgs": {"optimize_mode": "minimize"}})

    experiment = get(port, "/api/v1/nni/experiment")
    assert experiment["resultKeys"] == ["default", "loss"]
    trial = get(port, "/api/v1/expmgr/trials/r0")
    assert trial["finalNumbers"] == {"default": 0.5, "loss": 3.0}

    top = get(port, "/api/v1/expmgr/top?k=3")
    assert top["optimizeMode"] == "minimize" and top["scored"] == 4
    assert [(t["trialJobId"], t["number"]) for t in top["trials"]] == [("r0", 0.5), ("r3", 0.7), ("r4", 0.8)]
    assert top["trials"][0]["trialJobId"] == experiment["bestTrialId"]
    by_loss = get(port, "/api/v1/expmgr/top?key=loss&k=10")
    assert [(t["trialJobId"], t["number"]) for t in by_loss["trials"]] == [("r1", 1.0), ("r2", 2.0), ("r0", 3.0)]

    status, answer = call(port, "GET", "/api/v1/expmgr/top?k=0")
    assert status == 400 and answer["error"].startswith("k: expected a positive integer")
    status, answer = call(port, "GET", "/api/v1/expmgr/top?k=5000")
    assert status == 400 and answer["error"] == "k: at most 1000, got 5000"


def test_the_stores_result_keys_equal_those_read_from_every_result(tmp_path: Path) -> None:
    from expmgr.layout import ExperimentPaths
    from expmgr.server.results import result_keys, stored_result_keys
    from expmgr.store import open_store
    results: list[tuple[dict[str, Any], Any]] = [
        ({"x": 1}, 3), ({"x": 2}, {"acc": 0.5, "default": 1}),
        ({"x": 3}, {"nan": float("nan"), "flag": True, "text": "t"}),  # not JSON to SQLite: read in Python
        ({"x": 4}, {"default": float("inf"), "w": 2}), ({"x": 5}, {"acc": 0.7})]
    exp_id = experiment_of_results(tmp_path / "home", GRID_SPACE, results)
    store = open_store(ExperimentPaths(tmp_path / "home" / exp_id), readonly=True)
    try:
        assert stored_result_keys(store) == result_keys(value for _, value in results) == ["default", "acc", "nan", "w"]
    finally:
        store.close()
