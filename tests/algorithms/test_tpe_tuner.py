from __future__ import annotations

import statistics
from collections.abc import Callable

import numpy as np
import pytest

from expmgr.algorithms.random_tuner import RandomTuner
from expmgr.algorithms.search_space import parse_search_space
from expmgr.algorithms.tpe_parzen import TpeResult as _Result, _bandwidths, _NumericKernels, split_history as _split_history
from expmgr.algorithms.tpe_tuner import TpeTuner
from expmgr.algorithms.tuner import AlgorithmError, NoMoreTrialError, Tuner

from tests.helpers.spaces import EVERY_TYPE, NESTED, PLANE, assert_fits_every_type, assert_fits_nested, bowl, run

SEEDS = range(5)


def run_continued(tuner: Tuner, objective: Callable[[dict], float], trials: int) -> list[tuple[dict, float]]:
    """Like ``run`` for a tuner that already has its search space (and maybe imported data)."""
    history = []
    for parameter_id in range(1000, 1000 + trials):
        params = tuner.generate_parameters(parameter_id)
        value = objective(params)
        tuner.receive_trial_result(parameter_id, params, value)
        tuner.trial_end(parameter_id, success=True)
        history.append((params, value))
    return history


def run_more(tuner: Tuner, trials: int, objective: Callable[[dict], float]) -> list[dict]:
    return [params for params, _ in run_continued(tuner, objective, trials)]


def metrics(history: list[tuple[dict, float]]) -> list[float]:
    return [value for _, value in history]


def test_tpe_beats_random_search_on_a_quadratic_bowl():
    tpe = [metrics(run(TpeTuner(seed=s), PLANE, bowl, 60)) for s in SEEDS]
    rnd = [metrics(run(RandomTuner(seed=s), PLANE, bowl, 60)) for s in SEEDS]
    # the best of 60 trials, averaged over seeds
    assert statistics.mean(min(m) for m in tpe) < statistics.mean(min(m) for m in rnd)
    # after the 20 random startup trials, TPE samples where the bowl is low
    tpe_after_startup = statistics.median(v for m in tpe for v in m[20:])
    rnd_after_startup = statistics.median(v for m in rnd for v in m[20:])
    assert tpe_after_startup < 0.7 * rnd_after_startup


def test_maximize_on_the_negated_objective_makes_the_same_suggestions_as_minimize():
    minimizing = run(TpeTuner("minimize", seed=1), PLANE, bowl, 40)
    maximizing = run(TpeTuner("maximize", seed=1), PLANE, lambda p: -bowl(p), 40)
    assert [p for p, _ in maximizing] == [p for p, _ in minimizing]


def test_maximize_mode_finds_higher_values_than_random_search():
    def hill(params: dict) -> float:
        return -bowl(params)

    tpe = [max(metrics(run(TpeTuner("maximize", seed=s), PLANE, hill, 60))) for s in SEEDS]
    rnd = [max(metrics(run(RandomTuner(seed=s), PLANE, hill, 60))) for s in SEEDS]
    assert statistics.mean(tpe) > statistics.mean(rnd)


def test_choice_converges_to_the_best_option_more_often_than_chance():
    space = {
        "optimizer": {"_type": "choice", "_value": ["sgd", "adam", "rmsprop", "adagrad"]},
        "lr": {"_type": "uniform", "_value": [0, 1]},
    }

    def loss(params: dict) -> float:
        return (0.0 if params["optimizer"] == "adam" else 1.0) + (params["lr"] - 0.3) ** 2

    shares = []
    for seed in range(3):
        history = run(TpeTuner(seed=seed, tpe_args={"n_startup_jobs": 10}), space, loss, 60)
        later = [params["optimizer"] for params, _ in history[20:]]
        shares.append(later.count("adam") / len(later))
    assert statistics.mean(shares) > 0.4  # chance is 0.25


def test_dict_metrics_are_optimized_by_their_default_key():
    plain = run(TpeTuner(seed=2, tpe_args={"n_startup_jobs": 5}), PLANE, bowl, 20)
    as_dict = run(
        TpeTuner(seed=2, tpe_args={"n_startup_jobs": 5}), PLANE,
        lambda p: {"default": bowl(p), "other": -bowl(p)}, 20,
    )
    assert [p for p, _ in as_dict] == [p for p, _ in plain]


