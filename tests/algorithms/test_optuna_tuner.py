from __future__ import annotations

import importlib.util
import logging
import math
import sys

import pytest

from expmgr.algorithms import create_tuner
from expmgr.algorithms.tuner import AlgorithmError, NoMoreTrialError

from tests.helpers.spaces import EVERY_TYPE, NESTED, assert_fits_every_type, assert_fits_nested

optuna = pytest.importorskip("optuna")

from expmgr.algorithms.optuna_tuner import SAMPLERS, OptunaTuner  # noqa: E402

TrialState = optuna.trial.TrialState

# Small startup phases, so a dozen trials reach each sampler's model-based proposals.
QUICK_ARGS = {
    "TPE": {"n_startup_trials": 4},
    "CmaEs": {"n_startup_trials": 2},
    "GP": {"n_startup_trials": 3},
    "NSGAII": {"population_size": 4},
    "QMC": {},
    "Random": {},
}
TRIALS = {"GP": 5}  # GP fits a Gaussian process per proposal: slow with ten parameters


def sampler_available(name: str) -> bool:
    return all(importlib.util.find_spec(module) is not None for module in SAMPLERS[name.lower()].needs)


def skip_unless_available(name: str) -> None:
    if not sampler_available(name):
        needs = " and ".join(SAMPLERS[name.lower()].needs)
        pytest.skip(f"Optuna's {name} sampler needs {needs}, not installed here")


def started(space: dict, **class_args) -> OptunaTuner:
    tuner = OptunaTuner(**class_args)
    tuner.update_search_space(space)
    return tuner


def run(tuner: OptunaTuner, n: int, objective) -> list[dict]:
    """n trials, each told ``objective(params)`` (or ended without a result when it gives None)."""
    generated = []
    for parameter_id in range(n):
        params = tuner.generate_parameters(parameter_id)
        generated.append(params)
        value = objective(params)
        if value is not None:
            tuner.receive_trial_result(parameter_id, params, value)
        tuner.trial_end(parameter_id, success=value is not None)
    return generated


def every_type_loss(params: dict) -> float:
    return (params["dropout"] - 0.2) ** 2 + math.log(params["lr"]) ** 2 / 10 + params["layers"]


def nested_loss(params: dict) -> float:
    model = params["model"]
    if model == "linear":
        return 1.0
    return model["lr"] if model["_name"] == "cnn" else 0.5 + model["layers"] / 10


@pytest.mark.parametrize("sampler", list(QUICK_ARGS))
def test_every_sampler_gives_values_inside_every_type_of_space(sampler):
    skip_unless_available(sampler)
    tuner = started(EVERY_TYPE, sampler=sampler, sampler_args=QUICK_ARGS[sampler], seed=1,
                    optimize_mode="minimize")
    for params in run(tuner, TRIALS.get(sampler, 12), every_type_loss):
        assert_fits_every_type(params)
        assert -4 <= params["shift"] <= 4 and -8 <= params["offset"] <= 8  # mu ± 4 sigma
        assert math.exp(-4) <= params["scale"] <= math.exp(4)


@pytest.mark.parametrize("sampler", list(QUICK_ARGS))
def test_every_sampler_handles_nested_choices(sampler):
    skip_unless_available(sampler)
    tuner = started(NESTED, sampler=sampler, sampler_args=QUICK_ARGS[sampler], seed=2,
                    optimize_mode="minimize")
    for params in run(tuner, TRIALS.get(sampler, 12), nested_loss):
        assert_fits_nested(params)


def test_only_the_chosen_options_parameters_are_asked_for():
    tuner = started(NESTED, sampler="Random", seed=0)
    run(tuner, 30, nested_loss)
    by_option = {}
    for trial in tuner.study.trials:
        by_option.setdefault(trial.params["model"], set()).add(frozenset(trial.params))
    assert by_option == {
        0: {frozenset({"model", "model/0/kernel", "model/0/lr"})},
        1: {frozenset({"model", "model/1/layers"})},
        2: {frozenset({"model"})},
    }


