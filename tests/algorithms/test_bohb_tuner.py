from __future__ import annotations

import json
import statistics

import pytest

from expmgr.algorithms import create_tuner
from expmgr.algorithms.bohb_tuner import BohbTuner
from expmgr.algorithms.hyperband_tuner import TRIAL_BUDGET
from expmgr.algorithms.random_tuner import RandomTuner
from expmgr.algorithms.tuner import AlgorithmError, NoMoreTrialError, NoTrialYetError

from tests.helpers.spaces import EVERY_TYPE, NESTED, PLANE, assert_fits_every_type, assert_fits_nested, suggested

SEEDS = range(5)


def height(params: dict) -> float:
    """Largest (0) at (3, -1), whatever the budget."""
    return -((params["x"] - 3) ** 2 + (params["y"] + 1) ** 2)


def config_of(params: dict) -> dict:
    return {k: v for k, v in params.items() if k != TRIAL_BUDGET}


def new_configs(handed: list[dict]) -> list[dict]:
    """Each configuration once, in the order it was first handed out (promotions dropped)."""
    seen, result = set(), []
    for params in handed:
        key = json.dumps(config_of(params), sort_keys=True)
        if key not in seen:
            seen.add(key)
            result.append(config_of(params))
    return result


def test_hyperband_schedule_from_min_to_max_budget_one_bracket_at_a_time():
    handed = suggested(BohbTuner(min_budget=1, max_budget=9, eta=3, seed=0), PLANE, height, 23)
    budgets = [p[TRIAL_BUDGET] for p in handed]
    # s=2: 9 at 1, 3 at 3, 1 at 9; s=1: 5 at 3, 1 at 9; s=0: 3 at 9; then s=2 again
    assert budgets == [1] * 9 + [3] * 3 + [9] + [3] * 5 + [9] + [9] * 3 + [1]
    assert all(type(b) is int for b in budgets)


def test_default_budgets_and_fractional_budgets():
    assert [p[TRIAL_BUDGET] for p in suggested(BohbTuner(seed=0), PLANE, height, 7)] == [1, 1, 1, 3, 3, 3, 1]
    tuner = BohbTuner(min_budget=1, max_budget=10, eta=3)
    assert [tuner.schedule.budget(2, i) for i in range(3)] == pytest.approx([10 / 9, 10 / 3, 10])
    assert type(tuner.schedule.budget(2, 2)) is int


@pytest.mark.parametrize("min_points, model_from", [(None, 5), (6, 8)])
def test_the_model_replaces_random_sampling_once_a_budget_has_min_points_plus_two_results(min_points, model_from):
    # PLANE has 2 parameters, so min_points_in_model defaults to 3
    def sequence(random_fraction: float) -> list[dict]:
        tuner = BohbTuner(min_budget=1, max_budget=9, min_points_in_model=min_points,
                          random_fraction=random_fraction, seed=3)
        return suggested(tuner, PLANE, height, 9)

    model, random = sequence(0.0), sequence(1.0)
    assert model[:model_from] == random[:model_from]
    assert model[model_from] != random[model_from]


def test_bohb_samples_better_configurations_than_random_search_on_a_smooth_objective():
    bohb, random = [], []
    for seed in SEEDS:
        configs = new_configs(suggested(BohbTuner(min_budget=1, max_budget=9, seed=seed), PLANE, height, 66))
        bohb.extend(height(c) for c in configs[15:])
        random.extend(height(p) for p in suggested(RandomTuner(seed=seed), PLANE, height, len(configs))[15:])
    assert statistics.median(bohb) > 0.5 * statistics.median(random)  # heights are <= 0
    near = sum(h > -4 for h in bohb) / len(bohb)
    assert near > 2 * sum(h > -4 for h in random) / len(random)


def test_the_model_uses_the_largest_budget_with_enough_results():
    def suggestions(results_at_9: int) -> list[dict]:
        tuner = BohbTuner(min_budget=1, max_budget=9, random_fraction=0, seed=0)
        tuner.update_search_space(PLANE)
        grid = [{"x": -10 + i, "y": 0.0} for i in range(21)]
        tuner.import_data(
            [{"parameter": {**p, TRIAL_BUDGET: 1}, "value": -(p["x"] + 8) ** 2} for p in grid]
            + [{"parameter": {**p, TRIAL_BUDGET: 9}, "value": -(p["x"] - 8) ** 2} for p in grid[::5][:results_at_9]]
        )
        return [config_of(tuner.generate_parameters(i)) for i in range(9)]

    assert statistics.median(p["x"] for p in suggestions(5)) > 4  # budget 9 says: large x
    assert statistics.median(p["x"] for p in suggestions(4)) < -4  # 4 < 3 + 2 results: budget 1 decides