def test_same_seed_gives_the_same_sequence_and_different_seeds_differ():
    def sequence(seed: int) -> list[dict]:
        return [p for p, _ in run(TpeTuner(seed=seed, tpe_args={"n_startup_jobs": 5}), PLANE, bowl, 25)]

    assert sequence(5) == sequence(5)
    assert sequence(5) != sequence(6)


@pytest.mark.parametrize("multivariate", [True, False])
def test_every_type_stays_in_bounds_and_on_its_grid_after_startup(multivariate):
    def loss(p: dict) -> float:
        return (abs(p["dropout"]) + p["width"] + p["lr"] + p["batch"] / 10 + abs(p["shift"])
                + abs(p["offset"]) + p["scale"] + p["steps"] + p["layers"] + (p["optimizer"] != 2))

    tuner = TpeTuner(seed=0, tpe_args={"n_startup_jobs": 5, "multivariate": multivariate})
    for params, _ in run(tuner, EVERY_TYPE, loss, 40):
        assert_fits_every_type(params)


def test_randint_leans_to_its_best_value():
    space = {"layers": {"_type": "randint", "_value": [2, 5]}, "x": {"_type": "uniform", "_value": [0, 1]}}
    means = []
    for seed in range(3):
        history = run(TpeTuner(seed=seed), space, lambda p: p["layers"] + p["x"], 40)
        means.append(statistics.mean(params["layers"] for params, _ in history[20:]))
    assert statistics.mean(means) < 2.6  # random search gives 3


def test_nested_parameters_learn_only_from_trials_of_their_branch():
    def loss(params: dict) -> float:
        model = params["model"]
        if model == "linear":
            return 2.0
        if model["_name"] == "mlp":
            return 1.0 + model["layers"]
        return (model["lr"] - 0.8) ** 2

    shares, distances = [], []
    for seed in range(3):
        history = run(TpeTuner(seed=seed, tpe_args={"n_startup_jobs": 10}), NESTED, loss, 60)
        for params, _ in history:
            assert_fits_nested(params)
        later = [params["model"] for params, _ in history[20:]]
        cnn = [m for m in later if isinstance(m, dict) and m["_name"] == "cnn"]
        shares.append(len(cnn) / len(later))
        distances.extend(abs(m["lr"] - 0.8) for m in cnn)
    assert statistics.mean(shares) > 0.5  # random search picks cnn a third of the time
    assert statistics.median(distances) < 0.2  # cnn's lr learns from cnn trials alone


def test_constant_liar_spreads_concurrent_suggestions():
    # x keeps points from repeating, so the tuner never runs out of untried ones
    space = {"c": {"_type": "choice", "_value": list(range(8))}, "x": {"_type": "uniform", "_value": [0, 1]}}

    def distinct_concurrent_choices(liar: str | None, seed: int) -> int:
        tuner = TpeTuner(seed=seed, tpe_args={"constant_liar_type": liar, "n_startup_jobs": 10})
        run(tuner, space, lambda p: 0.0 if p["c"] == 0 else 1.0 + p["c"] / 10, 20)
        return len({params["c"] for params in tuner.generate_multiple_parameters(list(range(100, 108)))})

    seeds = range(5)
    assert (sum(distinct_concurrent_choices("worst", seed) for seed in seeds)
            > sum(distinct_concurrent_choices(None, seed) for seed in seeds) + len(seeds))


def test_a_trial_that_ended_without_a_result_is_no_longer_pending():
    def after_warmup(liar: str | None) -> TpeTuner:
        tuner = TpeTuner(seed=0, tpe_args={"constant_liar_type": liar, "n_startup_jobs": 10})
        run(tuner, PLANE, bowl, 15)
        tuner.generate_parameters(100)
        return tuner

    failed = after_warmup("best")
    failed.trial_end(100, success=False)
    still_running = after_warmup("best")
    no_liar = after_warmup(None)
    # with nothing pending, the liar makes no difference
    expected = no_liar.generate_parameters(101)
    assert failed.generate_parameters(101) == expected
    assert still_running.generate_parameters(101) != expected


