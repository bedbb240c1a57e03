from __future__ import annotations

import pytest

from expmgr.algorithms import AlgorithmError, create_assessor
from expmgr.algorithms.asha_scheduler import AshaScheduler, milestones
from expmgr.algorithms.assessor import AssessResult

Good, Bad = AssessResult.Good, AssessResult.Bad


class Trials:
    """Feeds each trial its results one step at a time, as the manager does."""

    def __init__(self, asha: AshaScheduler, sign: float = 1.0) -> None:
        self.asha = asha
        self.sign = sign
        self.history: dict[str, list] = {}

    def report(self, trial: str, value: float) -> AssessResult:
        history = self.history.setdefault(trial, [])
        history.append(self.sign * value)
        return self.asha.assess_trial(trial, list(history))


# rf=2, grace 1, max_t 8: rungs at steps 1, 2 and 4 (8 is not below max_t). The cutoff at
# a rung is the median (the 50% quantile, linear interpolation) of the values recorded
# there before the arriving trial, stopped trials' included; strictly below it stops.
HAND_EXAMPLE = [
    # trial, value, decision   step  values at the rung before it  cutoff
    ("a", 4.0, Good),        # 1     []                            none: the first continues
    ("b", 8.0, Good),        # 1     [4]                           4
    ("c", 5.0, Bad),         # 1     [4, 8]                        6
    ("d", 6.0, Good),        # 1     [4, 8, 5]                     5
    ("a", 9.0, Good),        # 2     []                            none
    ("b", 7.0, Bad),         # 2     [9]                           9
    ("e", 5.5, Good),        # 1     [4, 8, 5, 6]                  5.5: a tie continues
    ("d", 10.0, Good),       # 2     [9, 7]                        8
    ("e", 8.5, Bad),         # 2     [9, 7, 10]                    9
    ("f", 5.0, Bad),         # 1     [4, 8, 5, 6, 5.5]             5.5
    ("g", 8.0, Good),        # 1     [4, 8, 5, 6, 5.5, 5]          5.25
    ("a", 0.0, Good),        # 3     no rung
    ("a", 3.0, Good),        # 4     []                            none
    ("d", 1.0, Good),        # 3     no rung
    ("d", 2.0, Bad),         # 4     [3]                           3
    ("a", 0.0, Good),        # 5     no rung
    ("a", 0.0, Good),        # 6     no rung
    ("a", 0.0, Good),        # 7     no rung
    ("a", 0.0, Good),        # 8     max_t: no rung
]


def test_hand_computed_example_matches_step_by_step():
    trials = Trials(AshaScheduler("maximize", grace_period=1, reduction_factor=2, max_t=8))
    decisions = [(trial, value, trials.report(trial, value)) for trial, value, _ in HAND_EXAMPLE]
    assert decisions == HAND_EXAMPLE


def test_minimize_mirrors_maximize():
    trials = Trials(AshaScheduler("minimize", grace_period=1, reduction_factor=2, max_t=8), sign=-1.0)
    decisions = [(trial, value, trials.report(trial, value)) for trial, value, _ in HAND_EXAMPLE]
    assert decisions == HAND_EXAMPLE


def test_dict_metrics_use_their_default_entry():
    asha = AshaScheduler(grace_period=1, reduction_factor=2, max_t=8)
    assert asha.assess_trial("a", [{"default": 4.0, "loss": 9.0}]) is Good
    assert asha.assess_trial("b", [{"default": 8.0, "loss": 0.0}]) is Good
    assert asha.assess_trial("c", [{"default": 5.0}]) is Bad


def test_with_reduction_factor_4_only_the_top_quarter_continues():
    asha = AshaScheduler(grace_period=1, reduction_factor=4, max_t=100)
    for trial, value in enumerate([1.0, 2.0, 3.0, 4.0, 5.0]):  # each beats everything before it
        assert asha.assess_trial(str(trial), [value]) is Good
    # recorded 1..5: the 75% quantile is 4
    assert asha.assess_trial("x", [3.9]) is Bad
    assert asha.assess_trial("y", [4.0]) is Good


def test_rungs_are_below_max_t_and_later_steps_are_never_judged():
    assert milestones(1, 4, 100) == [1, 4, 16, 64]
    assert milestones(1, 4, 64) == [1, 4, 16]
    assert milestones(3, 2, 20) == [3, 6, 12]
    asha = AshaScheduler(grace_period=1, reduction_factor=2, max_t=4)  # rungs 1 and 2
    assert asha.assess_trial("a", [5.0]) is Good
    assert asha.assess_trial("a", [5.0, 5.0]) is Good
    assert asha.assess_trial("b", [5.0]) is Good
    assert asha.assess_trial("b", [5.0, 5.0]) is Good
    for step in range(3, 10):  # past the last rung, a much worse "b" runs on
        assert asha.assess_trial("b", [5.0, 5.0] + [0.0] * (step - 2)) is Good


