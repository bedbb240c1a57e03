"""The TPE tuner's model (``tpe_tuner.py``): its results split into good and bad, and the
Parzen mixture of each, a truncated Gaussian or a smoothed categorical per parameter and
result plus the prior, sampled for candidates and scored by log density::

    good, bad = split_history(results, gamma=0.25, linear_forgetting=25)
    model = ParzenMixture(group, good, prior_weight=1.0, linear_forgetting=25)
    columns = model.sample(24, rng)           # one column of values per parameter
    scores = model.log_pdf(columns) - ParzenMixture(group, bad, 1.0, 25).log_pdf(columns)
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from expmgr.algorithms.search_space import RANDINT, Key, ParameterSpec

_TINY = 1e-300
_LOG_TINY = math.log(_TINY)
_SQRT2 = math.sqrt(2.0)
_MIN_BANDWIDTH = 0.03
"""Narrowest kernel, as a fraction of the prior's width (of the range for bounded types).
Hyperopt's and Optuna's "magic clip", range / min(100, n + 2) for a model of n results,
keeps the ~10 good results' kernels at least a twelfth of the range wide, so l(x) cannot
concentrate around the best results to refine them; 3% can (measured on
tests/perf/tuner_quality.py with seeds 1000..1029: better on all four objectives)."""


@dataclass(frozen=True)
class TpeResult:
    flat: dict[Key, Any]
    """The trial's flat parameters (option index for a choice)."""
    loss: float
    """Smaller is better, whatever the optimize mode."""


def split_history(
    results: list[TpeResult], gamma: float, linear_forgetting: int
) -> tuple[list[TpeResult], list[TpeResult]]:
    """The best ``min(ceil(gamma * n), linear_forgetting)`` results and the rest,
    each in chronological order (so linear forgetting fades the oldest)."""
    n_good = min(int(math.ceil(gamma * len(results))), max(linear_forgetting, 1))
    by_loss = sorted(range(len(results)), key=lambda i: results[i].loss)
    good = set(by_loss[:n_good])
    return (
        [r for i, r in enumerate(results) if i in good],
        [r for i, r in enumerate(results) if i not in good],
    )


def _forgetting_weights(n: int, linear_forgetting: int) -> np.ndarray:
    """Weights of n chronological observations: the last ``linear_forgetting`` weigh 1,
    older ones ramp down linearly to 1/n (hyperopt's ``linear_forgetting_weights``)."""
    if n < max(linear_forgetting, 1):
        return np.ones(n)
    ramp = np.linspace(1.0 / n, 1.0, num=n - linear_forgetting)
    return np.concatenate([ramp, np.ones(linear_forgetting)])


class ParzenMixture:
    """A mixture over a group of parameters: one product component per result, plus the prior
    (the last component). ``sample`` and ``log_pdf`` work on candidates as one column of
    values per parameter."""

    def __init__(self, group: list[ParameterSpec], results: list[TpeResult], prior_weight: float,
                 linear_forgetting: int) -> None:
        weights = np.append(_forgetting_weights(len(results), linear_forgetting), prior_weight)
        if weights.sum() == 0:
            weights[-1] = 1.0
        self.weights = weights / weights.sum()
        self.kernels = [
            _kernels_of(spec, [r.flat[spec.key] for r in results], prior_weight) for spec in group
        ]

    def sample(self, n: int, rng: np.random.Generator) -> list[list]:
        components = rng.choice(len(self.weights), size=n, p=self.weights)
        return [kernels.sample(components, rng) for kernels in self.kernels]

    def log_pdf(self, columns: list[list]) -> np.ndarray:
        with np.errstate(divide="ignore"):  # prior_weight 0 gives the prior a weight of 0
            total = np.log(self.weights)[None, :]
        for kernels, column in zip(self.kernels, columns):
            total = total + kernels.log_pdf(column)
        return _logsumexp(total, axis=1)


