from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from expmgr.algorithms import create_tuner
from expmgr.algorithms.pbt_tuner import PbtTuner
from expmgr.algorithms.tuner import TRIAL_CHECKPOINT_DIR, AlgorithmError, NoTrialYetError

from tests.helpers.spaces import EVERY_TYPE, NESTED, assert_fits_every_type, assert_fits_nested

Handed = list[tuple[int, dict, "int | None"]]
"""One generation as handed out: (parameter id, parameters, checkpoint source)."""


def searched(params: dict) -> dict:
    """``params`` without NNI's checkpoint folders, which every PBT trial is given (filled in
    by the manager): the hyperparameters alone."""
    assert params["load_checkpoint_dir"] == params["save_checkpoint_dir"] == TRIAL_CHECKPOINT_DIR
    return {k: v for k, v in params.items() if k not in ("load_checkpoint_dir", "save_checkpoint_dir")}


def hand_out(tuner: PbtTuner, first_id: int) -> Handed:
    """Take every member of the current generation, then check the tuner waits."""
    handed = []
    for parameter_id in range(first_id, first_id + tuner.population_size):
        params = searched(tuner.generate_parameters(parameter_id))
        handed.append((parameter_id, params, tuner.checkpoint_source(parameter_id)))
    with pytest.raises(NoTrialYetError):
        tuner.generate_parameters(first_id + tuner.population_size)
    return handed


def finish(tuner: PbtTuner, handed: Handed, score: Callable[[int, dict], float | None]) -> None:
    """Report each member's score (None: it fails without a result) and end it."""
    for parameter_id, params, _ in handed:
        value = score(parameter_id, params)
        if value is not None:
            tuner.receive_trial_result(parameter_id, params, value)
        tuner.trial_end(parameter_id, success=value is not None)


def run(tuner: PbtTuner, space: dict, generations: int, score: Callable[[int, dict], float | None]) -> list[Handed]:
    tuner.update_search_space(space)
    history = []
    for generation in range(generations):
        assert tuner.generation == generation
        handed = hand_out(tuner, generation * tuner.population_size)
        finish(tuner, handed, score)
        history.append(handed)
    return history


def by_position(size: int) -> Callable[[int, dict], float]:
    """Scores where later positions in a generation (ids handed out in order) score higher."""
    return lambda parameter_id, params: float(parameter_id % size)


