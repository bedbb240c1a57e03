from __future__ import annotations

import json

import pytest

from expmgr.algorithms import create_tuner
from expmgr.algorithms.hyperband_tuner import TRIAL_BUDGET, BracketSchedule, HyperbandTuner
from expmgr.algorithms.tuner import AlgorithmError, NoMoreTrialError, NoTrialYetError

from tests.helpers.spaces import EVERY_TYPE, NESTED, PLANE, assert_fits_every_type, assert_fits_nested, suggested


# R=27, eta=3: s_max=3; bracket s starts ceil(4 / (s + 1) * 3**s) configurations at 27 / 3**s
R27_BRACKETS = [
    [(27, 1), (9, 3), (3, 9), (1, 27)],
    [(12, 3), (4, 9), (1, 27)],
    [(6, 9), (2, 27)],
    [(4, 27)],
]


def height(params: dict) -> float:
    """Largest (0) at (3, -1)."""
    return -((params["x"] - 3) ** 2 + (params["y"] + 1) ** 2)


def config_of(params: dict) -> dict:
    return {k: v for k, v in params.items() if k != TRIAL_BUDGET}


def key(params: dict) -> str:
    return json.dumps(config_of(params), sort_keys=True)


def runs_of_budgets(handed: list[dict]) -> list[tuple[int, int]]:
    """(count, budget) for each run of equal consecutive budgets."""
    runs: list[list] = []
    for params in handed:
        if runs and runs[-1][1] == params[TRIAL_BUDGET]:
            runs[-1][0] += 1
        else:
            runs.append([1, params[TRIAL_BUDGET]])
    return [tuple(r) for r in runs]


def test_bracket_sizes_and_budgets_are_the_papers_for_r27_eta3():
    schedule = BracketSchedule.between(1, 27, 3, whole_budgets=True)
    assert schedule.s_max == 3
    assert [schedule.size(s) for s in (3, 2, 1, 0)] == [27, 12, 6, 4]
    assert [[schedule.budget(s, i) for i in range(s + 1)] for s in (3, 2, 1, 0)] == [
        [1, 3, 9, 27], [3, 9, 27], [9, 27], [27]]


def test_default_r60_budgets_are_rounded_down_as_in_nni():
    schedule = HyperbandTuner().schedule
    assert schedule.s_max == 3
    assert [schedule.budget(3, i) for i in range(4)] == [2, 6, 20, 60]
    assert [schedule.budget(2, i) for i in range(3)] == [6, 20, 60]


def test_serial_run_goes_through_every_bracket_by_successive_halving_then_starts_again():
    handed = suggested(HyperbandTuner(R=27, eta=3, exec_mode="serial", seed=0), PLANE, height, 70)
    expected = [run_ for bracket in R27_BRACKETS for run_ in bracket]
    # the last rung of bracket 1 (2 at 27) and bracket 0 (4 at 27) run back to back
    expected = expected[:-2] + [(2 + 4, 27)] + [(1, 1)]
    assert runs_of_budgets(handed) == expected
    assert all(type(p[TRIAL_BUDGET]) is int for p in handed)
    new_in_first_rung = {key(p) for p in handed[:27]}
    assert len(new_in_first_rung) == 27
    assert {key(p) for p in handed[27:36]} <= new_in_first_rung  # rung 1 reruns rung 0's configurations


@pytest.mark.parametrize("mode, best", [("maximize", max), ("minimize", min)])
def test_a_rung_promotes_its_best_configurations_with_eta_times_the_budget(mode, best):
    tuner = HyperbandTuner(mode, R=27, eta=3, exec_mode="serial", seed=1)
    tuner.update_search_space(PLANE)
    rung0 = [tuner.generate_parameters(i) for i in range(27)]
    for i, params in enumerate(rung0):
        tuner.receive_trial_result(i, params, {"default": height(params)})
        tuner.trial_end(i, success=True)
    rung1 = [tuner.generate_parameters(100 + i) for i in range(9)]
    ranked = sorted(rung0, key=height, reverse=best is max)
    assert [config_of(p) for p in rung1] == [config_of(p) for p in ranked[:9]]
    assert {p[TRIAL_BUDGET] for p in rung1} == {3}


