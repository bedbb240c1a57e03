from __future__ import annotations

import statistics

import pytest

from expmgr.algorithms import create_tuner
from expmgr.algorithms.anneal_tuner import AnnealTuner
from expmgr.algorithms.random_tuner import RandomTuner
from expmgr.algorithms.tuner import AlgorithmError, NoMoreTrialError

from tests.helpers.spaces import EVERY_TYPE, NESTED, PLANE, assert_fits_every_type, assert_fits_nested, bowl, run

SEEDS = range(7)


def tuner_with(space: dict, records: list[dict], **class_args) -> AnnealTuner:
    tuner = AnnealTuner(**class_args)
    tuner.update_search_space(space)
    tuner.import_data(records)
    return tuner


def test_anneal_beats_random_search_on_a_quadratic_bowl():
    anneal = [[v for _, v in run(AnnealTuner(seed=s), PLANE, bowl, 80)] for s in SEEDS]
    rnd = [[v for _, v in run(RandomTuner(seed=s), PLANE, bowl, 80)] for s in SEEDS]
    assert statistics.median(min(m) for m in anneal) < 0.2 * statistics.median(min(m) for m in rnd)
    # the last 40 suggestions sit near the bottom of the bowl
    assert statistics.median(v for m in anneal for v in m[40:]) < 0.1 * statistics.median(v for m in rnd for v in m[40:])


def test_maximize_on_the_negated_objective_makes_the_same_suggestions_as_minimize():
    minimizing = run(AnnealTuner("minimize", seed=1), PLANE, bowl, 30)
    maximizing = run(AnnealTuner("maximize", seed=1), PLANE, lambda p: -bowl(p), 30)
    assert [p for p, _ in maximizing] == [p for p, _ in minimizing]


def test_dict_metrics_are_optimized_by_their_default_key():
    plain = run(AnnealTuner(seed=2), PLANE, bowl, 20)
    as_dict = run(AnnealTuner(seed=2), PLANE, lambda p: {"default": bowl(p), "other": -bowl(p)}, 20)
    assert [p for p, _ in as_dict] == [p for p, _ in plain]


def test_same_seed_gives_the_same_sequence_and_different_seeds_differ():
    def sequence(seed: int) -> list[dict]:
        return [p for p, _ in run(AnnealTuner(seed=seed), EVERY_TYPE, lambda p: p["dropout"], 25)]

    assert sequence(5) == sequence(5)
    assert sequence(5) != sequence(6)


def test_without_results_suggestions_are_random_over_the_whole_space():
    tuner = AnnealTuner(seed=0)
    tuner.update_search_space(PLANE)
    xs = [tuner.generate_parameters(i)["x"] for i in range(50)]
    assert min(xs) < -8 and max(xs) > 8


@pytest.mark.parametrize("results, half_width", [(10, 5.0), (90, 1.0)])
def test_the_neighbourhood_shrinks_as_results_accumulate(results, half_width):
    # every result is the same point, so every suggestion starts from it; the window
    # is 20 / (1 + 0.1 * results) wide, centred on x = 3 (y = -9.5: shifted inside the bounds)
    tuner = tuner_with(PLANE, [{"parameter": {"x": 3.0, "y": -9.5}, "value": 1.0}] * results, seed=0)
    suggestions = tuner.generate_multiple_parameters(list(range(200)))
    xs = [p["x"] for p in suggestions]
    ys = [p["y"] for p in suggestions]
    assert 3 - half_width <= min(xs) < 3 - 0.9 * half_width
    assert 3 + 0.9 * half_width < max(xs) <= 3 + half_width
    assert -10 <= min(ys) and max(ys) <= -10 + 2 * half_width


