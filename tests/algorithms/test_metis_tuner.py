from __future__ import annotations

import statistics
import sys

import pytest

from expmgr.algorithms import create_tuner
from expmgr.algorithms.random_tuner import RandomTuner
from expmgr.algorithms.tuner import AlgorithmError, NoMoreTrialError

from tests.helpers.spaces import PLANE, bowl, run

pytest.importorskip("sklearn")

from expmgr.algorithms.metis_tuner import MetisTuner  # noqa: E402

QUICK = {"selection_num_starting_points": 200}

NUMERIC = {
    "units": {"_type": "choice", "_value": [16, 32, 64.5]},
    "layers": {"_type": "randint", "_value": [2, 5]},
    "dropout": {"_type": "uniform", "_value": [-1, 1]},
    "width": {"_type": "quniform", "_value": [1, 11, 4]},
}


def assert_fits_numeric(params: dict) -> None:
    assert set(params) == set(NUMERIC)
    assert params["units"] in (16, 32, 64.5) and type(params["units"]) is (float if params["units"] == 64.5 else int)
    assert type(params["layers"]) is int and 2 <= params["layers"] < 5
    assert type(params["dropout"]) is float and -1 <= params["dropout"] <= 1
    assert type(params["width"]) is float and params["width"] in (1, 4, 8, 11)


def loss_of(params: dict) -> float:
    return (params["units"] - 32) ** 2 / 100 + (params["layers"] - 3) ** 2 + params["dropout"] ** 2 + abs(params["width"] - 4)


def test_metis_beats_random_search_on_a_quadratic_bowl():
    # Metis explores nine suggestions in ten by default, so it needs a few more trials than GP
    metis = [min(v for _, v in run(MetisTuner("minimize", seed=s, **QUICK), PLANE, bowl, 40)) for s in range(3)]
    rnd = [min(v for _, v in run(RandomTuner(seed=s), PLANE, bowl, 40)) for s in range(3)]
    assert statistics.median(metis) < 0.2 * statistics.median(rnd)


def test_without_exploration_it_goes_to_the_predicted_optimum():
    # exploration_probability 0: each suggestion is the model's optimum unless that was tried
    history = run(MetisTuner("minimize", exploration_probability=0.0, seed=0, **QUICK), PLANE, bowl, 20)
    assert min(v for _, v in history[10:]) < 0.5
    assert statistics.median(v for _, v in history[10:]) < statistics.median(v for _, v in history[:10])


def test_every_type_stays_in_bounds_and_keeps_its_python_type():
    history = run(MetisTuner("minimize", seed=0, cold_start_num=5, **QUICK), NUMERIC, loss_of, 18)
    for params, _ in history:
        assert_fits_numeric(params)


def test_maximize_on_the_negated_objective_makes_the_same_suggestions_as_minimize():
    minimizing = run(MetisTuner("minimize", seed=1, **QUICK), PLANE, bowl, 14)
    maximizing = run(MetisTuner("maximize", seed=1, **QUICK), PLANE, lambda p: {"default": -bowl(p)}, 14)
    assert [p for p, _ in maximizing] == [p for p, _ in minimizing]


def test_same_seed_gives_the_same_sequence_and_different_seeds_differ():
    def sequence(seed: int) -> list[dict]:
        return [p for p, _ in run(MetisTuner("minimize", seed=seed, cold_start_num=4, **QUICK), NUMERIC, loss_of, 8)]

    assert sequence(5) == sequence(5)
    assert sequence(5) != sequence(6)


def test_with_no_candidates_it_suggests_the_optimum_or_a_random_point():
    # no_candidates: only the optimum (exploration_probability 0) - never a repeat
    history = run(MetisTuner("minimize", no_candidates=True, exploration_probability=0.0, seed=2, **QUICK),
                  PLANE, bowl, 16)
    points = [(p["x"], p["y"]) for p, _ in history]
    assert len(set(points)) == len(points)
    assert min(v for _, v in history[10:]) < 1.0


def test_resampling_suggests_a_point_again_when_its_result_is_an_outlier():
    # 60 results on a smooth plane, one of them far off: with re-sampling on, Metis asks for it again
    space = {"x": {"_type": "quniform", "_value": [0, 59, 1]}}
    records = [{"parameter": {"x": float(x)}, "value": float(x) + (100.0 if x == 30 else 0.0)} for x in range(60)]
    tuner = MetisTuner("minimize", no_resampling=False, exploration_probability=1.0, seed=0, **QUICK)
    tuner.update_search_space(space)
    tuner.import_data(records)
    assert tuner.generate_parameters(0) == {"x": 30.0}


def test_once_every_point_is_tried_there_are_no_more_trials():
    space = {"a": {"_type": "choice", "_value": [1, 2, 3]}, "b": {"_type": "randint", "_value": [0, 3]}}
    points = [{"a": a, "b": b} for a in (1, 2, 3) for b in range(3)]
    tuner = MetisTuner("minimize", seed=0, cold_start_num=2, **QUICK)
    tuner.update_search_space(space)
    tuner.import_data([{"parameter": p, "value": float(p["a"] * p["b"])} for p in points[:8]])
    assert tuner.generate_parameters(0) == points[8]
    tuner.receive_trial_result(0, points[8], 1.0)
    with pytest.raises(NoMoreTrialError):
        tuner.generate_parameters(1)


@pytest.mark.parametrize("space, fragment", [
    ({"lr": {"_type": "loguniform", "_value": [1e-3, 1]}}, "parameter 'lr' has type 'loguniform'"),
    ({"x": {"_type": "normal", "_value": [0, 1]}}, "parameter 'x' has type 'normal'"),
    ({"opt": {"_type": "choice", "_value": ["sgd", "adam"]}}, "parameter 'opt' is a choice with the option 'sgd'"),
])
def test_types_nni_metis_does_not_take_are_errors_naming_the_parameter(space, fragment):
    with pytest.raises(AlgorithmError, match=fragment):
        MetisTuner().update_search_space(space)


@pytest.mark.parametrize("class_args, message", [
    ({"optimize_mode": "up"}, "tuner 'Metis'.*optimize_mode.*'up'"),
    ({"no_resampling": "yes"}, "tuner 'Metis'.*no_resampling must be true or false, got 'yes'"),
    ({"no_candidates": 1}, "tuner 'Metis'.*no_candidates must be true or false, got 1"),
    ({"selection_num_starting_points": 0}, "tuner 'Metis'.*selection_num_starting_points.*0"),
    ({"cold_start_num": 2.5}, "tuner 'Metis'.*cold_start_num.*2.5"),
    ({"exploration_probability": 1.5}, "tuner 'Metis'.*exploration_probability.*1.5"),
    ({"utility": "ei"}, "tuner 'Metis' has no argument 'utility'.*optimize_mode, no_resampling"),
])
def test_bad_class_args_are_algorithm_errors_naming_the_argument(class_args, message):
    with pytest.raises(AlgorithmError, match=message):
        create_tuner("Metis", class_args)


def test_class_args_defaults_are_nnis():
    tuner = create_tuner("METISTUNER", {})
    assert isinstance(tuner, MetisTuner) and tuner.optimize_mode.value == "maximize"
    assert (tuner.no_resampling, tuner.no_candidates, tuner.selection_num_starting_points,
            tuner.cold_start_num, tuner.exploration_probability) == (True, False, 600, 10, 0.9)


def test_without_scikit_learn_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)
    with pytest.raises(AlgorithmError, match=r"Metis tuner needs scikit-learn.*pip install 'expmgr\[gp\]'"):
        create_tuner("Metis", {})