def test_a_promoted_trial_starts_from_the_checkpoint_of_the_trial_it_was_promoted_from():
    tuner = HyperbandTuner(R=9, eta=3, exec_mode="serial", seed=1)
    tuner.update_search_space(PLANE)
    rung0 = [tuner.generate_parameters(i) for i in range(9)]
    assert all(tuner.checkpoint_source(i) is None for i in range(9))
    for i, params in enumerate(rung0):
        tuner.receive_trial_result(i, params, height(params))
        tuner.trial_end(i, success=True)
    rung1 = [tuner.generate_parameters(100 + i) for i in range(3)]
    sources = [tuner.checkpoint_source(100 + i) for i in range(3)]
    assert [config_of(rung0[s]) for s in sources] == [config_of(p) for p in rung1]
    for i, params in enumerate(rung1):
        tuner.receive_trial_result(100 + i, params, height(params))
    top = tuner.generate_parameters(200)
    assert top[TRIAL_BUDGET] == 9 and rung1[tuner.checkpoint_source(200) - 100] == {**top, TRIAL_BUDGET: 3}


def test_serial_mode_waits_for_the_running_rung():
    tuner = HyperbandTuner(R=27, eta=3, exec_mode="serial", seed=0)
    tuner.update_search_space(PLANE)
    rung0 = [tuner.generate_parameters(i) for i in range(27)]
    for i in range(26):
        tuner.receive_trial_result(i, rung0[i], height(rung0[i]))
        tuner.trial_end(i, success=True)
        with pytest.raises(NoTrialYetError):
            tuner.generate_parameters(100)
    tuner.receive_trial_result(26, rung0[26], height(rung0[26]))
    # the rung is decided on the last final result, before that trial's end
    assert tuner.generate_parameters(100)[TRIAL_BUDGET] == 3


def test_parallelism_mode_starts_the_next_bracket_while_one_waits_and_promotions_come_first():
    tuner = HyperbandTuner(R=27, eta=3, exec_mode="parallelism", seed=0)
    tuner.update_search_space(PLANE)
    rung0 = [tuner.generate_parameters(i) for i in range(27)]
    second = [tuner.generate_parameters(100 + i) for i in range(5)]
    assert [p[TRIAL_BUDGET] for p in second] == [3] * 5  # bracket s=2's new configurations
    assert not {key(p) for p in second} & {key(p) for p in rung0}
    for i, params in enumerate(rung0):
        tuner.receive_trial_result(i, params, height(params))
        tuner.trial_end(i, success=True)
    promoted = tuner.generate_parameters(200)
    assert promoted[TRIAL_BUDGET] == 3 and key(promoted) in {key(p) for p in rung0}
    rest = [tuner.generate_parameters(201 + i) for i in range(8 + 7)]
    assert all(key(p) in {key(q) for q in rung0} for p in rest[:8])  # the other 8 promotions
    assert not any(key(p) in {key(q) for q in rung0} for p in rest[8:])  # then bracket s=2 again


def test_trials_that_fail_rank_last_and_are_not_promoted():
    tuner = HyperbandTuner(R=27, eta=3, exec_mode="serial", seed=2)
    tuner.update_search_space(PLANE)
    rung0 = [tuner.generate_parameters(i) for i in range(27)]
    for i, params in enumerate(rung0):
        if i < 25:
            tuner.trial_end(i, success=False)  # no result
        else:
            tuner.receive_trial_result(i, params, height(params))
            tuner.trial_end(i, success=True)
    rung1 = [tuner.generate_parameters(100), tuner.generate_parameters(101)]
    assert sorted(key(p) for p in rung1) == sorted(key(p) for p in rung0[25:])
    with pytest.raises(NoTrialYetError):  # the rung has 2, not 9
        tuner.generate_parameters(102)


def test_nan_results_count_as_no_result():
    tuner = HyperbandTuner(R=9, eta=3, exec_mode="serial", seed=2)
    tuner.update_search_space(PLANE)
    rung0 = [tuner.generate_parameters(i) for i in range(9)]
    for i, params in enumerate(rung0):
        tuner.receive_trial_result(i, params, float("nan") if i != 4 else 1.0)
        tuner.trial_end(i, success=True)
    assert config_of(tuner.generate_parameters(100)) == config_of(rung0[4])


def test_a_bracket_whose_trials_all_fail_ends_and_the_next_one_starts():
    tuner = HyperbandTuner(R=27, eta=3, exec_mode="serial", seed=3)
    tuner.update_search_space(PLANE)
    for i in range(27):
        tuner.generate_parameters(i)
        tuner.trial_end(i, success=False)
    assert [tuner.generate_parameters(100 + i)[TRIAL_BUDGET] for i in range(12)] == [3] * 12


@pytest.mark.parametrize("space, check", [(EVERY_TYPE, assert_fits_every_type), (NESTED, assert_fits_nested)])
def test_values_stay_in_the_space_with_an_integer_budget_beside_them(space, check):
    handed = suggested(HyperbandTuner(R=9, eta=3, seed=4), space, lambda p: len(json.dumps(p)), 60)
    for params in handed:
        check(config_of(params))
        assert params[TRIAL_BUDGET] in (1, 3, 9)


