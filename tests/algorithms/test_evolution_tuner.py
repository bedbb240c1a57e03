from __future__ import annotations

import statistics

import pytest

from expmgr.algorithms import create_tuner
from expmgr.algorithms.evolution_tuner import EvolutionTuner
from expmgr.algorithms.random_tuner import RandomTuner
from expmgr.algorithms.tuner import AlgorithmError, NoMoreTrialError

from tests.helpers.spaces import EVERY_TYPE, NESTED, assert_fits_every_type, assert_fits_nested, run

CUBE = {name: {"_type": "uniform", "_value": [-10, 10]} for name in ("x", "y", "z")}


def hill(params: dict) -> float:
    """Maximum 0 at (3, -1, 2)."""
    return -((params["x"] - 3) ** 2 + (params["y"] + 1) ** 2 + (params["z"] - 2) ** 2)


def tuner_with(space: dict, records: list[dict], **class_args) -> EvolutionTuner:
    tuner = EvolutionTuner(**class_args)
    tuner.update_search_space(space)
    tuner.import_data(records)
    return tuner


def parents(child: dict, members: list[dict]) -> list[int]:
    """Indices of the members that ``child`` differs from in exactly one parameter."""
    return [i for i, m in enumerate(members) if sum(child[k] != m[k] for k in child) == 1]


def test_evolution_beats_random_search_on_a_smooth_objective():
    evolution = [max(v for _, v in run(EvolutionTuner(seed=s), CUBE, hill, 100)) for s in range(5)]
    rnd = [max(v for _, v in run(RandomTuner(seed=s), CUBE, hill, 100)) for s in range(5)]
    assert statistics.median(evolution) > 0.1 * statistics.median(rnd)  # metrics are negative


def test_minimize_on_the_negated_objective_makes_the_same_suggestions_as_maximize():
    maximizing = run(EvolutionTuner("maximize", population_size=8, seed=1), CUBE, hill, 40)
    minimizing = run(EvolutionTuner("minimize", population_size=8, seed=1), CUBE, lambda p: -hill(p), 40)
    assert [p for p, _ in minimizing] == [p for p, _ in maximizing]


def test_dict_metrics_are_optimized_by_their_default_key():
    plain = run(EvolutionTuner(population_size=4, seed=2), CUBE, hill, 20)
    as_dict = run(EvolutionTuner(population_size=4, seed=2), CUBE, lambda p: {"default": hill(p), "x": 0}, 20)
    assert [p for p, _ in as_dict] == [p for p, _ in plain]


def test_same_seed_gives_the_same_sequence_and_different_seeds_differ():
    def sequence(seed: int) -> list[dict]:
        tuner = EvolutionTuner(population_size=5, seed=seed)
        return [p for p, _ in run(tuner, EVERY_TYPE, lambda p: p["dropout"], 30)]

    assert sequence(5) == sequence(5)
    assert sequence(5) != sequence(6)


def test_suggestions_are_random_until_population_size_results_exist_and_never_wait():
    tuner = EvolutionTuner(population_size=6, seed=0)
    tuner.update_search_space(CUBE)
    reported = []
    for i in range(5):
        params = tuner.generate_parameters(i)
        tuner.receive_trial_result(i, params, hill(params))
        reported.append(params)
    # five results, and thirty trials pending: still random, not children of the five
    pending = tuner.generate_multiple_parameters(list(range(5, 35)))
    assert len(pending) == 30
    assert all(not parents(p, reported) for p in pending)
    tuner.receive_trial_result(5, pending[0], hill(pending[0]))
    children = tuner.generate_multiple_parameters(list(range(35, 65)))
    assert all(parents(p, reported + [pending[0]]) for p in children)


def test_the_tournament_winner_is_mutated_and_the_worst_member_never_is():
    members = [{"x": float(i), "y": float(i), "z": float(i)} for i in range(4)]
    tuner = tuner_with(CUBE, [{"parameter": m, "value": float(i)} for i, m in enumerate(members)],
                       population_size=4, seed=0)
    children = tuner.generate_multiple_parameters(list(range(200)))
    chosen = [parents(c, members) for c in children]
    assert all(len(p) == 1 for p in chosen)
    counts = [sum(p == [i] for p in chosen) for i in range(4)]
    # tournaments of 2 out of 4: the best wins half of them, the worst none
    assert counts[0] == 0
    assert 0.4 < counts[3] / len(children) < 0.6
    # one parameter changes, usually by a small step (a tenth of the range)
    steps = [abs(c[k] - members[p[0]][k]) for c, p in zip(children, chosen) for k in c if c[k] != members[p[0]][k]]
    assert statistics.median(steps) < 3


def test_the_oldest_member_leaves_the_population_not_the_worst():
    good = [{"x": float(i), "y": 0.0, "z": 0.0} for i in range(4)]
    bad = [{"x": float(i), "y": 5.0, "z": 5.0} for i in range(4)]
    records = [{"parameter": p, "value": 100.0} for p in good] + [{"parameter": p, "value": -100.0} for p in bad]
    tuner = tuner_with(CUBE, records, population_size=4, seed=0)
    children = tuner.generate_multiple_parameters(list(range(100)))
    assert all(parents(c, bad) and not parents(c, good) for c in children)