@pytest.mark.parametrize("results, kept", [(10, 0.55), (90, 0.91)])
def test_a_choice_keeps_its_value_more_often_as_results_accumulate(results, kept):
    space = {"c": {"_type": "choice", "_value": list(range(10))}, "x": {"_type": "uniform", "_value": [0, 1]}}
    tuner = tuner_with(space, [{"parameter": {"c": 3, "x": 0.5}, "value": 1.0}] * results, seed=0)
    suggestions = tuner.generate_multiple_parameters(list(range(400)))
    share = sum(p["c"] == 3 for p in suggestions) / len(suggestions)
    assert kept - 0.07 < share < kept + 0.07  # keep with 1 - f, else any of 10 options; f = 1 / (1 + 0.1 n)


def test_suggestions_start_from_the_best_results_most_often():
    # result i has c = i and metric i; after 100 results c is kept 10 times in 11, so c
    # shows the start, whose rank is geometric with mean 2 (P(rank 0) = 1/2, P(rank 1) = 1/4)
    space = {"c": {"_type": "choice", "_value": list(range(100))}, "x": {"_type": "uniform", "_value": [0, 1]}}
    records = [{"parameter": {"c": i, "x": 0.5}, "value": float(i)} for i in range(100)]
    tuner = tuner_with(space, records, seed=0)
    cs = [p["c"] for p in tuner.generate_multiple_parameters(list(range(400)))]
    assert 0.35 < cs.count(0) / len(cs) < 0.6
    assert 0.15 < cs.count(1) / len(cs) < 0.33
    assert sum(c >= 10 for c in cs) / len(cs) < 0.13


def test_every_type_stays_in_bounds_and_on_its_grid_while_annealing():
    def loss(p: dict) -> float:
        return (abs(p["dropout"]) + p["width"] + p["lr"] + p["batch"] / 10 + abs(p["shift"])
                + abs(p["offset"]) + p["scale"] + p["steps"] + p["layers"] + (p["optimizer"] != 2))

    history = run(AnnealTuner(seed=0), EVERY_TYPE, loss, 80)
    for params, _ in history:
        assert_fits_every_type(params)
    later = [params for params, _ in history[40:]]
    assert statistics.mean(p["layers"] for p in later) < 3  # randint [2, 5) keeps its best value
    assert sum(p["optimizer"] == 2 for p in later) / len(later) > 0.6  # chance is 1/3


def test_nested_parameters_are_drawn_only_in_their_branch_and_learn_from_it():
    def loss(params: dict) -> float:
        model = params["model"]
        if model == "linear":
            return 2.0
        if model["_name"] == "mlp":
            return 1.0 + model["layers"]
        return (model["lr"] - 0.8) ** 2

    shares, distances = [], []
    for seed in range(3):
        history = run(AnnealTuner(seed=seed), NESTED, loss, 60)
        for params, _ in history:
            assert_fits_nested(params)
        later = [params["model"] for params, _ in history[20:]]
        cnn = [m for m in later if isinstance(m, dict) and m["_name"] == "cnn"]
        shares.append(len(cnn) / len(later))
        distances.extend(abs(m["lr"] - 0.8) for m in cnn)
    assert statistics.mean(shares) > 0.6  # random search picks cnn a third of the time
    assert statistics.median(distances) < 0.1


def test_a_branch_switch_starts_its_children_from_the_best_result_of_that_branch():
    space = {
        "model": {"_type": "choice", "_value": [
            {"_name": "a", "x": {"_type": "uniform", "_value": [0, 100]}},
            {"_name": "b", "x": {"_type": "uniform", "_value": [0, 100]}},
        ]},
    }
    records = [{"parameter": {"model": {"_name": "a", "x": 10.0 + i}}, "value": float(i)} for i in range(20)]
    records += [{"parameter": {"model": {"_name": "b", "x": 90.0 - i}}, "value": 100.0 + i} for i in range(20)]
    tuner = tuner_with(space, records, seed=0)
    b = [p["model"]["x"] for p in tuner.generate_multiple_parameters(list(range(300))) if p["model"]["_name"] == "b"]
    assert len(b) > 10
    # b's x comes from b's own results (70..90, window 100/3 wide), never from a's (10..29)
    assert statistics.median(b) > 70