def test_grace_period_delays_the_first_rung():
    asha = AshaScheduler(grace_period=3, reduction_factor=2, max_t=20)
    assert asha.assess_trial("a", [9.0, 9.0, 9.0]) is Good
    assert asha.assess_trial("b", [0.0]) is Good
    assert asha.assess_trial("b", [0.0, 0.0]) is Good
    assert asha.assess_trial("b", [0.0, 0.0, 0.0]) is Bad


def test_each_rung_is_judged_once_on_the_value_at_its_step():
    asha = AshaScheduler(grace_period=1, reduction_factor=2, max_t=8)
    assert asha.assess_trial("a", [5.0]) is Good
    assert asha.assess_trial("b", [6.0]) is Good
    # a history that skipped step 1: "c" is judged on its step-1 value, 9 >= 5.5
    assert asha.assess_trial("c", [9.0, 0.0]) is Good  # and first at rung 2
    assert asha.assess_trial("c", [9.0, 0.0]) is Good  # asked again: nothing new to judge


def test_decisions_are_immediate_and_never_wait_for_a_rung_to_fill():
    asha = AshaScheduler(grace_period=1, reduction_factor=4, max_t=100)
    # one trial alone goes through every rung
    assert all(asha.assess_trial("solo", [1.0] * step) is Good for step in range(1, 100))


def test_brackets_are_dealt_in_turn_and_start_later():
    asha = AshaScheduler(grace_period=1, reduction_factor=2, max_t=8, brackets=2)
    # a, c -> bracket 0 (rungs 1, 2, 4); b, d -> bracket 1 (rungs 2, 4)
    assert asha.assess_trial("a", [9.0]) is Good
    assert asha.assess_trial("b", [1.0]) is Good      # bracket 1 has no rung at step 1
    assert asha.assess_trial("c", [0.0]) is Bad       # below a at rung 1 of bracket 0
    assert asha.assess_trial("d", [0.0]) is Good
    assert asha.assess_trial("b", [1.0, 1.0]) is Good  # first at rung 2 of bracket 1
    assert asha.assess_trial("d", [0.0, 0.5]) is Bad   # below b's 1
    assert asha.assess_trial("a", [9.0, 0.1]) is Good  # bracket 0's rung 2 is its own


def test_a_bracket_without_rungs_never_stops_a_trial():
    asha = AshaScheduler(grace_period=1, reduction_factor=4, max_t=8, brackets=3)  # bracket 2 starts at 16
    asha.assess_trial("a", [9.0])
    asha.assess_trial("b", [9.0] * 4)
    assert all(asha.assess_trial("c", [0.0] * step) is Good for step in range(1, 12))


def test_an_ended_trial_is_forgotten_but_its_rung_values_stay():
    asha = AshaScheduler(grace_period=1, reduction_factor=2, max_t=8)
    assert asha.assess_trial("a", [5.0]) is Good
    asha.trial_end("a", success=False)
    assert asha._running == {}
    assert asha.assess_trial("b", [4.0]) is Bad


def test_a_nan_at_a_rung_stops_the_trial_and_is_not_recorded():
    asha = AshaScheduler(grace_period=1, reduction_factor=2, max_t=8)
    assert asha.assess_trial("nan", [float("nan")]) is Bad
    assert asha.assess_trial("a", [0.0]) is Good  # still the first recorded value
    assert asha.assess_trial("b", [0.0]) is Good


def test_created_by_name_with_its_class_args():
    asha = create_assessor("asha", {"optimize_mode": "minimize", "grace_period": 2, "reduction_factor": 3,
                                    "max_t": 50, "brackets": 2})
    assert isinstance(asha, AshaScheduler)
    assert (asha.grace_period, asha.reduction_factor, asha.max_t, asha.brackets) == (2, 3, 50, 2)


@pytest.mark.parametrize("args, match", [
    ({"reduction_factor": 1}, "reduction_factor.*1"),
    ({"grace_period": 0}, "grace_period.*0"),
    ({"max_t": 2.5}, "max_t.*2.5"),
    ({"brackets": 0}, "brackets.*0"),
    ({"grace_period": 10, "max_t": 10}, "grace_period.*max_t"),
    ({"optimize_mode": "up"}, "optimize_mode.*'up'"),
])
def test_bad_class_args_name_the_argument_and_value(args, match):
    with pytest.raises(AlgorithmError, match=match):
        create_assessor("ASHA", args)