def test_results_for_unknown_parameter_ids_and_imported_data_are_learned():
    points = [{"x": -10 + i * 0.5, "y": -1.0} for i in range(41)]
    imported = TpeTuner(seed=0)
    imported.update_search_space(PLANE)
    imported.import_data([{"parameter": p, "value": bowl(p)} for p in points])
    reported = TpeTuner(seed=0)
    reported.update_search_space(PLANE)
    for i, p in enumerate(points):
        reported.receive_trial_result(1000 + i, p, {"default": bowl(p)})

    suggestions = imported.generate_multiple_parameters(list(range(10)))
    assert suggestions == reported.generate_multiple_parameters(list(range(10)))
    assert statistics.median(abs(p["x"] - 3) for p in suggestions) < 3.5  # random gives ~5


def test_imported_records_that_do_not_fit_the_space_are_skipped():
    tuner = TpeTuner(seed=0, tpe_args={"n_startup_jobs": 1})
    tuner.update_search_space({"c": {"_type": "choice", "_value": ["a", "b", "c"]}})
    tuner.import_data([
        {"parameter": {"c": "z"}, "value": 1.0},
        {"parameter": {"c": "a"}},
        {"parameter": {"c": "b"}, "value": 0.0},
        {"value": 0.0},
        "not a record",
    ])
    assert tuner.generate_parameters(0) == {"c": "c"}


def test_imported_points_are_never_suggested_and_a_used_up_space_raises_no_more_trial():
    space = {"a": {"_type": "choice", "_value": ["x", "y", "z", "w"]},
             "b": {"_type": "randint", "_value": [0, 5]}}
    every_point = [{"a": a, "b": b} for a in ("x", "y", "z", "w") for b in range(5)]
    imported = every_point[:15]
    tuner = TpeTuner(seed=0, tpe_args={"n_startup_jobs": 3})
    tuner.update_search_space(space)
    # loss smallest at a = "x", b = 0: the model would like to repeat the imported best points
    tuner.import_data([{"parameter": p, "value": None if i % 4 == 3 else ord(p["a"]) - ord("x") + p["b"]}
                       for i, p in enumerate(imported)])
    suggested = run_more(tuner, 5, lambda p: 0.0)
    assert sorted(suggested, key=str) == sorted(every_point[15:], key=str)
    with pytest.raises(NoMoreTrialError):
        tuner.generate_parameters(99)


def test_values_compare_by_number_so_an_imported_4_is_the_suggested_4_0():
    space = {"w": {"_type": "quniform", "_value": [0, 8, 4]}}  # 0.0, 4.0 or 8.0
    tuner = TpeTuner(seed=0)
    tuner.update_search_space(space)
    tuner.import_data([{"parameter": {"w": 4}, "value": 1.0}, {"parameter": {"w": 0}, "value": 2.0}])
    assert tuner.generate_parameters(0) == {"w": 8.0}
    with pytest.raises(NoMoreTrialError):
        tuner.generate_parameters(1)


def test_a_branch_whose_points_were_all_tried_is_not_suggested_again():
    def loss(params: dict) -> float:
        model = params["model"]
        if model == "linear":
            return 0.0  # the best, but imported: it must not come back
        if model["_name"] == "mlp":
            return 0.5
        return 1.0 + model["lr"]

    tuner = TpeTuner(seed=0, tpe_args={"n_startup_jobs": 5})
    tuner.update_search_space(NESTED)
    tuner.import_data([{"parameter": {"model": "linear"}, "value": 0.0}])
    models = [p["model"] for p in run_more(tuner, 30, loss)]
    assert "linear" not in models
    mlp = sorted(m["layers"] for m in models if isinstance(m, dict) and m["_name"] == "mlp")
    assert mlp == [1, 2]  # the better branch's two points, each tried once
    assert sum(isinstance(m, dict) and m["_name"] == "cnn" for m in models) == 28