def test_imported_points_are_learned_and_never_suggested_again():
    space = {
        "c": {"_type": "choice", "_value": ["a", "b", "c"]},
        "n": {"_type": "randint", "_value": [0, 3]},
    }
    imported = [{"c": "a", "n": 0}, {"c": "a", "n": 1}, {"c": "b", "n": 2}, {"c": "c", "n": 0}, {"c": "c", "n": 1}]
    records = [{"parameter": p, "value": float(i)} for i, p in enumerate(imported)]
    records.append({"parameter": {"c": "b", "n": 0}, "value": None})  # ended without a result
    tuner = tuner_with(space, records, seed=0)
    suggestions = tuner.generate_multiple_parameters(list(range(10)))
    tried = imported + [{"c": "b", "n": 0}]
    assert len(suggestions) == 9 - len(tried)
    assert all(p not in tried for p in suggestions)
    assert len({(p["c"], p["n"]) for p in suggestions}) == len(suggestions)
    with pytest.raises(NoMoreTrialError):
        tuner.generate_parameters(99)


def test_imported_results_and_results_of_unknown_ids_pull_suggestions_to_the_best():
    points = [{"x": -10 + i * 0.5, "y": -1.0} for i in range(41)]
    imported = tuner_with(PLANE, [{"parameter": p, "value": bowl(p)} for p in points], seed=0)
    reported = AnnealTuner(seed=0)
    reported.update_search_space(PLANE)
    for i, p in enumerate(points):
        reported.receive_trial_result(1000 + i, p, {"default": bowl(p)})

    suggestions = imported.generate_multiple_parameters(list(range(20)))
    assert suggestions == reported.generate_multiple_parameters(list(range(20)))
    assert statistics.median(abs(p["x"] - 3) for p in suggestions) < 2  # random gives ~5


def test_imported_records_that_do_not_fit_the_space_are_skipped():
    tuner = tuner_with({"c": {"_type": "choice", "_value": ["a", "b"]}}, [
        {"parameter": {"c": "z"}, "value": 1.0},
        {"value": 1.0},
        {"parameter": {"c": "b"}, "value": 0.0},
    ], seed=0)
    assert tuner.generate_parameters(0) == {"c": "a"}  # "b" was imported


def test_a_new_search_space_keeps_the_results_that_fit_it():
    tuner = tuner_with(PLANE, [{"parameter": {"x": 3.0, "y": -1.0}, "value": 0.0}] * 90, seed=0)
    tuner.update_search_space({"x": PLANE["x"]})
    xs = [tuner.generate_parameters(i)["x"] for i in range(50)]
    assert max(abs(x - 3) for x in xs) <= 1.0
    tuner.update_search_space({"z": PLANE["x"]})  # the results lack z: forgotten
    zs = [tuner.generate_parameters(i)["z"] for i in range(50)]
    assert min(zs) < -8 and max(zs) > 8


def test_generating_before_the_search_space_is_known_is_an_error():
    with pytest.raises(AlgorithmError, match="update_search_space"):
        AnnealTuner().generate_parameters(0)


@pytest.mark.parametrize("class_args, message", [
    ({"optimize_mode": "up"}, "tuner 'Anneal'.*optimize_mode.*'up'"),
    ({"seed": -1}, "tuner 'Anneal'.*seed.*-1"),
    ({"seed": 1.5}, "tuner 'Anneal'.*seed.*1.5"),
    ({"population_size": 4}, "tuner 'Anneal' has no argument 'population_size'.*optimize_mode, seed"),
])
def test_bad_class_args_are_algorithm_errors_naming_the_argument(class_args, message):
    with pytest.raises(AlgorithmError, match=message):
        create_tuner("Anneal", class_args)


def test_class_args_defaults_are_nnis():
    tuner = create_tuner("anneal", {})
    assert isinstance(tuner, AnnealTuner) and tuner.optimize_mode.value == "minimize"