def _kernels_of(spec: ParameterSpec, values: list, prior_weight: float) -> _CategoricalKernels | _NumericKernels:
    if spec.categorical:
        return _CategoricalKernels(len(spec.values), values, prior_weight)
    return _NumericKernels(spec, values)


class _CategoricalKernels:
    """Choices (option indices) as categories: a result's
    kernel puts weight 1 on its own category and ``prior_weight / (n + 1)`` on every category
    (Optuna's smoothing); the prior kernel is uniform."""

    def __init__(self, size: int, values: list, prior_weight: float) -> None:
        n_kernels = len(values) + 1
        probabilities = np.full((n_kernels, size), prior_weight / n_kernels)
        probabilities[np.arange(len(values)), np.asarray(values, dtype=int)] += 1.0
        probabilities[-1] = 1.0
        self.probabilities = probabilities / probabilities.sum(axis=1, keepdims=True)
        self.cumulative = np.cumsum(self.probabilities, axis=1)

    def sample(self, components: np.ndarray, rng: np.random.Generator) -> list[int]:
        u = rng.random(len(components))
        indices = [int(np.searchsorted(self.cumulative[c], x, side="right")) for c, x in zip(components, u)]
        size = self.probabilities.shape[1]
        return [min(i, size - 1) for i in indices]

    def log_pdf(self, values: list[int]) -> np.ndarray:
        indices = np.asarray(values, dtype=int)
        with np.errstate(divide="ignore"):
            return np.log(self.probabilities[:, indices].T)


class _NumericKernels:
    """Truncated Gaussians in the parameter's model space (log space for log types), one
    per result, with adaptive bandwidths, plus the prior."""

    def __init__(self, spec: ParameterSpec, values: Sequence[float]) -> None:
        self.spec = spec
        self.lo, self.hi = spec.model_bounds()
        if spec.type == RANDINT:  # each integer gets a whole bucket, the end ones included
            self.lo, self.hi = self.lo - 0.5, self.hi + 0.5
        if spec.normal:
            prior_mu, prior_sigma = spec.mu, spec.sigma
        else:
            prior_mu, prior_sigma = (self.lo + self.hi) / 2, self.hi - self.lo
        observations = np.array([spec.to_model(v) for v in values], dtype=float)
        self.mus = np.append(observations, prior_mu)
        sigmas = _bandwidths(observations, prior_mu, prior_sigma)
        if spec.q is not None and not spec.log:
            # A kernel narrower than a q-step would never leave its own value.
            sigmas = np.maximum(sigmas, min(spec.q, prior_sigma))
        self.sigmas = np.append(sigmas, prior_sigma)
        self.log_mass = _log_normal_mass((self.lo - self.mus) / self.sigmas, (self.hi - self.mus) / self.sigmas)

    def sample(self, components: np.ndarray, rng: np.random.Generator) -> list[float]:
        """Draws from the chosen components, truncated to the bounds (by rejection), finished."""
        mus, sigmas = self.mus[components], self.sigmas[components]
        draws = rng.normal(mus, sigmas)
        for _ in range(100):
            outside = (draws < self.lo) | (draws > self.hi)
            if not outside.any():
                break
            draws[outside] = rng.normal(mus[outside], sigmas[outside])
        draws = np.clip(draws, self.lo, self.hi)
        spec = self.spec
        return [spec.from_model(float(z)) for z in draws]

    def log_pdf(self, values: list[float]) -> np.ndarray:
        """log p(value) under each component, shape (candidates, components): a density, or for
        q types the probability of the value's q-bucket."""
        spec = self.spec
        x = np.asarray(values, dtype=float)[:, None]
        mus, sigmas = self.mus[None, :], self.sigmas[None, :]
        q = spec.q
        if q is None:
            z = np.log(x) if spec.log else x
            log_p = -0.5 * ((z - mus) / sigmas) ** 2 - np.log(sigmas) - 0.5 * math.log(2 * math.pi)
        else:
            real_lo, real_hi = (math.exp(self.lo), math.exp(self.hi)) if spec.log else (self.lo, self.hi)
            lower = np.maximum(x - q / 2, real_lo)
            upper = np.minimum(x + q / 2, real_hi)
            if spec.log:
                with np.errstate(divide="ignore"):
                    lower = np.where(lower > 0, np.log(np.maximum(lower, _TINY)), -math.inf)
                    upper = np.log(np.maximum(upper, _TINY))
            log_p = _log_normal_mass((lower - mus) / sigmas, (upper - mus) / sigmas)
        return log_p - self.log_mass[None, :]


