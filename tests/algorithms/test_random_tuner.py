from __future__ import annotations

import pytest

from expmgr.algorithms.random_tuner import RandomTuner
from expmgr.algorithms.tuner import AlgorithmError, NoMoreTrialError

from tests.helpers.spaces import EVERY_TYPE, NESTED, assert_fits_every_type, assert_fits_nested


def generate(tuner: RandomTuner, space: dict, n: int) -> list[dict]:
    tuner.update_search_space(space)
    return [tuner.generate_parameters(i) for i in range(n)]


def test_same_seed_gives_the_same_sequence():
    assert generate(RandomTuner(seed=3), EVERY_TYPE, 20) == generate(RandomTuner(seed=3), EVERY_TYPE, 20)


def test_different_seeds_give_different_sequences():
    assert generate(RandomTuner(seed=3), EVERY_TYPE, 5) != generate(RandomTuner(seed=4), EVERY_TYPE, 5)


def test_parameters_fit_the_space_in_nni_shape():
    for params in generate(RandomTuner(seed=0), EVERY_TYPE, 200):
        assert_fits_every_type(params)
    for params in generate(RandomTuner(seed=0), NESTED, 200):
        assert_fits_nested(params)


def test_optimize_mode_is_accepted_and_results_are_ignored():
    tuner = RandomTuner(optimize_mode="minimize", seed=1)
    tuner.update_search_space(EVERY_TYPE)
    params = tuner.generate_parameters(0)
    tuner.receive_trial_result(0, params, {"default": 1.0})
    tuner.trial_end(0, success=True)


def test_generating_before_the_search_space_is_known_is_an_error():
    with pytest.raises(AlgorithmError, match="update_search_space"):
        RandomTuner().generate_parameters(0)


DISCRETE = {
    "a": {"_type": "choice", "_value": ["x", "y", "z", "w"]},
    "b": {"_type": "randint", "_value": [0, 5]},
}
EVERY_DISCRETE_POINT = [{"a": a, "b": b} for a in ("x", "y", "z", "w") for b in range(5)]


def test_a_finite_space_is_covered_without_repeats_then_no_more_trial():
    tuner = RandomTuner(seed=0)
    points = generate(tuner, DISCRETE, 20)
    assert sorted(points, key=str) == sorted(EVERY_DISCRETE_POINT, key=str)
    with pytest.raises(NoMoreTrialError):
        tuner.generate_parameters(20)


def test_imported_points_are_never_suggested_whether_or_not_they_have_a_value():
    tuner = RandomTuner(seed=1)
    tuner.update_search_space(DISCRETE)
    imported = EVERY_DISCRETE_POINT[:16]
    tuner.import_data([{"parameter": p, "value": None if i % 2 else float(i)} for i, p in enumerate(imported)])
    rest = [tuner.generate_parameters(i) for i in range(4)]
    assert sorted(rest, key=str) == sorted(EVERY_DISCRETE_POINT[16:], key=str)
    with pytest.raises(NoMoreTrialError):
        tuner.generate_parameters(4)


def test_data_imported_before_the_search_space_is_known_still_counts():
    tuner = RandomTuner(seed=2)
    tuner.import_data([{"parameter": p, "value": 1.0} for p in EVERY_DISCRETE_POINT[1:]])
    assert generate(tuner, DISCRETE, 1) == [EVERY_DISCRETE_POINT[0]]


def test_imported_numbers_match_suggested_ones_by_value():
    tuner = RandomTuner(seed=3)
    tuner.update_search_space({"w": {"_type": "quniform", "_value": [0, 8, 4]}})  # 0.0, 4.0 or 8.0
    tuner.import_data([{"parameter": {"w": 4}, "value": 1.0}, {"parameter": {"w": 0}, "value": None}])
    assert tuner.generate_parameters(0) == {"w": 8.0}


def test_nested_branches_whose_points_were_imported_are_not_suggested_again():
    tuner = RandomTuner(seed=4)
    tuner.update_search_space(NESTED)
    tuner.import_data([
        {"parameter": {"model": "linear"}, "value": 1.0},
        {"parameter": {"model": {"_name": "mlp", "layers": 1}}, "value": None},
        {"parameter": {"model": {"_name": "mlp", "layers": 2}}, "value": 2.0},
    ])
    for i in range(50):
        assert tuner.generate_parameters(i)["model"]["_name"] == "cnn"


def test_an_infinite_space_that_keeps_giving_tried_points_repeats_one_with_a_warning(caplog):
    # qnormal with a tiny sigma is almost always 0.0, but it is not a finite space
    tuner = RandomTuner(seed=5)
    first, second = generate(tuner, {"n": {"_type": "qnormal", "_value": [0, 0.01, 1]}}, 2)
    assert first == second == {"n": 0.0}
    assert "tried before" in caplog.text


def test_the_sequence_after_import_data_is_deterministic_under_a_seed():
    def sequence(seed: int) -> list[dict]:
        tuner = RandomTuner(seed=seed)
        tuner.update_search_space(DISCRETE)
        tuner.import_data([{"parameter": p, "value": 0.5} for p in EVERY_DISCRETE_POINT[:5]])
        return [tuner.generate_parameters(i) for i in range(10)]

    assert sequence(6) == sequence(6)
    assert sequence(6) != sequence(7)
