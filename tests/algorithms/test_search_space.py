from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from expmgr.algorithms.search_space import (
    deformat_parameters,
    format_parameters,
    geomspace,
    linspace,
    make_rng,
    make_stdlib_rng,
    parse_search_space,
    round_half_even,
    sample,
)

from tests.helpers.spaces import EVERY_TYPE, NESTED, assert_fits_every_type, assert_fits_nested, on_grid


@pytest.fixture(scope="module", params=[make_stdlib_rng, make_rng], ids=["stdlib", "numpy"])
def draws(request) -> list[dict]:
    """The light tuners draw with the stdlib, the model-based ones with numpy: same meaning."""
    rng = request.param(42)
    return [sample(EVERY_TYPE, rng) for _ in range(3000)]


def values(draws: list[dict], name: str) -> list:
    return [d[name] for d in draws]


def test_every_type_stays_in_bounds_on_its_grid_with_python_types(draws):
    for params in draws:
        assert_fits_every_type(params)


def test_randint_includes_lower_and_excludes_upper(draws):
    assert set(values(draws, "layers")) == {2, 3, 4}


def test_choice_returns_each_option_with_its_own_type(draws):
    seen = values(draws, "optimizer")
    assert {type(v) for v in seen} == {str, int, float}
    assert set(seen) == {"sgd", 2, 3.5}


def test_quniform_rounds_to_q_and_clips_to_the_bounds(draws):
    # round(u / 4) * 4 for u in [1, 11] gives 0, 4, 8 and 12; 0 and 12 are clipped
    assert set(values(draws, "width")) == {1.0, 4.0, 8.0, 11.0}


def test_qloguniform_rounds_the_log_sampled_value_and_clips(draws):
    batch = values(draws, "batch")
    assert min(batch) == 1.0 and max(batch) == 100.0
    assert all(b == 1.0 or on_grid(b, 5) for b in batch)


def test_loguniform_is_uniform_in_log_space(draws):
    median = statistics.median(values(draws, "lr"))
    assert 0.02 < median < 0.05  # the geometric mean of 1e-3 and 1 is 0.0316


def test_normal_and_lognormal_follow_mu_and_sigma(draws):
    shift = values(draws, "shift")
    assert abs(statistics.mean(shift)) < 0.1
    assert 0.9 < statistics.stdev(shift) < 1.1
    assert 0.85 < statistics.median(values(draws, "scale")) < 1.15  # exp(mu) = 1


def test_qnormal_and_qlognormal_round_without_clipping(draws):
    assert min(values(draws, "offset")) < -3  # normal(0, 2) reaches past 2 sigma, not clipped
    assert 0.0 in values(draws, "steps")  # exp(normal) < 1 rounds to 0 with q=2


def test_nested_choice_gives_the_option_name_and_only_its_children():
    rng = np.random.default_rng(0)
    draws = [sample(NESTED, rng) for _ in range(300)]
    for params in draws:
        assert_fits_nested(params)
    chosen = {p["model"] if isinstance(p["model"], str) else p["model"]["_name"] for p in draws}
    assert chosen == {"cnn", "mlp", "linear"}


@pytest.mark.parametrize("make", [make_stdlib_rng, make_rng], ids=["stdlib", "numpy"])
def test_same_seed_gives_the_same_samples(make):
    first = [sample(EVERY_TYPE, make(7)) for _ in range(3)]
    second = [sample(EVERY_TYPE, make(7)) for _ in range(3)]
    assert first == second
    assert [sample(EVERY_TYPE, make(8)) for _ in range(3)] != first


def test_the_numpy_free_helpers_compute_as_numpy_does():
    for low, high in [(0, 1), (-2.0, 2.0), (1e-9, 3e-9), (-7.5, 1e6), (5, 5)]:
        assert linspace(low, high, 5) == [float(x) for x in np.linspace(low, high, 5)]
    # numpy's vectorized log10 and power may differ from libm's by an ulp on other ranges
    for low, high in [(1e-4, 1), (1, 100), (1e-3, 1), (0.5, 0.5)]:
        assert geomspace(low, high, 5) == [float(x) for x in np.geomspace(low, high, 5)]
    for x in [0.5, 1.5, 2.5, -0.5, -2.5, 3.49, 1e17, -0.0]:
        assert round_half_even(x) == float(np.round(x))
    assert round_half_even(float("inf")) == float("inf")


def test_deformat_inverts_format_for_nested_spaces():
    specs = parse_search_space(NESTED)
    rng = np.random.default_rng(1)
    for _ in range(50):
        params = sample(NESTED, rng)
        assert format_parameters(deformat_parameters(params, specs), specs) == params


def test_deformat_rejects_parameters_outside_the_space():
    specs = parse_search_space(NESTED)
    with pytest.raises(ValueError, match="choices of 'model'"):
        deformat_parameters({"model": "transformer"}, specs)
    with pytest.raises(ValueError, match="'model.kernel' is missing"):
        deformat_parameters({"model": {"_name": "cnn", "lr": 0.1}}, specs)


def test_a_normal_type_is_never_drawn_beyond_ten_sigma_so_exp_never_overflows():
    from expmgr.algorithms.search_space import SIGMAS_DRAWN, ParameterSpec

    spec = ParameterSpec(("x",), "qlognormal", [600, 10, 1])
    assert spec.from_model(1e6) == spec.finish(math.exp(600 + SIGMAS_DRAWN * 10))
    assert spec.from_model(-1e6) == spec.finish(math.exp(600 - SIGMAS_DRAWN * 10))
    assert ParameterSpec(("x",), "normal", [0, 1]).from_model(-50.0) == -10.0


@pytest.mark.parametrize("name", ["TPE", "Anneal", "Evolution", "BOHB"])
def test_model_based_tuners_draw_a_lognormal_near_the_float_limit_without_overflow(name):
    import logging

    from expmgr.algorithms import NoMoreTrialError, create_tuner

    logging.getLogger("nni.tuner").disabled = True   # repeats are expected here: q is huge
    try:
        for seed in range(5):
            tuner = create_tuner(name, {"seed": seed, "optimize_mode": "maximize"})
            tuner.update_search_space({"x": {"_type": "qlognormal", "_value": [600, 10, 1e300]}})
            for parameter_id in range(12):
                try:
                    parameters = tuner.generate_parameters(parameter_id)
                except NoMoreTrialError:   # few distinct values: an end, not a failure
                    break
                tuner.receive_trial_result(parameter_id, parameters, float(parameter_id % 3))
                tuner.trial_end(parameter_id, True)
    finally:
        logging.getLogger("nni.tuner").disabled = False


def test_a_q_type_with_more_values_than_a_listing_takes_is_never_listed(monkeypatch: pytest.MonkeyPatch):
    """Tried points list the untried ones only in a space small enough; a q type's values are
    counted before (listing the 2**53 values the config allows took all memory)."""
    from expmgr.algorithms import tried_points
    from expmgr.algorithms.search_space import parse_search_space

    real = tried_points.grid_values

    def grid_values(spec):
        assert tried_points.grid_count(spec) <= tried_points.LISTING_LIMIT, f"{spec.key} listed in full"
        return real(spec)

    monkeypatch.setattr(tried_points, "grid_values", grid_values)
    tried = tried_points.TriedPoints("test")
    tried.update_search_space(parse_search_space({"x": {"_type": "quniform", "_value": [0, 1e7, 1]}}))
    tried.add({"x": 3.0})
    assert not tried.exhausted({})
