"""The BOHB tuner (Falkner et al., 2018), after NNI's ``BOHB``: Hyperband's
brackets from ``min_budget`` to ``max_budget``, with new configurations drawn
from a model of the results instead of at random.

Every parameter is mapped to [0, 1] (log scale for log types, the normal CDF for
normal types) and a choice to its option index. For the largest budget with at
least ``min_points_in_model + 2`` results, the best ``max(N, top_n_percent %)``
results (N = min_points_in_model) make a "good" kernel density l(x) and the worst
``max(N, rest)`` a "bad" one g(x) (Gaussian kernels with Scott-style
bandwidths, Aitchison-Aitken kernels for choices). ``num_samples`` candidates
are drawn around good points, with bandwidths widened by ``bandwidth_factor``,
and the one maximizing l(x) / g(x) is tried. With probability
``random_fraction``, or while no budget has enough results, a configuration is
drawn at random. As in NNI, one bracket runs at a time and the brackets repeat::

    tuner = BohbTuner("maximize", min_budget=1, max_budget=27, seed=1)
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from expmgr.algorithms.arguments import require_int, require_number
from expmgr.algorithms.hyperband_tuner import BracketSchedule, HyperbandTuner
from expmgr.algorithms.search_space import (
    RANDINT,
    Key,
    ParameterSpec,
    deformat_parameters,
    format_parameters,
)
from expmgr.algorithms.tuner import AlgorithmError, OptimizeMode

_logger = logging.getLogger("nni.tuner.bohb")

_STANDARD_NORMAL = NormalDist()
_UNIT_MARGIN = 1e-9
_TINY = 1e-300


@dataclass
class _Observation:
    config: dict
    loss: float
    vector: np.ndarray | None = None
    """The config in the unit cube for the current space; None until computed."""
    fits: bool = True


class BohbTuner(HyperbandTuner):
    """NNI's BOHB with NNI's classArgs (``seed`` added); one bracket runs at a time."""

    _name = "BOHB"

    def __init__(
        self,
        optimize_mode: str = "maximize",
        min_budget: float = 1,
        max_budget: float = 3,
        eta: int = 3,
        min_points_in_model: int | None = None,
        top_n_percent: float = 15,
        num_samples: int = 64,
        random_fraction: float = 0.33,
        bandwidth_factor: float = 3,
        min_bandwidth: float = 1e-3,
        seed: int | None = None,
    ) -> None:
        mode = OptimizeMode.parse(optimize_mode)
        require_number("min_budget", min_budget, 0, above=True)
        require_number("max_budget", max_budget, min_budget)
        require_int("eta", eta, 2)
        if min_points_in_model is not None and (
            isinstance(min_points_in_model, bool) or not isinstance(min_points_in_model, int) or min_points_in_model < 1
        ):
            raise AlgorithmError(f"min_points_in_model must be an integer >= 1 or null, got {min_points_in_model!r}")
        require_number("top_n_percent", top_n_percent, 0, above=True)
        if top_n_percent >= 100:
            raise AlgorithmError(f"top_n_percent must be below 100, got {top_n_percent!r}")
        require_int("num_samples", num_samples, 1)
        require_number("random_fraction", random_fraction, 0)
        if random_fraction > 1:
            raise AlgorithmError(f"random_fraction must be between 0 and 1, got {random_fraction!r}")
        require_number("bandwidth_factor", bandwidth_factor, 0, above=True)
        require_number("min_bandwidth", min_bandwidth, 0, above=True)
        self.min_budget = min_budget
        self.max_budget = max_budget
        self.min_points_in_model = min_points_in_model
        self.top_n_percent = top_n_percent
        self.num_samples = num_samples
        self.random_fraction = random_fraction
        self.bandwidth_factor = bandwidth_factor
        self.min_bandwidth = min_bandwidth
        self._observations: dict[float, list[_Observation]] = {}
        self._setup(mode, BracketSchedule.between(min_budget, max_budget, eta, whole_budgets=False),
                    serial=True, seed=seed)

    def update_search_space(self, search_space: dict) -> None:
        """Take a (new) space; earlier results that do not fit it leave the model."""
        super().update_search_space(search_space)
        self._encoding = _Encoding(self._specs)
        for observations in self._observations.values():
            for observation in observations:
                observation.vector, observation.fits = None, True

    # -- sampling -------------------------------------------------------------

    def _observe(self, config: dict, budget: float, loss: float) -> None:
        self._observations.setdefault(float(budget), []).append(_Observation(config, loss))

    def _sample_config(self) -> dict | None:
        model = self._model()
        if model is None or self._rng.random() < self.random_fraction:
            return self._random_untried()
        candidates = self._encoding.decode_all(model.draw(self.num_samples, self.bandwidth_factor, self._rng))
        scores = model.score(np.array([self._encoding.encode(c) for c in candidates]))
        for index in np.argsort(-scores, kind="stable"):
            if self._claim(candidates[index]):
                return candidates[index]
        return self._random_untried()  # every candidate was tried before

    def _model(self) -> _DensityRatio | None:
        """l(x) / g(x) on the largest budget with at least min_points_in_model + 2 results."""
        n_min = self.min_points_in_model or len(self._specs) + 1
        for budget in sorted(self._observations, reverse=True):
            observations = [o for o in self._observations[budget] if self._vectorize(o)]
            if len(observations) < n_min + 2:
                continue
            losses = np.array([o.loss for o in observations])
            order = np.argsort(losses, kind="stable")
            n_good = max(n_min, int(math.floor(self.top_n_percent * len(order) / 100)))
            n_bad = max(n_min, len(order) - n_good)
            vectors = np.array([o.vector for o in observations]).reshape(len(observations), len(self._specs))
            categories = self._encoding.categories
            _logger.debug("BOHB: model of budget %s from %d results", budget, len(observations))
            return _DensityRatio(
                _Kde.fit(vectors[order[:n_good]], categories, self.min_bandwidth),
                _Kde.fit(vectors[order[len(order) - n_bad:]], categories, self.min_bandwidth),
            )
        return None

    def _vectorize(self, observation: _Observation) -> bool:
        if observation.vector is None and observation.fits:
            try:
                observation.vector = self._encoding.encode(observation.config)
            except (ValueError, TypeError):
                observation.fits = False
        return observation.fits


class _Encoding:
    """Configurations as vectors: each parameter in [0, 1], a choice as its option
    index, NaN for a parameter inside a choice option not taken."""

    def __init__(self, specs: list[ParameterSpec]) -> None:
        self.specs = specs
        self.categories = np.array([len(s.values) if s.categorical else 0 for s in specs], dtype=int)
        """Number of options per dimension, 0 for numeric ones."""

    def encode(self, config: dict) -> np.ndarray:
        flat = deformat_parameters(config, self.specs)
        return np.array([_to_unit(s, flat[s.key]) if s.key in flat else math.nan for s in self.specs])

    def decode_all(self, vectors: np.ndarray) -> list[dict]:
        configs = []
        for vector in vectors:
            flat: dict[Key, Any] = {}
            for spec, u in zip(self.specs, vector):
                if spec.is_active(flat):
                    flat[spec.key] = _from_unit(spec, float(u))
            configs.append(format_parameters(flat, self.specs))
        return configs


def _to_unit(spec: ParameterSpec, value: Any) -> float:
    if spec.categorical:
        return float(value)
    if spec.type == RANDINT:
        low, high = spec.bounds()
        return min(max((value - low + 0.5) / (high - low + 1), 0.0), 1.0)
    x = math.log(max(float(value), spec.q / 2 if spec.q else _TINY)) if spec.log else float(value)
    if spec.normal:
        return _STANDARD_NORMAL.cdf((x - spec.mu) / spec.sigma)
    low, high = spec.bounds()
    lo, hi = (math.log(low), math.log(high)) if spec.log else (low, high)
    return 0.5 if hi == lo else min(max((x - lo) / (hi - lo), 0.0), 1.0)


def _from_unit(spec: ParameterSpec, u: float) -> float | int:
    if spec.categorical:
        return min(max(int(round(u)), 0), len(spec.values) - 1)
    if spec.type == RANDINT:
        low, high = spec.bounds()
        count = int(high - low) + 1
        return int(low) + min(max(int(math.floor(u * count)), 0), count - 1)
    if spec.normal:
        z = spec.mu + spec.sigma * _STANDARD_NORMAL.inv_cdf(min(max(u, _UNIT_MARGIN), 1 - _UNIT_MARGIN))
    else:
        low, high = spec.bounds()
        lo, hi = (math.log(low), math.log(high)) if spec.log else (low, high)
        z = lo + u * (hi - lo)
    return spec.from_model(z)


@dataclass
class _Kde:
    """A product-kernel density over encoded configurations (NaN: inactive)."""

    data: np.ndarray
    bandwidths: np.ndarray
    categories: np.ndarray

    @classmethod
    def fit(cls, data: np.ndarray, categories: np.ndarray, min_bandwidth: float) -> _Kde:
        """Bandwidths by statsmodels' normal reference rule, 1.06 * std * n**(-1/(d+4)),
        at least ``min_bandwidth``; a choice's at most (options - 1) / options."""
        n_rows, dims = data.shape
        bandwidths = np.empty(dims)
        for j in range(dims):
            column = data[~np.isnan(data[:, j]), j]
            std = float(column.std()) if len(column) > 1 else 0.0
            bandwidths[j] = 1.06 * std * max(len(column), 1) ** (-1.0 / (dims + 4))
        bandwidths = np.maximum(bandwidths, min_bandwidth)
        choice = categories > 1
        bandwidths[choice] = np.minimum(bandwidths[choice], (categories[choice] - 1) / categories[choice])
        return cls(data, bandwidths, categories)

    def log_pdf(self, points: np.ndarray) -> np.ndarray:
        """Log density at each row of ``points``. A dimension inactive in the point or
        in a kernel's center contributes the uniform density (1, or 1/options)."""
        both = ~np.isnan(points)[:, None, :] & ~np.isnan(self.data)[None, :, :]
        diff = np.nan_to_num(points[:, None, :] - self.data[None, :, :])
        numeric = self.categories == 0
        h = self.bandwidths
        gaussian = -0.5 * (diff / h) ** 2 - np.log(h) - 0.5 * math.log(2 * math.pi)
        options = np.maximum(self.categories, 1).astype(float)
        with np.errstate(divide="ignore"):
            same = np.log(np.where(self.categories > 1, 1 - h, 1.0))
            other = np.log(np.where(self.categories > 1, h / np.maximum(options - 1, 1), 1.0))
        categorical = np.where(diff == 0, same, other)
        kernel = np.where(numeric, gaussian, categorical)
        uniform = np.where(numeric, 0.0, -np.log(options))
        log_kernels = np.where(both, kernel, uniform).sum(axis=2)
        return _logsumexp(log_kernels, axis=1) - math.log(len(self.data))

    def draw(self, count: int, bandwidth_factor: float, rng: np.random.Generator) -> np.ndarray:
        """Candidates around randomly picked centers (hpbandster's sampling): numeric
        dimensions from a normal truncated to [0, 1] with ``bandwidth_factor`` times the
        bandwidth; a choice keeps its option with probability 1 - bandwidth, else a
        random option. Inactive dimensions of a center are drawn uniformly."""
        centers = self.data[rng.integers(len(self.data), size=count)]
        result = np.empty_like(centers)
        for j, options in enumerate(self.categories):
            center = centers[:, j]
            inactive = np.isnan(center)
            if options > 0:
                random = rng.integers(options, size=count).astype(float)
                keep = ~inactive & (rng.random(count) >= self.bandwidths[j])
                result[:, j] = np.where(keep, center, random)
            else:
                center = np.where(inactive, rng.random(count), center)
                result[:, j] = _truncated_normal(center, bandwidth_factor * self.bandwidths[j], rng)
        return result


@dataclass
class _DensityRatio:
    good: _Kde
    bad: _Kde

    def draw(self, count: int, bandwidth_factor: float, rng: np.random.Generator) -> np.ndarray:
        return self.good.draw(count, bandwidth_factor, rng)

    def score(self, points: np.ndarray) -> np.ndarray:
        """log l(x) - log g(x): larger is more promising."""
        return self.good.log_pdf(points) - self.bad.log_pdf(points)


def _truncated_normal(mean: np.ndarray, sd: float, rng: np.random.Generator) -> np.ndarray:
    """Draws from normals around ``mean`` kept inside [0, 1] (by rejection; clipped after 100 rounds)."""
    result = np.clip(mean, 0.0, 1.0)
    todo = np.arange(len(mean))
    for _ in range(100):
        draw = rng.normal(mean[todo], sd)
        inside = (draw >= 0.0) & (draw <= 1.0)
        result[todo[inside]] = draw[inside]
        todo = todo[~inside]
        if len(todo) == 0:
            break
    return result


def _logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    peak = np.max(a, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    with np.errstate(divide="ignore"):
        return np.squeeze(peak, axis=axis) + np.log(np.sum(np.exp(a - peak), axis=axis))