def canonical(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


def test_generation_0_is_population_size_random_members_that_fit_the_space():
    for space, fits in ((EVERY_TYPE, assert_fits_every_type), (NESTED, assert_fits_nested)):
        tuner = PbtTuner(population_size=12, seed=0)
        tuner.update_search_space(space)
        handed = hand_out(tuner, 0)
        assert len(handed) == 12
        for _, params, source in handed:
            fits(params)
            assert source is None
    assert len({canonical(p) for _, p, _ in handed}) > 1


def test_no_trial_until_every_member_of_the_generation_has_ended():
    tuner = PbtTuner(population_size=4, seed=0)
    tuner.update_search_space(EVERY_TYPE)
    handed = hand_out(tuner, 0)
    for parameter_id, params, _ in handed[:3]:
        tuner.receive_trial_result(parameter_id, params, {"default": 0.5, "loss": 1.0})
        tuner.trial_end(parameter_id, success=True)
        with pytest.raises(NoTrialYetError):
            tuner.generate_parameters(4)
    assert tuner.generation == 0
    tuner.trial_end(handed[3][0], success=False)  # ended without a result
    assert tuner.generation == 1
    assert_fits_every_type(searched(tuner.generate_parameters(4)))


def test_a_result_alone_counts_as_the_member_ending():
    tuner = PbtTuner(population_size=2, seed=0)
    tuner.update_search_space(EVERY_TYPE)
    handed = hand_out(tuner, 0)
    for parameter_id, params, _ in handed:
        tuner.receive_trial_result(parameter_id, params, 1.0)
    assert tuner.generation == 1


def test_bottom_members_copy_top_members_and_start_from_their_checkpoints():
    tuner = PbtTuner(population_size=10, fraction=0.2, seed=3)
    first, second = run(tuner, EVERY_TYPE, 2, by_position(10))
    previous = {parameter_id: params for parameter_id, params, _ in first}
    top_ids = {8, 9}
    for slot, (parameter_id, params, source) in enumerate(second):
        if slot in (0, 1):  # the two lowest scores
            assert source in top_ids
            assert params != previous[source]
        else:
            assert source == first[slot][0]
            assert params == previous[source]


def test_explore_scales_numbers_by_the_factor_and_keeps_choices_when_not_resampling():
    space = {
        "lr": {"_type": "loguniform", "_value": [1e-4, 1.0]},
        "width": {"_type": "uniform", "_value": [10, 1000]},
        "layers": {"_type": "randint", "_value": [1, 100]},
        "optimizer": {"_type": "choice", "_value": ["sgd", "adam", "rmsprop"]},
    }
    tuner = PbtTuner(population_size=4, fraction=0.5, factor=0.25, resample_probability=0.0, seed=5)
    history = run(tuner, space, 6, by_position(4))
    checked = 0
    for earlier, later in zip(history, history[1:]):
        previous = {parameter_id: params for parameter_id, params, _ in earlier}
        for slot, (_, params, source) in enumerate(later[:2]):
            parent = previous[source]
            assert params["optimizer"] == parent["optimizer"]
            for name in ("lr", "width"):
                ratio = params[name] / parent[name]
                clipped = params[name] in space[name]["_value"]
                assert clipped or ratio == pytest.approx(0.75) or ratio == pytest.approx(1.25)
            layers, parent_layers = params["layers"], parent["layers"]
            assert layers != parent_layers or parent_layers in (1, 99)  # moves unless stuck at a bound
            assert abs(layers - parent_layers) <= round(parent_layers * 0.25) + 1
            checked += 1
    assert checked == 10


def test_explored_members_stay_in_the_space_and_differ_from_their_parent():
    tuner = PbtTuner(population_size=6, fraction=0.5, seed=2)
    history = run(tuner, EVERY_TYPE, 10, by_position(6))
    for earlier, later in zip(history, history[1:]):
        previous = {parameter_id: params for parameter_id, params, _ in earlier}
        top_ids = {parameter_id for parameter_id, _, _ in earlier[3:]}
        for slot, (_, params, source) in enumerate(later):
            assert_fits_every_type(params)
            if slot < 3:
                assert source in top_ids
                assert params != previous[source]


def test_a_choice_only_space_still_explores_a_different_option():
    space = {"optimizer": {"_type": "choice", "_value": ["sgd", "adam", "rmsprop"]}}
    tuner = PbtTuner(population_size=4, fraction=0.5, seed=1)
    history = run(tuner, space, 8, by_position(4))
    for earlier, later in zip(history, history[1:]):
        previous = {parameter_id: params for parameter_id, params, _ in earlier}
        for _, params, source in later[:2]:
            assert params != previous[source]


def test_small_integers_move_one_step_when_scaling_would_round_back():
    space = {"layers": {"_type": "randint", "_value": [1, 5]}}
    tuner = PbtTuner(population_size=4, fraction=0.5, factor=0.25, resample_probability=0.0, seed=0)
    history = run(tuner, space, 8, by_position(4))
    for earlier, later in zip(history, history[1:]):
        previous = {parameter_id: params for parameter_id, params, _ in earlier}
        for _, params, source in later[:2]:
            assert abs(params["layers"] - previous[source]["layers"]) == 1


def kind(params: dict) -> str:
    model = params["model"]
    return model if isinstance(model, str) else model["_name"]


def test_nested_members_explore_inside_their_branch_only():
    tuner = PbtTuner(population_size=6, fraction=0.5, resample_probability=0.5, seed=2)
    history = run(tuner, NESTED, 10, by_position(6))
    changed = 0
    for earlier, later in zip(history, history[1:]):
        previous = {parameter_id: params for parameter_id, params, _ in earlier}
        for _, params, source in later[:3]:
            assert_fits_nested(params)
            parent = previous[source]
            assert kind(params) == kind(parent)  # a checkpoint fits only its own branch
            if kind(parent) != "linear":
                assert params != parent
                changed += 1
    assert changed > 0


def test_members_that_fail_without_a_result_rank_worst_and_are_replaced():
    # 5 members, fraction 0.2: one top (position 4), normally one bottom (position 0)
    def score(parameter_id: int, params: dict) -> float | None:
        return None if parameter_id % 5 in (2, 3) else float(parameter_id % 5)

    tuner = PbtTuner(population_size=5, fraction=0.2, seed=0)
    first, second = run(tuner, EVERY_TYPE, 2, score)
    sources = [source for _, _, source in second]
    assert sources[2] == first[4][0] and sources[3] == first[4][0]  # failed: replaced by the top
    assert sources[0] == first[0][0] and sources[1] == first[1][0]  # reported: continue
    assert sources[4] == first[4][0]


def test_a_failed_member_is_worse_than_any_reported_result_in_minimize_mode():
    tuner = PbtTuner("minimize", population_size=4, fraction=0.25, seed=0)
    tuner.update_search_space(EVERY_TYPE)
    handed = hand_out(tuner, 0)
    results = {0: 1e9, 1: None, 2: -3.0, 3: 5.0}
    finish(tuner, handed, lambda pid, params: results[pid])
    sources = [source for _, _, source in hand_out(tuner, 4)]
    assert sources == [0, 2, 2, 3]


def test_minimize_mode_keeps_the_smallest_results():
    tuner = PbtTuner("minimize", population_size=10, fraction=0.2, seed=4)
    first, second = run(tuner, EVERY_TYPE, 2, by_position(10))
    sources = [source for _, _, source in second]
    assert set(sources[8:]) <= {0, 1}
    assert sources[:8] == list(range(8))


def test_same_seed_gives_the_same_generations_and_sources():
    def score(parameter_id: int, params: dict) -> float:
        return params["lr"] + params["dropout"]

    a = run(PbtTuner(population_size=5, seed=7), EVERY_TYPE, 5, score)
    b = run(PbtTuner(population_size=5, seed=7), EVERY_TYPE, 5, score)
    c = run(PbtTuner(population_size=5, seed=8), EVERY_TYPE, 5, score)
    assert a == b
    assert a != c


def test_import_seeds_generation_0_best_first_and_random_members_avoid_imported_points():
    space = {"k": {"_type": "choice", "_value": list(range(12))}}
    tuner = PbtTuner(population_size=6, seed=0)
    tuner.update_search_space(space)
    tuner.import_data(
        [{"parameter": {"k": k}, "value": None} for k in range(6)]
        + [{"parameter": {"k": 6}, "value": 0.1}, {"parameter": {"k": 7}, "value": {"default": 0.9}}]
        + [{"parameter": {"k": 99}, "value": 1.0}]  # does not fit: skipped
    )
    ks = [params["k"] for _, params, _ in hand_out(tuner, 0)]
    assert ks[:2] == [7, 6]
    assert sorted(ks[2:]) == [8, 9, 10, 11]


def test_a_space_too_small_for_the_population_repeats_points_in_generation_0():
    tuner = PbtTuner(population_size=4, seed=0)
    tuner.update_search_space({"k": {"_type": "choice", "_value": ["a", "b"]}})
    handed = hand_out(tuner, 0)
    assert {params["k"] for _, params, _ in handed} == {"a", "b"}


def test_results_of_trials_outside_the_current_generation_are_ignored():
    tuner = PbtTuner(population_size=2, seed=0)
    first = run(tuner, EVERY_TYPE, 1, by_position(2))[0]
    tuner.receive_trial_result(first[0][0], first[0][1], 100.0)  # late, from generation 0
    tuner.trial_end(42, success=False)  # never handed out
    assert tuner.generation == 1
    assert len(hand_out(tuner, 2)) == 2


def test_pbt_never_runs_out_of_trials():
    tuner = PbtTuner(population_size=2, seed=0)
    history = run(tuner, {"k": {"_type": "choice", "_value": ["only"]}}, 20, by_position(2))
    assert len(history) == 20


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("population_size", 1),
        ("population_size", 2.5),
        ("factor", 0),
        ("factor", 1),
        ("resample_probability", 1.5),
        ("resample_probability", -0.1),
        ("fraction", 0),
        ("fraction", 0.6),
        ("optimize_mode", "largest"),
        ("seed", -1),
    ],
)
def test_bad_class_args_name_the_argument(argument: str, value: object):
    with pytest.raises(AlgorithmError, match=argument):
        create_tuner("PBT", {argument: value})


