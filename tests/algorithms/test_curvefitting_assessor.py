from __future__ import annotations

import math

import numpy as np
import pytest

from expmgr.algorithms import AlgorithmError, create_assessor
from expmgr.algorithms.assessor import AssessResult
from expmgr.algorithms.curvefitting_assessor import CurvefittingAssessor, predict

Good, Bad = AssessResult.Good, AssessResult.Bad

pytestmark = pytest.mark.filterwarnings("error")  # fitting must not spill numpy warnings


def curve(formula, steps: int) -> list[float]:
    return [float(formula(x)) for x in range(1, steps + 1)]


def saturating_at_half(x):  # 0.1 at step 1, then flattens out near 0.5
    return 0.5 - 0.4 * math.exp(-0.5 * (x - 1))


def heading_above_best(x):  # 0.77 at step 6, 0.90 at step 20
    return 1.0 - 0.8 * x**-0.7


def with_completed(final: float = 0.9, **class_args) -> CurvefittingAssessor:
    """An assessor that saw one trial complete with ``final`` as its last result."""
    assessor = CurvefittingAssessor(**class_args)
    assessor.assess_trial("done", [final / 2, final])
    assessor.trial_end("done", success=True)
    return assessor


def test_predictions_of_exact_curves_are_close():
    assert predict(curve(saturating_at_half, 6), 20) == pytest.approx(0.5, abs=1e-3)
    assert predict(curve(heading_above_best, 6), 20) == pytest.approx(1.0 - 0.8 * 20**-0.7, abs=1e-3)
    assert predict(curve(lambda x: 0.6 + 2 * math.exp(-0.7 * x), 8), 20) == pytest.approx(0.6, abs=1e-3)


def test_a_curve_saturating_far_below_the_best_stops():
    assessor = with_completed(0.9)
    assert assessor.assess_trial("low", curve(saturating_at_half, 6)) is Bad


def test_a_curve_heading_above_the_best_continues_though_it_is_below_it_now():
    assessor = with_completed(0.9)
    history = curve(heading_above_best, 6)
    assert history[-1] < 0.9 * 0.95
    assert assessor.assess_trial("rising", history) is Good


def test_threshold_sets_how_far_below_the_best_a_prediction_may_be():
    assert with_completed(0.9, threshold=0.5).assess_trial("low", curve(saturating_at_half, 6)) is Good
    assert with_completed(0.52, threshold=0.95).assess_trial("low", curve(saturating_at_half, 6)) is Good
    assert with_completed(0.56, threshold=0.95).assess_trial("low", curve(saturating_at_half, 6)) is Bad


def test_without_a_completed_trial_every_trial_continues():
    assessor = CurvefittingAssessor()
    assert assessor.assess_trial("low", curve(saturating_at_half, 10)) is Good
    assessor.assess_trial("failed", [0.9] * 6)
    assessor.trial_end("failed", success=False)
    assert assessor.assess_trial("low", curve(saturating_at_half, 11)) is Good


def test_the_best_completed_trial_is_the_bar():
    assessor = CurvefittingAssessor()
    for trial, final in (("a", 0.3), ("b", 0.9), ("c", 0.4)):
        assessor.assess_trial(trial, [0.1, final])
        assessor.trial_end(trial, success=True)
    assert assessor.assess_trial("low", curve(saturating_at_half, 6)) is Bad


def test_no_judgment_before_start_step():
    assessor = with_completed(0.9, start_step=8)
    history = curve(saturating_at_half, 8)
    assert [assessor.assess_trial("low", history[:step]) for step in range(1, 9)] == [Good] * 7 + [Bad]


def test_judgments_are_gap_steps_apart():
    assessor = with_completed(0.9, start_step=6, gap=3)
    history = curve(saturating_at_half, 13)
    decisions = [assessor.assess_trial("low", history[:step]) for step in range(6, 14)]
    assert decisions == [Bad, Good, Good, Bad, Good, Good, Bad, Good]  # judged at steps 6, 9, 12


def test_a_history_that_skipped_steps_is_judged_when_the_gap_has_passed():
    assessor = with_completed(0.9, start_step=6, gap=3)
    history = curve(saturating_at_half, 12)
    assert assessor.assess_trial("low", history[:6]) is Bad
    assert assessor.assess_trial("low", history[:10]) is Bad


