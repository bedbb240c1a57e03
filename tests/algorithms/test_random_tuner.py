from __future__ import annotations

import pytest

from expmgr.algorithms.random_tuner import RandomTuner
from expmgr.algorithms.tuner import AlgorithmError

from .spaces import EVERY_TYPE, NESTED, assert_fits_every_type, assert_fits_nested


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