@pytest.mark.parametrize("space, check", [(EVERY_TYPE, assert_fits_every_type), (NESTED, assert_fits_nested)])
def test_values_stay_in_the_space_when_drawn_from_the_model(space, check):
    def objective(params: dict) -> float:
        return -len(json.dumps(params))

    def sequence(random_fraction: float) -> list[dict]:
        tuner = BohbTuner(min_budget=1, max_budget=9, min_points_in_model=3, random_fraction=random_fraction, seed=5)
        return suggested(tuner, space, objective, 45)

    handed = sequence(0.0)
    assert handed != sequence(1.0)  # the model was used
    for params in handed:
        check(config_of(params))
        assert params[TRIAL_BUDGET] in (1, 3, 9)


def test_same_seed_gives_the_same_sequence_and_different_seeds_differ():
    def sequence(seed: int) -> list[dict]:
        return suggested(BohbTuner(min_budget=1, max_budget=9, seed=seed), PLANE, height, 40)

    assert sequence(4) == sequence(4)
    assert sequence(4) != sequence(5)


def test_waits_for_the_running_rung_then_promotes_the_best():
    tuner = BohbTuner(seed=0)  # s=1: 3 at budget 1, the best at 3
    tuner.update_search_space(PLANE)
    rung0 = [tuner.generate_parameters(i) for i in range(3)]
    with pytest.raises(NoTrialYetError):
        tuner.generate_parameters(3)
    for i, params in enumerate(rung0):
        tuner.receive_trial_result(i, params, height(params))
        tuner.trial_end(i, success=True)
    promoted = tuner.generate_parameters(3)
    assert config_of(promoted) == config_of(max(rung0, key=height)) and promoted[TRIAL_BUDGET] == 3


def test_imported_points_are_not_suggested_again_and_a_used_up_space_ends_the_search():
    space = {"c": {"_type": "choice", "_value": list(range(6))}}
    tuner = BohbTuner(min_budget=1, max_budget=1, min_points_in_model=1, random_fraction=0, seed=0)
    tuner.update_search_space(space)
    tuner.import_data([{"parameter": {"c": c, TRIAL_BUDGET: 1}, "value": float(c)} for c in range(4)])
    seen = []
    with pytest.raises(NoMoreTrialError):
        for parameter_id in range(10):
            params = tuner.generate_parameters(parameter_id)
            seen.append(params["c"])
            tuner.receive_trial_result(parameter_id, params, float(params["c"]))
            tuner.trial_end(parameter_id, success=True)
    assert sorted(seen) == [4, 5]


def test_created_by_name_with_nni_class_args():
    tuner = create_tuner("bohb", {"optimize_mode": "minimize", "min_budget": 1, "max_budget": 27, "eta": 3,
                                  "min_points_in_model": 7, "top_n_percent": 15, "num_samples": 64,
                                  "random_fraction": 0.33, "bandwidth_factor": 3, "min_bandwidth": 0.001})
    assert isinstance(tuner, BohbTuner) and tuner.schedule.s_max == 3


@pytest.mark.parametrize("args, named", [
    ({"min_budget": 0}, "min_budget"), ({"max_budget": 0.5}, "max_budget"), ({"eta": 1}, "eta"),
    ({"min_points_in_model": 0}, "min_points_in_model"), ({"top_n_percent": 100}, "top_n_percent"),
    ({"num_samples": 0}, "num_samples"), ({"random_fraction": 1.5}, "random_fraction"),
    ({"bandwidth_factor": 0}, "bandwidth_factor"), ({"min_bandwidth": -1}, "min_bandwidth"),
    ({"optimize_mode": "up"}, "optimize_mode"),
])
def test_bad_class_args_are_algorithm_errors_naming_the_argument(args, named):
    with pytest.raises(AlgorithmError, match=f"{named}.*{args[named]!r}"):
        create_tuner("BOHB", args)