def test_same_seed_gives_the_same_sequence_and_different_seeds_differ():
    def sequence(seed: int) -> list[dict]:
        return suggested(HyperbandTuner(R=27, eta=3, seed=seed), PLANE, height, 50)

    assert sequence(7) == sequence(7)
    assert sequence(7) != sequence(8)


def test_imported_points_are_not_drawn_again_and_a_used_up_space_ends_the_search():
    space = {"c": {"_type": "choice", "_value": list(range(10))}}
    tuner = HyperbandTuner(R=3, eta=3, exec_mode="serial", seed=0)
    tuner.update_search_space(space)
    tuner.import_data([
        {"parameter": {"c": 0, TRIAL_BUDGET: 3}, "value": 1.0},
        {"parameter": {"c": 1}, "value": None},
        {"parameter": {"c": 2, TRIAL_BUDGET: 1}, "value": {"default": 0.5}},
        {"parameter": "not a dict", "value": 1.0},
    ])
    seen = []
    for parameter_id in range(100):
        try:
            params = tuner.generate_parameters(parameter_id)
        except NoMoreTrialError:
            break
        seen.append(params)
        tuner.receive_trial_result(parameter_id, params, float(params["c"]))
        tuner.trial_end(parameter_id, success=True)
    assert {p["c"] for p in seen} == set(range(3, 10))
    # round 1: 3 new at 1, the best of them at 3, 2 new at 3; round 2: the last 2 at 1, the best at 3
    assert [p[TRIAL_BUDGET] for p in seen] == [1, 1, 1, 3, 3, 3, 1, 1, 3]
    assert len({p["c"] for p in seen if p not in (seen[3], seen[8])}) == 7  # the others are new, once each


def test_a_used_up_space_waits_while_trials_run():
    space = {"c": {"_type": "choice", "_value": ["a", "b"]}}
    tuner = HyperbandTuner(R=3, eta=3, exec_mode="parallelism", seed=0)
    tuner.update_search_space(space)
    first = [tuner.generate_parameters(0), tuner.generate_parameters(1)]
    assert sorted(p["c"] for p in first) == ["a", "b"]
    with pytest.raises(NoTrialYetError):
        tuner.generate_parameters(2)
    for i, params in enumerate(first):
        tuner.receive_trial_result(i, params, 1.0 if params["c"] == "b" else 0.0)
        tuner.trial_end(i, success=True)
    assert tuner.generate_parameters(3) == {"c": "b", TRIAL_BUDGET: 3}
    tuner.receive_trial_result(3, {"c": "b", TRIAL_BUDGET: 3}, 1.0)
    with pytest.raises(NoMoreTrialError):
        tuner.generate_parameters(4)


def test_results_of_unknown_parameter_ids_mark_their_configuration_as_tried():
    space = {"c": {"_type": "choice", "_value": ["a", "b"]}}
    tuner = HyperbandTuner(R=1, eta=3, seed=0)
    tuner.update_search_space(space)
    tuner.receive_trial_result(999, {"c": "a", TRIAL_BUDGET: 1}, 0.3)
    tuner.trial_end(999, success=True)
    assert tuner.generate_parameters(0) == {"c": "b", TRIAL_BUDGET: 1}


def test_created_by_name_with_nni_class_args():
    tuner = create_tuner("hyperband", {"optimize_mode": "minimize", "R": 81, "eta": 3, "exec_mode": "serial"})
    assert isinstance(tuner, HyperbandTuner)
    assert tuner.schedule.s_max == 4 and tuner.schedule.size(4) == 81


@pytest.mark.parametrize("args, named", [
    ({"R": 0}, "R"), ({"eta": 1}, "eta"), ({"exec_mode": "fast"}, "exec_mode"),
    ({"optimize_mode": "up"}, "optimize_mode"), ({"seed": -1}, "seed"), ({"R": 2.5}, "R"),
])
def test_bad_class_args_are_algorithm_errors_naming_the_argument(args, named):
    with pytest.raises(AlgorithmError, match=f"{named}.*{args[named]!r}"):
        create_tuner("Hyperband", args)


def test_a_search_space_parameter_named_trial_budget_is_refused():
    with pytest.raises(AlgorithmError, match="TRIAL_BUDGET"):
        HyperbandTuner().update_search_space({TRIAL_BUDGET: {"_type": "choice", "_value": [1]}})
