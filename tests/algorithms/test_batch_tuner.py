from __future__ import annotations

import pytest

from expmgr.algorithms import create_tuner
from expmgr.algorithms.batch_tuner import BatchTuner
from expmgr.algorithms.tuner import AlgorithmError, NoMoreTrialError
from expmgr.config import validate_search_space

CONFIGS = [
    {"optimizer": "Adam", "lr": 0.001},
    {"optimizer": "SGD", "lr": 0.01, "momentum": 0.9},
    {"optimizer": "Adam", "lr": 0.0001, "layers": [64, 32]},
]
SPACE = {"combine_params": {"_type": "choice", "_value": CONFIGS}}


def run_all(tuner: BatchTuner) -> list[dict]:
    generated = []
    while True:
        try:
            generated.append(tuner.generate_parameters(len(generated)))
        except NoMoreTrialError:
            return generated


def started(space: dict = SPACE, **class_args) -> BatchTuner:
    tuner = BatchTuner(**class_args)
    tuner.update_search_space(space)
    return tuner


def test_each_configuration_is_given_once_in_list_order_then_no_more_trials():
    tuner = started()
    assert run_all(tuner) == CONFIGS
    with pytest.raises(NoMoreTrialError):
        tuner.generate_parameters(99)


def test_generate_multiple_parameters_stops_at_the_end_of_the_list():
    assert started().generate_multiple_parameters(list(range(10))) == CONFIGS


def test_parameters_are_copies_the_trial_may_change():
    tuner = started()
    first = tuner.generate_parameters(0)
    first["layers"] = "changed"
    assert run_all(tuner) == CONFIGS[1:]
    assert "layers" not in CONFIGS[0]


def test_a_configuration_listed_twice_runs_twice():
    space = {"combine_params": {"_type": "choice", "_value": [{"x": 1}, {"x": 1}, {"x": 2}]}}
    assert run_all(started(space)) == [{"x": 1}, {"x": 1}, {"x": 2}]


def test_results_change_nothing():
    tuner = started(optimize_mode="minimize", seed=3)
    params = tuner.generate_parameters(0)
    tuner.receive_trial_result(0, params, {"default": 1.0})
    tuner.trial_end(0, success=True)
    assert run_all(tuner) == CONFIGS[1:]


def test_the_config_validator_accepts_a_batch_search_space():
    validate_search_space(SPACE)


def test_created_by_name_with_no_class_args():
    tuner = create_tuner("batch", None)
    assert isinstance(tuner, BatchTuner)


@pytest.mark.parametrize("space, problem", [
    ({"params": {"_type": "choice", "_value": CONFIGS}}, "exactly one key 'combine_params'"),
    ({**SPACE, "lr": {"_type": "uniform", "_value": [0, 1]}}, "exactly one key 'combine_params'"),
    ({"combine_params": {"_type": "randint", "_value": [0, 3]}}, "combine_params must be a choice"),
    ({"combine_params": {"_type": "choice", "_value": []}}, "non-empty list of configurations"),
    ({"combine_params": {"_type": "choice", "_value": [{"x": 1}, 0.5]}}, r"_value\[1\] is 0.5, not a dict"),
])
def test_a_wrong_search_space_shape_says_what_it_should_be(space, problem):
    with pytest.raises(AlgorithmError, match=problem) as error:
        BatchTuner().update_search_space(space)
    assert '{"combine_params": {"_type": "choice", "_value": [' in str(error.value)


def test_imported_configurations_are_skipped_with_or_without_a_result():
    tuner = started()
    tuner.import_data([
        {"parameter": CONFIGS[0], "value": 0.5},
        {"parameter": CONFIGS[2], "value": None},
        {"parameter": {"optimizer": "RMSprop"}, "value": 0.1},  # not in the list: nothing to skip
    ])
    assert run_all(tuner) == [CONFIGS[1]]


def test_an_import_before_the_search_space_is_applied_when_it_comes():
    tuner = BatchTuner()
    tuner.import_data([{"parameter": dict(reversed(list(CONFIGS[1].items()))), "value": 0.7}])
    tuner.update_search_space(SPACE)
    assert run_all(tuner) == [CONFIGS[0], CONFIGS[2]]


def test_each_import_uses_up_one_copy_of_a_repeated_configuration():
    space = {"combine_params": {"_type": "choice", "_value": [{"x": 1}, {"x": 2}, {"x": 1}]}}
    tuner = started(space)
    tuner.import_data([{"parameter": {"x": 1}, "value": 1.0}])
    assert run_all(tuner) == [{"x": 2}, {"x": 1}]


def test_a_new_list_skips_what_was_already_run():
    tuner = started()
    assert tuner.generate_parameters(0) == CONFIGS[0]
    tuner.update_search_space({"combine_params": {"_type": "choice", "_value": [CONFIGS[0], {"x": 1}]}})
    assert run_all(tuner) == [{"x": 1}]


def test_bad_class_args_are_errors():
    with pytest.raises(AlgorithmError, match="optimize_mode"):
        BatchTuner(optimize_mode="sideways")
    with pytest.raises(AlgorithmError, match="seed"):
        BatchTuner(seed=-1)


def test_generating_before_the_search_space_is_known_is_an_error():
    with pytest.raises(AlgorithmError, match="update_search_space"):
        BatchTuner().generate_parameters(0)