def test_imported_results_without_a_value_are_not_learned_from():
    valued = [{"parameter": {"x": -10 + i, "y": -1.0}, "value": bowl({"x": -10 + i, "y": -1.0})} for i in range(21)]
    unvalued = [{"parameter": {"x": 9.5 - i, "y": 9.0}, "value": None} for i in range(20)]
    with_unvalued = TpeTuner(seed=0, tpe_args={"n_startup_jobs": 5})
    with_unvalued.update_search_space(PLANE)
    with_unvalued.import_data(valued + unvalued)
    valued_only = TpeTuner(seed=0, tpe_args={"n_startup_jobs": 5})
    valued_only.update_search_space(PLANE)
    valued_only.import_data(valued)
    suggestions = with_unvalued.generate_multiple_parameters(list(range(10)))
    assert suggestions == valued_only.generate_multiple_parameters(list(range(10)))
    assert statistics.median(abs(p["x"] - 3) for p in suggestions) < 3.5  # learned from the 21 valued


def test_import_data_and_the_sequence_after_it_are_deterministic_under_a_seed():
    data = [{"parameter": {"x": -10 + i, "y": 2.0}, "value": bowl({"x": -10 + i, "y": 2.0})} for i in range(21)]

    def sequence(seed: int) -> list[dict]:
        tuner = TpeTuner(seed=seed)
        tuner.update_search_space(PLANE)
        tuner.import_data(data)
        return [p for p, _ in run_continued(tuner, bowl, 15)]

    assert sequence(3) == sequence(3)
    assert sequence(3) != sequence(4)


def test_unknown_tpe_args_key_is_an_algorithm_error():
    with pytest.raises(AlgorithmError, match="unknown tpe_args key 'n_startup'"):
        TpeTuner(tpe_args={"n_startup": 5})


@pytest.mark.parametrize("tpe_args, field", [
    ({"constant_liar_type": "median"}, "constant_liar_type"),
    ({"gamma": 2}, "gamma"),
    ({"n_ei_candidates": 0}, "n_ei_candidates"),
])
def test_bad_tpe_args_values_are_algorithm_errors(tpe_args, field):
    with pytest.raises(AlgorithmError, match=field):
        TpeTuner(tpe_args=tpe_args)


def test_zero_prior_weight_is_accepted_as_in_nni():
    history = run(TpeTuner(seed=0, tpe_args={"prior_weight": 0, "n_startup_jobs": 3}), EVERY_TYPE,
                  lambda p: p["dropout"], 10)
    for params, _ in history:
        assert_fits_every_type(params)


def test_randint_is_ordered_so_neighbours_of_a_good_value_are_tried():
    # A category model would learn nothing about 370 from 360 and 380; an ordered one does.
    space = {"n": {"_type": "randint", "_value": [0, 1000]}}
    for seed in range(3):
        history = run(TpeTuner(seed=seed), space, lambda p: abs(p["n"] - 370), 30)
        assert min(value for _, value in history) <= 2  # random search: about 16


def test_good_results_are_the_best_tenth_up_to_linear_forgetting():
    results = [_Result({("x",): float(i)}, float(-i)) for i in range(300)]
    good, bad = _split_history(results[:100], gamma=0.1, linear_forgetting=25)
    assert [r.loss for r in good] == [float(-i) for i in range(90, 100)] and len(bad) == 90
    good, _ = _split_history(results, gamma=0.1, linear_forgetting=25)
    assert len(good) == 25


def test_bandwidths_shrink_to_a_small_share_of_the_range_but_not_below_a_q_step():
    observations = np.array([0.5, 0.5001, 0.5002, 0.9])
    widths = _bandwidths(observations, prior_mu=0.5, prior_sigma=1.0)
    assert widths.min() == pytest.approx(0.03)  # Optuna's clip would keep them >= 1/6
    spec = parse_search_space({"n": {"_type": "quniform", "_value": [0, 10, 2]}})[0]
    kernels = _NumericKernels(spec, [4.0, 4.0, 4.0, 6.0])
    assert kernels.sigmas.min() >= 2.0
