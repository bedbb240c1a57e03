from __future__ import annotations

import statistics
import sys

import pytest

from expmgr.algorithms import create_tuner
from expmgr.algorithms.random_tuner import RandomTuner
from expmgr.algorithms.tuner import AlgorithmError, NoMoreTrialError

from tests.helpers.spaces import PLANE, bowl, run

pytest.importorskip("sklearn")

from expmgr.algorithms.gp_tuner import GpTuner  # noqa: E402

# Small selection settings: the tests check behaviour, not NNI's default effort.
QUICK = {"selection_num_warm_up": 2000, "selection_num_starting_points": 5}

NUMERIC = {
    "units": {"_type": "choice", "_value": [16, 32, 64.5]},
    "layers": {"_type": "randint", "_value": [2, 5]},
    "dropout": {"_type": "uniform", "_value": [-1, 1]},
    "width": {"_type": "quniform", "_value": [1, 11, 4]},
    "lr": {"_type": "loguniform", "_value": [1e-3, 1]},
    "batch": {"_type": "qloguniform", "_value": [1, 100, 5]},
}


def assert_fits_numeric(params: dict) -> None:
    assert set(params) == set(NUMERIC)
    assert params["units"] in (16, 32, 64.5) and type(params["units"]) is (float if params["units"] == 64.5 else int)
    assert type(params["layers"]) is int and 2 <= params["layers"] < 5
    assert type(params["dropout"]) is float and -1 <= params["dropout"] <= 1
    assert type(params["width"]) is float and params["width"] in (1, 4, 8, 11)
    assert type(params["lr"]) is float and 1e-3 <= params["lr"] <= 1
    batch = params["batch"]
    assert type(batch) is float and 1 <= batch <= 100 and (batch % 5 == 0 or batch == 1)


def loss_of(params: dict) -> float:
    return ((params["units"] - 32) ** 2 / 100 + (params["layers"] - 3) ** 2 + params["dropout"] ** 2
            + abs(params["width"] - 4) + abs(params["lr"] - 0.01) + params["batch"] / 50)


def test_gp_beats_random_search_on_a_quadratic_bowl():
    gp = [min(v for _, v in run(GpTuner("minimize", seed=s, **QUICK), PLANE, bowl, 25)) for s in range(3)]
    rnd = [min(v for _, v in run(RandomTuner(seed=s), PLANE, bowl, 25)) for s in range(3)]
    assert statistics.median(gp) < 0.05 * statistics.median(rnd)


@pytest.mark.parametrize("utility", ["ei", "ucb", "poi"])
def test_every_utility_finds_the_bottom_of_the_bowl(utility):
    history = run(GpTuner("minimize", utility=utility, seed=0, **QUICK), PLANE, bowl, 25)
    assert min(v for _, v in history) < 1.0   # random search: ~5 after 25 trials


def test_every_numeric_type_stays_in_bounds_and_keeps_its_python_type():
    history = run(GpTuner("minimize", seed=0, cold_start_num=5, **QUICK), NUMERIC, loss_of, 20)
    for params, _ in history:
        assert_fits_numeric(params)
    assert statistics.median(v for _, v in history[10:]) < statistics.median(v for _, v in history[:5])


def test_maximize_on_the_negated_objective_makes_the_same_suggestions_as_minimize():
    minimizing = run(GpTuner("minimize", seed=1, **QUICK), PLANE, bowl, 14)
    maximizing = run(GpTuner("maximize", seed=1, **QUICK), PLANE, lambda p: {"default": -bowl(p)}, 14)
    assert [p for p, _ in maximizing] == [p for p, _ in minimizing]


def test_same_seed_gives_the_same_sequence_and_different_seeds_differ():
    def sequence(seed: int) -> list[dict]:
        return [p for p, _ in run(GpTuner("minimize", seed=seed, cold_start_num=4, **QUICK), NUMERIC, loss_of, 8)]

    assert sequence(5) == sequence(5)
    assert sequence(5) != sequence(6)


def test_the_first_cold_start_num_suggestions_are_random_then_the_model_takes_over():
    tuner = GpTuner("minimize", seed=0, cold_start_num=3, **QUICK)
    tuner.update_search_space(PLANE)
    # no results yet: any number of suggestions stay random, spread over the plane
    xs = [tuner.generate_parameters(i)["x"] for i in range(30)]
    assert min(xs) < -7 and max(xs) > 7
    for i, x in enumerate([-9.0, 0.0, 9.0]):
        tuner.receive_trial_result(i, {"x": x, "y": -1.0}, bowl({"x": x, "y": -1.0}))
    # three results on the line y = -1 whose best is x = 0: the model looks near there
    near = [tuner.generate_parameters(100 + i) for i in range(3)]
    assert all(abs(p["x"] - 3) < 6 for p in near), near