def test_q_types_take_nni_values_and_randint_excludes_upper():
    tuner = started({
        "width": {"_type": "quniform", "_value": [1, 11, 4]},
        "n": {"_type": "randint", "_value": [2, 5]},
        "step": {"_type": "quniform", "_value": [0, 1, 0.1]},
    }, sampler="Random", seed=3)
    generated = run(tuner, 100, lambda params: 0.0)  # of 4 * 3 * 11 points
    assert {p["width"] for p in generated} == {1.0, 4.0, 8.0, 11.0}
    assert {p["n"] for p in generated} == {2, 3, 4}
    assert all(type(p["n"]) is int for p in generated)
    assert {round(p["step"], 9) for p in generated} == {round(k / 10, 9) for k in range(11)}


@pytest.mark.parametrize("name", ["TPE", "tpe", "NSGAII", "nsgaii", "Random", "RANDOM"])
def test_sampler_names_are_case_insensitive(name):
    tuner = OptunaTuner(sampler=name)
    assert type(tuner.sampler).__name__ == SAMPLERS[name.lower()].cls


def test_created_by_name_through_class_args():
    tuner = create_tuner("optuna", {"sampler": "nsgaii", "optimize_mode": "minimize", "seed": 4})
    assert isinstance(tuner.sampler, optuna.samplers.NSGAIISampler)
    assert tuner.study.directions == [optuna.study.StudyDirection.MINIMIZE]


@pytest.mark.parametrize("sampler", ["TPE", "NSGAII", "QMC"])
def test_same_seed_and_results_give_the_same_sequence(sampler):
    skip_unless_available(sampler)

    def sequence(seed):
        tuner = started(EVERY_TYPE, sampler=sampler, sampler_args=QUICK_ARGS[sampler], seed=seed)
        return run(tuner, 12, every_type_loss)

    assert sequence(5) == sequence(5)
    assert sequence(5) != sequence(6)


def test_tpe_follows_the_optimize_mode():
    def late_mean(mode):
        tuner = started({"x": {"_type": "uniform", "_value": [0, 1]}}, optimize_mode=mode, seed=0,
                        sampler_args={"n_startup_trials": 5})
        return sum(p["x"] for p in run(tuner, 40, lambda p: p["x"])[-15:]) / 15

    assert late_mean("minimize") < 0.25
    assert late_mean("maximize") > 0.75


def test_results_complete_trials_and_ends_without_result_fail_them():
    tuner = started({"x": {"_type": "uniform", "_value": [0, 1]}}, seed=0)
    run(tuner, 4, lambda p: {"default": 2 * p["x"], "other": 1} if p["x"] < 0.5 else None)
    tuner.generate_parameters(4)
    tuner.receive_trial_result(4, {}, float("nan"))
    for trial in tuner.study.trials[:4]:
        if trial.params["x"] < 0.5:
            assert trial.state == TrialState.COMPLETE and trial.values == [2 * trial.params["x"]]
        else:
            assert trial.state == TrialState.FAIL
    assert tuner.study.trials[4].state == TrialState.FAIL  # NaN counts as a failure


def test_two_objectives_with_nsgaii_give_a_pareto_front():
    tuner = started(
        {"x": {"_type": "uniform", "_value": [0, 1]}, "y": {"_type": "uniform", "_value": [0, 1]}},
        sampler="NSGAII", sampler_args={"population_size": 8}, seed=7,
        objectives={"default": "maximize", "latency": "minimize"},
    )
    run(tuner, 48, lambda p: {"default": p["x"], "latency": 10 * p["x"] ** 2 + p["y"], "loss": 3})
    study = tuner.study
    assert study.directions == [optuna.study.StudyDirection.MAXIMIZE, optuna.study.StudyDirection.MINIMIZE]
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 48
    assert all(t.values == [t.params["x"], 10 * t.params["x"] ** 2 + t.params["y"]] for t in complete)

    def dominates(a, b):  # a is at least as good in both and better in one
        (acc_a, lat_a), (acc_b, lat_b) = a.values, b.values
        return acc_a >= acc_b and lat_a <= lat_b and (acc_a, lat_a) != (acc_b, lat_b)

    front = study.best_trials
    assert len(front) >= 2
    front_numbers = {t.number for t in front}
    for best in front:
        assert not any(dominates(other, best) for other in complete)
    for other in complete:
        if other.number not in front_numbers:
            assert any(dominates(best, other) for best in front)