def _bandwidths(observations: np.ndarray, prior_mu: float, prior_sigma: float) -> np.ndarray:
    """Adaptive Parzen bandwidths of the observations (in their original order), as Optuna's
    TPE computes them: the distance to the farther neighbour among the sorted observations
    (the outermost ones: to their inner neighbour; a lone one: to the farther bound), clipped
    to [prior_sigma * _MIN_BANDWIDTH, prior_sigma] (not Optuna's "magic clip", see
    ``_MIN_BANDWIDTH``). Unbounded (normal) types
    use ``prior_mu -+ prior_sigma / 2`` as bounds.
    """
    n = len(observations)
    if n == 0:
        return np.empty(0)
    order = np.argsort(observations, kind="stable")
    points = np.concatenate([[prior_mu - prior_sigma / 2], observations[order], [prior_mu + prior_sigma / 2]])
    widths = np.maximum(points[1:-1] - points[:-2], points[2:] - points[1:-1])
    if n >= 2:
        widths[0] = points[2] - points[1]
        widths[-1] = points[-2] - points[-3]
    widths = np.clip(widths, prior_sigma * _MIN_BANDWIDTH, prior_sigma)
    sigmas = np.empty(n)
    sigmas[order] = widths
    return sigmas


def _log_erfc(x: np.ndarray) -> np.ndarray:
    """log(erfc(x)) for x >= 0, elementwise, without underflow in the tail (Numerical
    Recipes' ``erfcc``: relative error below 1.2e-7 everywhere)."""
    t = 1.0 / (1.0 + 0.5 * x)
    poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (
        0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.isinf(x), -math.inf, np.log(t) - x * x + poly)


def _log_normal_mass(a: Any, b: Any) -> np.ndarray:
    """log(Phi(b) - Phi(a)) for a standard normal, elementwise, accurate in both tails
    (to about 1e-4 in the log; at least log(1e-300))."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
    upper, lower = a > 0, b < 0
    # In a tail the mass is (erfc(near) - erfc(far)) / 2, 0 <= near <= far, in logs.
    near = np.where(upper, a, np.where(lower, -b, 0.0)) / _SQRT2
    far = np.where(upper, b, np.where(lower, -a, 0.0)) / _SQRT2
    log_near = _log_erfc(near)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        tail = math.log(0.5) + log_near + np.log1p(-np.exp(_log_erfc(far) - log_near))
        # Across the mean (a <= 0 <= b): 1 - erfc(-a / sqrt 2) / 2 - erfc(b / sqrt 2) / 2.
        middle = np.log(1.0 - 0.5 * np.exp(_log_erfc(np.maximum(-a, 0.0) / _SQRT2))
                        - 0.5 * np.exp(_log_erfc(np.maximum(b, 0.0) / _SQRT2)))
    log_mass = np.where(upper | lower, tail, middle)
    return np.maximum(np.nan_to_num(log_mass, nan=_LOG_TINY, neginf=_LOG_TINY), _LOG_TINY)


def _logsumexp(x: np.ndarray, axis: int) -> np.ndarray:
    peak = np.max(x, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    with np.errstate(divide="ignore"):
        return np.squeeze(peak, axis=axis) + np.log(np.sum(np.exp(x - peak), axis=axis))
