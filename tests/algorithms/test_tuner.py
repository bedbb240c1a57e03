from __future__ import annotations

import pytest

from expmgr.algorithms.tuner import (
    AlgorithmError,
    NoMoreTrialError,
    OptimizeMode,
    Tuner,
    extract_scalar_reward,
)


class TwoTrialTuner(Tuner):
    """An NNI-style custom tuner: only the NNI method names, nothing else."""

    def __init__(self) -> None:
        self.results: dict[int, float] = {}

    def update_search_space(self, search_space):
        self.space = search_space

    def generate_parameters(self, parameter_id, **kwargs):
        if parameter_id >= 2:
            raise NoMoreTrialError()
        return {"x": parameter_id}

    def receive_trial_result(self, parameter_id, parameters, value, **kwargs):
        self.results[parameter_id] = extract_scalar_reward(value)


def test_generate_multiple_parameters_stops_at_no_more_trial_error():
    tuner = TwoTrialTuner()
    assert tuner.generate_multiple_parameters([0, 1, 2, 3]) == [{"x": 0}, {"x": 1}]
    assert tuner.generate_multiple_parameters([5]) == []


def test_optional_hooks_of_the_base_class_do_nothing():
    tuner = TwoTrialTuner()
    tuner.trial_end(0, success=False)
    tuner.import_data([{"parameter": {"x": 0}, "value": 1.0}])
    tuner.save_checkpoint()
    tuner.load_checkpoint()


def test_required_methods_name_the_tuner_that_lacks_them():
    with pytest.raises(NotImplementedError, match="Tuner must implement generate_parameters"):
        Tuner().generate_parameters(0)


def test_final_metric_is_a_number_or_the_default_of_a_dict():
    assert extract_scalar_reward(3) == 3.0
    assert extract_scalar_reward({"default": 0.5, "loss": 2}) == 0.5


@pytest.mark.parametrize("bad", [{"loss": 2}, "0.5", None, True, {"default": [1]}])
def test_final_metric_without_a_numeric_default_is_an_algorithm_error(bad):
    with pytest.raises(AlgorithmError, match="final metric"):
        extract_scalar_reward(bad)


def test_optimize_mode_parses_nni_names_case_insensitively():
    assert OptimizeMode.parse("Maximize") is OptimizeMode.Maximize
    assert OptimizeMode.parse("minimize") is OptimizeMode.Minimize
    with pytest.raises(AlgorithmError, match="optimize_mode must be 'maximize' or 'minimize', got 'up'"):
        OptimizeMode.parse("up")