def test_a_result_missing_an_objective_is_an_error_naming_it():
    tuner = started({"x": {"_type": "uniform", "_value": [0, 1]}}, sampler="NSGAII",
                    objectives={"default": "maximize", "latency": "minimize"})
    params = tuner.generate_parameters(0)
    with pytest.raises(AlgorithmError, match="no 'latency'.*objectives"):
        tuner.receive_trial_result(0, params, {"default": 0.9})
    with pytest.raises(AlgorithmError, match="no 'latency'"):
        tuner.receive_trial_result(0, params, 0.9)
    with pytest.raises(AlgorithmError, match="'latency' must be a number"):
        tuner.receive_trial_result(0, params, {"default": 0.9, "latency": "fast"})


def test_a_single_named_objective_reads_that_metric():
    tuner = started({"x": {"_type": "uniform", "_value": [0, 1]}}, objectives={"latency": "minimize"})
    params = tuner.generate_parameters(0)
    tuner.receive_trial_result(0, params, {"default": 0.9, "latency": 12})
    assert tuner.study.trials[0].values == [12.0]
    assert tuner.study.direction == optuna.study.StudyDirection.MINIMIZE


def test_imported_results_become_finished_trials_and_are_not_suggested_again(caplog):
    space = {"act": {"_type": "choice", "_value": ["relu", "tanh", "gelu", "elu"]},
             "layers": {"_type": "randint", "_value": [1, 3]}}
    tuner = started(space, seed=0)
    with caplog.at_level(logging.WARNING, logger="nni.tuner.optuna"):
        tuner.import_data([
            {"parameter": {"act": "relu", "layers": 1}, "value": 0.5},
            {"parameter": {"act": "tanh", "layers": 2}, "value": {"default": 0.7, "loss": 0.1}},
            {"parameter": {"act": "gelu", "layers": 1}, "value": None},  # tried, no result
            {"parameter": {"act": "swish", "layers": 1}, "value": 0.9},  # not in the space
            {"parameter": {"act": "elu", "layers": 3}, "value": 0.9},  # randint's upper is excluded
        ])
    assert "swish" in caplog.text and "layers" in caplog.text
    assert [(t.params, t.values) for t in tuner.study.trials] == [
        ({"act": 0, "layers": 1}, [0.5]),
        ({"act": 1, "layers": 2}, [0.7]),
    ]
    generated = run(tuner, 5, lambda p: 0.1)
    imported = [{"act": "relu", "layers": 1}, {"act": "tanh", "layers": 2}, {"act": "gelu", "layers": 1}]
    assert all(p not in imported for p in generated)
    assert len({(p["act"], p["layers"]) for p in generated}) == 5
    with pytest.raises(NoMoreTrialError):
        tuner.generate_parameters(5)  # 8 points: 3 imported, 5 generated


