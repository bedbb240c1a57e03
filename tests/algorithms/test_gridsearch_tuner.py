from __future__ import annotations

import json
import math

import pytest

from expmgr.algorithms.gridsearch_tuner import GridSearchTuner
from expmgr.algorithms.tuner import AlgorithmError, NoMoreTrialError

SMALL = {
    "act": {"_type": "choice", "_value": ["relu", "tanh", "gelu"]},
    "layers": {"_type": "randint", "_value": [1, 3]},
    "dropout": {"_type": "quniform", "_value": [0, 1, 0.5]},
}


def every_combination(space: dict) -> list[dict]:
    tuner = GridSearchTuner()
    tuner.update_search_space(space)
    result = []
    while True:
        try:
            result.append(tuner.generate_parameters(len(result)))
        except NoMoreTrialError:
            return result


def test_each_combination_is_generated_exactly_once_then_no_more_trials():
    tuner = GridSearchTuner()
    tuner.update_search_space(SMALL)
    combos = tuner.generate_multiple_parameters(list(range(100)))
    assert len(combos) == 3 * 2 * 3
    assert len({json.dumps(c, sort_keys=True) for c in combos}) == len(combos)
    assert {c["layers"] for c in combos} == {1, 2}
    assert {c["dropout"] for c in combos} == {0.0, 0.5, 1.0}
    with pytest.raises(NoMoreTrialError):
        tuner.generate_parameters(100)


def test_order_is_deterministic_with_the_first_parameter_varying_slowest():
    combos = every_combination(SMALL)
    assert combos == every_combination(SMALL)
    assert combos[0] == {"act": "relu", "layers": 1, "dropout": 0.0}
    assert combos[1] == {"act": "relu", "layers": 1, "dropout": 0.5}
    assert [c["act"] for c in combos[::6]] == ["relu", "tanh", "gelu"]


def test_randint_values_are_ints_and_exclude_upper():
    assert [c["n"] for c in every_combination({"n": {"_type": "randint", "_value": [-1, 2]}})] == [-1, 0, 1]
    assert all(type(c["layers"]) is int for c in every_combination(SMALL))


def test_quniform_grid_is_every_value_the_type_can_take():
    combos = every_combination({"w": {"_type": "quniform", "_value": [1, 11, 4]}})
    assert [c["w"] for c in combos] == [1.0, 4.0, 8.0, 11.0]


def test_nested_choice_expands_each_option_with_its_own_children():
    space = {
        "model": {"_type": "choice", "_value": [
            {"_name": "cnn", "kernel": {"_type": "choice", "_value": [3, 5]}},
            "mlp",
        ]},
        "batch": {"_type": "choice", "_value": [16, 32]},
    }
    assert every_combination(space) == [
        {"model": {"_name": "cnn", "kernel": 3}, "batch": 16},
        {"model": {"_name": "cnn", "kernel": 3}, "batch": 32},
        {"model": {"_name": "cnn", "kernel": 5}, "batch": 16},
        {"model": {"_name": "cnn", "kernel": 5}, "batch": 32},
        {"model": "mlp", "batch": 16},
        {"model": "mlp", "batch": 32},
    ]


def test_continuous_parameters_are_tried_at_five_points():
    space = {
        "u": {"_type": "uniform", "_value": [0, 1]},
        "lu": {"_type": "loguniform", "_value": [1e-4, 1]},
        "n": {"_type": "normal", "_value": [10, 2]},
    }
    combos = every_combination(space)
    assert len(combos) == 5 ** 3
    assert sorted({c["u"] for c in combos}) == [0.0, 0.25, 0.5, 0.75, 1.0]
    lu = sorted({c["lu"] for c in combos})
    assert [round(math.log10(v), 9) for v in lu] == [-4, -3, -2, -1, 0]
    assert sorted({c["n"] for c in combos}) == [6.0, 8.0, 10.0, 12.0, 14.0]


def test_duplicate_options_and_imported_parameters_are_skipped():
    tuner = GridSearchTuner()
    tuner.update_search_space({"x": {"_type": "choice", "_value": ["a", "a", "b", "c"]}})
    tuner.import_data([{"parameter": {"x": "b"}, "value": 1.0}])
    assert tuner.generate_multiple_parameters([0, 1, 2, 3]) == [{"x": "a"}, {"x": "c"}]


def test_imported_points_match_grid_points_by_value_not_by_spelling():
    tuner = GridSearchTuner()
    tuner.update_search_space({"x": {"_type": "quniform", "_value": [0, 10, 2]}})
    tuner.import_data([{"parameter": {"x": 4}, "value": None}, {"parameter": {"x": 8.0}, "value": 1}])
    assert [p["x"] for p in tuner.generate_multiple_parameters(list(range(9)))] == [0.0, 2.0, 6.0, 10.0]


def test_invalid_optimize_mode_is_an_error():
    with pytest.raises(AlgorithmError, match="optimize_mode"):
        GridSearchTuner(optimize_mode="sideways")
