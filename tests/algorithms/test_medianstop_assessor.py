from __future__ import annotations

import pytest

from expmgr.algorithms import AlgorithmError, create_assessor
from expmgr.algorithms.assessor import AssessResult
from expmgr.algorithms.medianstop_assessor import MedianstopAssessor

Good, Bad = AssessResult.Good, AssessResult.Bad


def completed(assessor: MedianstopAssessor, trial: str, curve: list) -> None:
    """Report ``curve`` step by step, then end the trial successfully."""
    for step in range(1, len(curve) + 1):
        assessor.assess_trial(trial, curve[:step])
    assessor.trial_end(trial, success=True)


def mirrored(curve: list[float]) -> list[float]:
    return [-value for value in curve]


# Running averages: A -> 1, 1.5, 2, 2.5 and B -> 2, 2.5, 3, 3.5; at step 3 the
# median (the lower middle of two) is 2.
CURVE_A = [1.0, 2.0, 3.0, 4.0]
CURVE_B = [2.0, 3.0, 4.0, 5.0]


def with_two_completed(optimize_mode: str = "maximize", start_step: int = 0, sign: float = 1.0):
    assessor = MedianstopAssessor(optimize_mode, start_step)
    completed(assessor, "a", [sign * v for v in CURVE_A])
    completed(assessor, "b", [sign * v for v in CURVE_B])
    return assessor


def test_a_trial_whose_best_is_below_the_median_of_running_averages_stops():
    assessor = with_two_completed()
    assert assessor.assess_trial("bad", [0.5, 1.0, 1.2]) is Bad


def test_a_trial_at_or_above_the_median_continues():
    assert with_two_completed().assess_trial("good", [3.0, 3.0, 3.0]) is Good
    # best 2 is not strictly below the median 2
    assert with_two_completed().assess_trial("equal", [0.0, 2.0, 0.0]) is Good


def test_the_best_result_so_far_counts_not_the_latest():
    assessor = with_two_completed()
    assert assessor.assess_trial("dipped", [0.0, 3.0, 0.1]) is Good


def test_with_two_others_the_median_is_the_lenient_middle_value_as_in_nni():
    assessor = with_two_completed()
    # the mean of the two middle values would be 2.5; NNI compares with 2
    assert assessor.assess_trial("close", [2.2, 2.2, 2.2]) is Good


def test_start_step_delays_every_decision():
    assessor = with_two_completed(start_step=4)
    assert assessor.assess_trial("bad", [0.5, 1.0, 1.2]) is Good
    assert assessor.assess_trial("bad", [0.5, 1.0, 1.2, 1.3]) is Bad  # averages at 4: 2.5, 3.5 -> 2.5


def test_only_trials_that_reached_the_step_are_compared():
    assessor = with_two_completed()
    # no other trial has five steps
    assert assessor.assess_trial("long", [0.0, 0.0, 0.0, 0.0, 0.0]) is Good


def test_without_other_trials_every_trial_continues():
    assessor = MedianstopAssessor()
    assert assessor.assess_trial("alone", [0.0, -5.0, -9.0]) is Good


def test_running_trials_count_as_others():
    assessor = MedianstopAssessor()
    assessor.assess_trial("running", [5.0, 5.0])
    assert assessor.assess_trial("late", [1.0]) is Bad
    assert assessor.assess_trial("late", [1.0, 6.0]) is Good


def test_a_failed_trial_is_forgotten_when_it_ends():
    assessor = MedianstopAssessor()
    assessor.assess_trial("failing", [5.0, 5.0])
    assessor.trial_end("failing", success=False)
    assert assessor.assess_trial("late", [1.0, 1.0]) is Good


def test_a_completed_trial_keeps_counting_after_it_ends():
    assessor = MedianstopAssessor()
    completed(assessor, "done", [5.0, 5.0])
    assert assessor.assess_trial("late", [1.0, 1.0]) is Bad


def test_minimize_mirrors_maximize():
    curves = {"bad": [0.5, 1.0, 1.2], "good": [3.0, 3.0, 3.0], "close": [2.2, 2.2, 2.2]}
    maximize = with_two_completed("maximize")
    minimize = with_two_completed("minimize", sign=-1.0)
    for trial, curve in curves.items():
        assert minimize.assess_trial(trial, mirrored(curve)) is maximize.assess_trial(trial, curve)
    assert minimize.assess_trial("bad", mirrored(curves["bad"])) is Bad


def test_dict_metrics_use_their_default_entry():
    assessor = MedianstopAssessor()
    completed(assessor, "a", [{"default": v, "loss": 0.0} for v in CURVE_A])
    completed(assessor, "b", [{"default": v} for v in CURVE_B])
    assert assessor.assess_trial("bad", [{"default": v} for v in (0.5, 1.0, 1.2)]) is Bad


def test_a_nan_result_counts_as_the_worst():
    assessor = with_two_completed()
    assert assessor.assess_trial("diverged", [float("nan")] * 3) is Bad
    assert assessor.assess_trial("recovered", [float("nan"), float("nan"), 3.0]) is Good


def test_a_retried_trial_is_judged_on_its_new_history():
    assessor = with_two_completed()
    assert assessor.assess_trial("retried", [0.5, 1.0, 1.2]) is Bad
    assert assessor.assess_trial("retried", [3.0]) is Good  # the new attempt starts over


def test_created_by_name_with_nni_class_args():
    assessor = create_assessor("medianstop", {"optimize_mode": "minimize", "start_step": 5})
    assert isinstance(assessor, MedianstopAssessor)
    assert assessor.start_step == 5


@pytest.mark.parametrize("args, match", [
    ({"start_step": -1}, "start_step.*-1"),
    ({"start_step": 1.5}, "start_step.*1.5"),
    ({"optimize_mode": "up"}, "optimize_mode.*'up'"),
])
def test_bad_class_args_name_the_argument_and_value(args, match):
    with pytest.raises(AlgorithmError, match=match):
        create_assessor("Medianstop", args)