def test_imported_values_of_stepped_and_normal_types_fit_or_are_skipped():
    space = {"w": {"_type": "quniform", "_value": [1, 11, 4]}, "s": {"_type": "normal", "_value": [0, 1]},
             "b": {"_type": "qloguniform", "_value": [1, 100, 5]}}
    tuner = started(space, seed=0)
    tuner.import_data([
        {"parameter": {"w": 11, "s": 0.5, "b": 1}, "value": 1.0},  # clipped bounds are NNI values
        {"parameter": {"w": 5, "s": 0.5, "b": 5}, "value": 1.0},  # 5 is not a quniform value
        {"parameter": {"w": 4, "s": 9.0, "b": 5}, "value": 1.0},  # beyond mu + 4 sigma
    ])
    assert len(tuner.study.trials) == 1
    assert tuner.study.trials[0].params == {"w": 12.0, "s": 0.5, "b": 1.0}


def test_a_result_for_a_parameter_asked_by_an_earlier_tuner_is_learned():
    tuner = started({"x": {"_type": "uniform", "_value": [0, 1]}}, seed=0)
    tuner.receive_trial_result(17, {"x": 0.25}, 3.0)  # a resumed experiment's requeued trial
    tuner.trial_end(17, success=True)
    assert [(t.params, t.values) for t in tuner.study.trials] == [({"x": 0.25}, [3.0])]


def test_a_changed_search_space_keeps_the_results_that_fit_it():
    tuner = started({"x": {"_type": "uniform", "_value": [0, 1]}}, seed=0)
    xs = [p["x"] for p in run(tuner, 4, lambda p: p["x"])]
    pending = tuner.generate_parameters(4)
    tuner.update_search_space({"x": {"_type": "uniform", "_value": [0, 0.5]}})
    tuner.receive_trial_result(4, pending, 1.0)
    kept = sorted(x for x in xs + [pending["x"]] if x <= 0.5)
    assert sorted(t.params["x"] for t in tuner.study.trials) == kept
    assert all(0 <= p["x"] <= 0.5 for p in run_from(tuner, 5, 5))


def run_from(tuner: OptunaTuner, first_id: int, n: int) -> list[dict]:
    return [tuner.generate_parameters(first_id + i) for i in range(n)]


def test_optuna_logs_warnings_only_and_through_our_logging():
    OptunaTuner()
    assert logging.getLogger("optuna").getEffectiveLevel() == logging.WARNING
    assert logging.getLogger("optuna").propagate


@pytest.mark.parametrize("class_args, problem", [
    ({"sampler": "Hyperband"}, "unknown sampler 'Hyperband'.*TPE, CmaEs, GP, NSGAII, QMC, Random"),
    ({"sampler_args": {"n_startup_trials": 3, "flavour": 1}}, "sampler_args.*TPESampler"),
    ({"sampler_args": {"seed": 3}}, "seed class argument"),
    ({"sampler_args": [1]}, "sampler_args must be a mapping"),
    ({"optimize_mode": "up"}, "optimize_mode"),
    ({"objectives": {"default": "up"}}, "objectives 'default'.*'up'"),
    ({"objectives": ["default"]}, "objectives must be a mapping"),
    ({"sampler": "CmaEs", "objectives": {"a": "maximize", "b": "minimize"}}, "'CmaEs' optimizes one objective"),
    ({"seed": -1}, "seed"),
])
def test_bad_class_args_are_errors_naming_them(class_args, problem):
    with pytest.raises(AlgorithmError, match=problem):
        OptunaTuner(**class_args)


def test_a_sampler_whose_package_is_missing_says_what_to_install():
    missing = [info for info in SAMPLERS.values()
               if any(importlib.util.find_spec(m) is None for m in info.needs)]
    if not missing:
        pytest.skip("every sampler's packages are installed here")
    with pytest.raises(AlgorithmError, match=f"sampler '{missing[0].name}' needs .*pip install"):
        OptunaTuner(sampler=missing[0].name)


def test_without_optuna_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # what Python does for a missing package
    with pytest.raises(AlgorithmError, match=r"pip install 'expmgr\[optuna\]'"):
        OptunaTuner()


def test_generating_before_the_search_space_is_known_is_an_error():
    with pytest.raises(AlgorithmError, match="update_search_space"):
        OptunaTuner().generate_parameters(0)