def test_minimize_stops_a_loss_saturating_far_above_the_best():
    assessor = CurvefittingAssessor(optimize_mode="minimize")
    assessor.assess_trial("done", [0.5, 0.2])
    assessor.trial_end("done", success=True)
    high = curve(lambda x: 0.6 + 2 * math.exp(-0.7 * x), 6)
    falling = curve(lambda x: 0.05 + 1.2 * x**-0.8, 6)  # 0.32 at step 6, 0.14 at step 20
    assert assessor.assess_trial("high", high) is Bad
    assert falling[-1] > 0.2 * 1.05
    assert assessor.assess_trial("falling", falling) is Good


def test_negative_results_are_compared_with_a_margin_below_the_best():
    # best -50, threshold 0.95: the bar is -52.5 (NNI's threshold * best would be -47.5)
    low = [-80.0 - 40.0 * math.exp(-0.5 * x) for x in range(1, 7)]
    near = [-51.0 - 40.0 * math.exp(-0.5 * x) for x in range(1, 7)]
    assert with_completed(-50.0).assess_trial("low", low) is Bad
    assert with_completed(-50.0).assess_trial("near", near) is Good


@pytest.mark.parametrize("history", [
    [0.5] * 6,
    [0.0] * 6,
    [-3.0] * 6,
    [1e-9, 2e-9, 1e-9, 3e-9, 2e-9, 1e-9],
    [1e9, 1e9, 1e9, 1e9, 1e9, 1e9 + 1],
    [0.3, -0.3, 0.3, -0.3, 0.3, -0.3],
    [1.0, 2.0, 4.0, 8.0, 16.0, 32.0],
    list(0.3 + 0.05 * np.random.default_rng(0).standard_normal(30)),
])
def test_flat_noisy_and_odd_curves_give_a_finite_prediction(history):
    predicted = predict(history, 20)
    assert predicted is not None and math.isfinite(predicted)


def test_flat_and_noisy_curves_far_below_the_best_stop():
    noisy = list(0.3 + 0.05 * np.random.default_rng(0).standard_normal(10))
    assert with_completed(0.9).assess_trial("flat", [0.5] * 6) is Bad
    assert with_completed(0.9).assess_trial("noisy", noisy) is Bad
    assert with_completed(0.9).assess_trial("flat high", [0.95] * 6) is Good


def test_short_curves_are_never_judged():
    assessor = with_completed(0.9, start_step=0)
    for step in range(0, 5):
        assert assessor.assess_trial("short", [0.0] * step) is Good
    assert predict([0.1, 0.2, 0.3, 0.4], 20) is None


def test_non_finite_results_are_left_out_of_the_fit():
    history = curve(saturating_at_half, 7)
    history[3] = float("nan")
    assert predict(history, 20) == pytest.approx(0.5, abs=1e-3)
    assert with_completed(0.9).assess_trial("nan", history) is Bad
    assert with_completed(0.9).assess_trial("all nan", [float("nan")] * 7) is Good


def test_dict_metrics_use_their_default_entry():
    assessor = CurvefittingAssessor()
    assessor.assess_trial("done", [{"default": 0.9, "loss": 1.0}])
    assessor.trial_end("done", success=True)
    history = [{"default": value, "loss": 0.0} for value in curve(saturating_at_half, 6)]
    assert assessor.assess_trial("low", history) is Bad


def test_the_same_history_gives_the_same_decision():
    history = list(0.5 + 0.1 * np.random.default_rng(3).standard_normal(12))
    assert predict(history, 20) == predict(list(history), 20)


def test_created_by_name_with_nni_class_args():
    assessor = create_assessor("curvefitting", {"epoch_num": 30, "start_step": 4, "threshold": 0.9, "gap": 2,
                                                "optimize_mode": "maximize"})
    assert isinstance(assessor, CurvefittingAssessor)
    assert (assessor.epoch_num, assessor.start_step, assessor.threshold, assessor.gap) == (30, 4, 0.9, 2)


@pytest.mark.parametrize("args, match", [
    ({"epoch_num": 0}, "epoch_num.*0"),
    ({"start_step": -1}, "start_step.*-1"),
    ({"gap": 0}, "gap.*0"),
    ({"threshold": -0.5}, "threshold.*-0.5"),
    ({"threshold": "high"}, "threshold.*'high'"),
    ({"optimize_mode": "up"}, "optimize_mode.*'up'"),
])
def test_bad_class_args_name_the_argument_and_value(args, match):
    with pytest.raises(AlgorithmError, match=match):
        create_assessor("Curvefitting", args)