def test_imported_results_are_learned_and_imported_points_never_suggested():
    space = {"a": {"_type": "choice", "_value": [1, 2, 3]}, "b": {"_type": "randint", "_value": [0, 3]}}
    points = [{"a": a, "b": b} for a in (1, 2, 3) for b in range(3)]
    records = [{"parameter": p, "value": float(p["a"] + p["b"])} for p in points[:7]]
    records.append({"parameter": points[7], "value": None})   # ended without a result: tried all the same
    tuner = GpTuner("minimize", seed=0, cold_start_num=2, **QUICK)
    tuner.update_search_space(space)
    tuner.import_data(records)
    assert tuner.generate_parameters(0) == points[8]
    with pytest.raises(NoMoreTrialError):
        tuner.generate_parameters(1)


def test_imported_records_that_do_not_fit_the_space_are_skipped():
    tuner = GpTuner(seed=0, cold_start_num=1, **QUICK)
    tuner.update_search_space({"c": {"_type": "choice", "_value": [1, 2]}})
    tuner.import_data([{"parameter": {"c": 7}, "value": 1.0}, {"value": 1.0}, {"parameter": {"c": 2}, "value": 0.0}])
    assert tuner.generate_parameters(0) == {"c": 1}


@pytest.mark.parametrize("space, fragment", [
    ({"x": {"_type": "normal", "_value": [0, 1]}}, "parameter 'x' has type 'normal'"),
    ({"opt": {"_type": "choice", "_value": ["sgd", "adam"]}}, "parameter 'opt' is a choice with the option 'sgd'"),
    ({"m": {"_type": "choice", "_value": [{"_name": "a", "k": {"_type": "uniform", "_value": [0, 1]}}]}},
     "parameter 'm' is a choice with the option"),
])
def test_types_nni_gp_does_not_take_are_errors_naming_the_parameter(space, fragment):
    with pytest.raises(AlgorithmError, match=fragment):
        GpTuner().update_search_space(space)


def test_generating_before_the_search_space_is_known_is_an_error():
    with pytest.raises(AlgorithmError, match="update_search_space"):
        GpTuner().generate_parameters(0)


@pytest.mark.parametrize("class_args, message", [
    ({"optimize_mode": "up"}, "tuner 'GP'.*optimize_mode.*'up'"),
    ({"utility": "pi"}, "tuner 'GP'.*utility must be one of ei, ucb, poi, got 'pi'"),
    ({"kappa": -1}, "tuner 'GP'.*kappa.*-1"),
    ({"nu": 0}, "tuner 'GP'.*nu.*0"),
    ({"alpha": "small"}, "tuner 'GP'.*alpha.*'small'"),
    ({"cold_start_num": 0}, "tuner 'GP'.*cold_start_num.*0"),
    ({"selection_num_warm_up": 1.5}, "tuner 'GP'.*selection_num_warm_up.*1.5"),
    ({"selection_num_starting_points": -1}, "tuner 'GP'.*selection_num_starting_points.*-1"),
    ({"seed": -1}, "tuner 'GP'.*seed.*-1"),
    ({"population_size": 4}, "tuner 'GP' has no argument 'population_size'.*optimize_mode, utility"),
])
def test_bad_class_args_are_algorithm_errors_naming_the_argument(class_args, message):
    with pytest.raises(AlgorithmError, match=message):
        tuner = create_tuner("GP", class_args)
        tuner.update_search_space(PLANE)   # seed is checked when the generator is made


def test_class_args_defaults_are_nnis():
    tuner = create_tuner("gptuner", {})
    assert isinstance(tuner, GpTuner) and tuner.optimize_mode.value == "maximize"
    assert (tuner.utility, tuner.kappa, tuner.xi, tuner.nu, tuner.alpha) == ("ei", 5.0, 0.0, 2.5, 1e-6)
    assert (tuner.cold_start_num, tuner.selection_num_warm_up, tuner.selection_num_starting_points) == (10, 100000, 250)


def test_without_scikit_learn_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)   # what Python does for a missing package
    with pytest.raises(AlgorithmError, match=r"GP tuner needs scikit-learn.*pip install 'expmgr\[gp\]'"):
        create_tuner("GP", {})