def test_imported_results_feed_the_population_and_are_never_suggested_again():
    imported = [{"x": float(i), "y": float(-i), "z": 0.5} for i in range(8)]
    tuner = tuner_with(CUBE, [{"parameter": p, "value": -float(i)} for i, p in enumerate(imported)],
                       population_size=8, seed=0)
    children = tuner.generate_multiple_parameters(list(range(50)))
    assert all(p not in imported for p in children)
    chosen = [parents(c, imported) for c in children]
    assert all(len(p) == 1 for p in chosen)
    assert sum(p == [0] for p in chosen) > sum(p == [7] for p in chosen)  # the best imported point wins more


def test_points_already_tried_are_not_suggested_until_the_space_is_exhausted():
    space = {
        "c": {"_type": "choice", "_value": ["a", "b", "c"]},
        "n": {"_type": "randint", "_value": [0, 3]},
    }
    imported = [{"c": "a", "n": 0}, {"c": "a", "n": 1}, {"c": "b", "n": 2}, {"c": "c", "n": 0}]
    records = [{"parameter": p, "value": float(i)} for i, p in enumerate(imported)]
    records.append({"parameter": {"c": "b", "n": 0}, "value": None})  # ended without a result
    tuner = tuner_with(space, records, population_size=2, seed=0)
    suggestions = tuner.generate_multiple_parameters(list(range(10)))
    tried = imported + [{"c": "b", "n": 0}]
    assert len(suggestions) == 9 - len(tried)
    assert all(p not in tried for p in suggestions)
    assert len({(p["c"], p["n"]) for p in suggestions}) == len(suggestions)
    with pytest.raises(NoMoreTrialError):
        tuner.generate_parameters(99)


def test_every_type_and_nested_spaces_stay_valid_through_mutations():
    def loss(p: dict) -> float:
        return abs(p["dropout"]) + p["lr"] + p["batch"] / 10 + abs(p["shift"]) + p["scale"] + p["steps"]

    for params, _ in run(EvolutionTuner("minimize", population_size=4, seed=0), EVERY_TYPE, loss, 150):
        assert_fits_every_type(params)

    def nested_loss(params: dict) -> float:
        model = params["model"]
        return 2.0 if model == "linear" else model.get("lr", 0.5) + model.get("layers", 0)

    for params, _ in run(EvolutionTuner("minimize", population_size=4, seed=0), NESTED, nested_loss, 150):
        assert_fits_nested(params)


def test_a_mutation_that_switches_branch_draws_the_new_branch_children():
    members = [{"model": {"_name": "cnn", "kernel": 3, "lr": 0.25}}, {"model": {"_name": "cnn", "kernel": 5, "lr": 0.5}}]
    tuner = tuner_with(NESTED, [{"parameter": m, "value": 1.0} for m in members], population_size=2, seed=0)
    children = tuner.generate_multiple_parameters(list(range(60)))
    for child in children:
        assert_fits_nested(child)
    models = [c["model"] for c in children]
    mlp = [m for m in models if m != "linear" and m["_name"] == "mlp"]
    assert models.count("linear") == 1  # a point without parameters is suggested once
    assert {m["layers"] for m in mlp} == {1, 2}
    cnn = [{"kernel": m["kernel"], "lr": m["lr"]} for m in models if m != "linear" and m["_name"] == "cnn"]
    assert all(parents(m, [{"kernel": 3, "lr": 0.25}, {"kernel": 5, "lr": 0.5}]) for m in cnn)


def test_imported_records_that_do_not_fit_the_space_are_skipped():
    tuner = tuner_with({"c": {"_type": "choice", "_value": ["a", "b"]}}, [
        {"parameter": {"c": "z"}, "value": 1.0},
        {"value": 1.0},
        {"parameter": {"c": "b"}, "value": 0.0},
    ], population_size=2, seed=0)
    assert tuner.generate_parameters(0) == {"c": "a"}


def test_generating_before_the_search_space_is_known_is_an_error():
    with pytest.raises(AlgorithmError, match="update_search_space"):
        EvolutionTuner().generate_parameters(0)


@pytest.mark.parametrize("class_args, message", [
    ({"population_size": 1}, "tuner 'Evolution'.*population_size.*>= 2.*1"),
    ({"population_size": 2.5}, "tuner 'Evolution'.*population_size.*2.5"),
    ({"population_size": "32"}, "tuner 'Evolution'.*population_size.*'32'"),
    ({"population_size": True}, "tuner 'Evolution'.*population_size.*True"),
    ({"optimize_mode": "up"}, "tuner 'Evolution'.*optimize_mode.*'up'"),
    ({"seed": -3}, "tuner 'Evolution'.*seed.*-3"),
    ({"sample_size": 4}, "tuner 'Evolution' has no argument 'sample_size'.*optimize_mode, population_size, seed"),
])
def test_bad_class_args_are_algorithm_errors_naming_the_argument(class_args, message):
    with pytest.raises(AlgorithmError, match=message):
        create_tuner("Evolution", class_args)


def test_class_args_defaults_are_nnis():
    tuner = create_tuner("evolution", {})
    assert isinstance(tuner, EvolutionTuner)
    assert tuner.optimize_mode.value == "maximize" and tuner.population_size == 32