def test_defaults_are_nnis():
    tuner = create_tuner("pbt", {})
    assert isinstance(tuner, PbtTuner)
    assert (tuner.optimize_mode.value, tuner.population_size, tuner.factor, tuner.resample_probability,
            tuner.fraction) == ("maximize", 10, 0.2, 0.25, 0.2)


def test_generating_before_the_search_space_is_known_is_an_error():
    with pytest.raises(AlgorithmError, match="update_search_space"):
        PbtTuner().generate_parameters(0)



def test_trials_get_nnis_checkpoint_folders_and_imports_ignore_them():
    tuner = PbtTuner(population_size=2, seed=0, all_checkpoint_dir="/nni/checkpoints")  # NNI's; not used
    tuner.update_search_space({"lr": {"_type": "uniform", "_value": [0, 1]}})
    tuner.import_data([{"parameter": {"lr": 0.25, "load_checkpoint_dir": "/old/a", "save_checkpoint_dir": "/old/b"},
                        "value": 9.0}])
    first = tuner.generate_parameters(0)
    assert first == {"lr": 0.25, "load_checkpoint_dir": TRIAL_CHECKPOINT_DIR,
                     "save_checkpoint_dir": TRIAL_CHECKPOINT_DIR}, "the imported point seeds generation 0"
