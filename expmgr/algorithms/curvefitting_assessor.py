"""The Curvefitting assessor: learning-curve extrapolation after NNI's ``Curvefitting``
and Domhan et al. (2015), "Speeding up Automatic Hyperparameter Optimization of Deep
Neural Networks by Extrapolation of Learning Curves".

From ``start_step`` on, every ``gap`` steps, a few parametric learning-curve families
are fitted to the trial's intermediate results by least squares and their predictions
at step ``epoch_num`` are averaged, each weighted by how well it fits (BIC weights).
A trial whose prediction is worse than ``threshold`` times the best final result of
the completed trials stops::

    assessor = CurvefittingAssessor(epoch_num=20, start_step=6, threshold=0.95)
    assessor.assess_trial("trial-a", [0.31, 0.42, 0.47, 0.5, 0.52, 0.53])

Every family has the form ``y = c + a * g(x; theta)`` (vapor pressure excepted), so
for each ``theta`` on a grid the best ``c`` and ``a`` are a simple linear regression;
the grid is refined around its best point twice. This needs numpy only and gives the
same answer every time.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from expmgr.algorithms.arguments import require_int, require_number
from expmgr.algorithms.assessor import AssessResult, Assessor
from expmgr.algorithms.tuner import OptimizeMode, extract_scalar_reward

_logger = logging.getLogger("nni.assessor.curvefitting")

_MIN_POINTS = 5
"""Fewer finite results than this: not enough to fit the four-parameter families."""
_GRID_POINTS = {1: 41, 2: 17}
"""Grid points per nonlinear parameter, by the number of nonlinear parameters."""
_REFINEMENTS = 2


@dataclass(frozen=True)
class _Family:
    """Learning curves ``y = c + a * shape(x, *theta)`` with theta in log10 ``ranges``."""

    name: str
    shape: Callable[..., np.ndarray]
    ranges: tuple[tuple[float, float], ...]

    @property
    def n_params(self) -> int:
        return 2 + len(self.ranges)


_FAMILIES = (
    # pow3: c - a * x^-alpha
    _Family("pow3", lambda x, alpha: x ** -alpha, ((-2.0, 1.0),)),
    # log-linear: c + a * log(x)
    _Family("log_linear", lambda x: np.log(x) + 0.0 * x, ()),
    # exp3: c - a * exp(-rate * x)
    _Family("exp3", lambda x, rate: np.exp(-rate * x), ((-4.0, 1.0),)),
    # Janoschek: alpha - (alpha - beta) * exp(-kappa * x^delta)
    _Family("janoschek", lambda x, kappa, delta: np.exp(-kappa * x**delta), ((-4.0, 1.0), (-1.0, 0.5))),
    # Morgan-Mercer-Flodin: alpha - (alpha - beta) / (1 + (kappa * x)^delta)
    _Family("mmf", lambda x, kappa, delta: 1.0 / (1.0 + (kappa * x) ** delta), ((-4.0, 1.0), (-1.0, 0.7))),
)
_VAPOR_PRESSURE_PARAMS = 3


class CurvefittingAssessor(Assessor):
    """NNI's Curvefitting assessor: ``epoch_num``, ``start_step``, ``threshold``, ``gap``
    as NNI's classArgs, plus ``optimize_mode``.

    The best final result of a completed trial is its last intermediate result (the
    assessor does not see final results). For maximize, a trial stops when its predicted
    result at ``epoch_num`` is below ``best - (1 - threshold) * |best|``, which is
    ``threshold * best`` for positive results as in NNI; for minimize, when it is above
    ``best + (1 - threshold) * |best|``. Non-finite results are left out of the fit.
    """

    def __init__(
        self,
        epoch_num: int = 20,
        start_step: int = 6,
        threshold: float = 0.95,
        gap: int = 1,
        optimize_mode: str = "maximize",
    ) -> None:
        for name, value, minimum in (("epoch_num", epoch_num, 1), ("start_step", start_step, 0), ("gap", gap, 1)):
            require_int(name, value, minimum)
        require_number("threshold", threshold, 0)
        self.epoch_num = epoch_num
        self.start_step = start_step
        self.threshold = float(threshold)
        self.gap = gap
        self.optimize_mode = OptimizeMode.parse(optimize_mode)
        self._best: float | None = None
        """The best final result of the completed trials, larger is better."""
        self._last_value: dict[str, float] = {}
        self._last_judged: dict[str, int] = {}

    def assess_trial(self, trial_job_id: str, trial_history: list) -> AssessResult:
        values = [self._signed(value) for value in trial_history]
        step = len(values)
        if values:
            self._last_value[trial_job_id] = values[-1]
        last = self._last_judged.get(trial_job_id)
        if last is not None and step < last:
            last = None  # a new attempt started over
        if self._best is None or step < self.start_step or (last is not None and step - last < self.gap):
            return AssessResult.Good
        self._last_judged[trial_job_id] = step
        predicted = predict(values, self.epoch_num)
        if predicted is None:
            return AssessResult.Good
        cutoff = self._best - (1.0 - self.threshold) * abs(self._best)
        if predicted < cutoff:
            _logger.debug("trial %s at step %d: predicted %g at step %d, below %g",
                          trial_job_id, step, self._sign * predicted, self.epoch_num, self._sign * cutoff)
            return AssessResult.Bad
        return AssessResult.Good

    def trial_end(self, trial_job_id: str, success: bool, **kwargs: Any) -> None:
        self._last_judged.pop(trial_job_id, None)
        final = self._last_value.pop(trial_job_id, None)
        if success and final is not None and math.isfinite(final):
            self._best = final if self._best is None else max(self._best, final)

    @property
    def _sign(self) -> float:
        return 1.0 if self.optimize_mode is OptimizeMode.Maximize else -1.0

    def _signed(self, value: Any) -> float:
        """The result as a number where larger is better."""
        return self._sign * extract_scalar_reward(value)


def predict(history: list[float], epoch_num: int) -> float | None:
    """The value at step ``epoch_num`` of the curve whose steps 1, 2, ... are ``history``:
    the BIC-weighted average of the fitted families' predictions (None with too few
    finite points)."""
    steps = np.arange(1, len(history) + 1, dtype=float)
    y = np.asarray(history, dtype=float)
    finite = np.isfinite(y)
    x, y = steps[finite], y[finite]
    n = len(y)
    if n < _MIN_POINTS:
        return None
    candidates = [_fit_family(family, x, y, float(epoch_num)) for family in _FAMILIES if n > family.n_params]
    if n > _VAPOR_PRESSURE_PARAMS:
        candidates.append(_fit_vapor_pressure(x, y, float(epoch_num)))
    fits = [fit for fit in candidates if fit is not None]
    if not fits:
        return None
    sse = np.array([fit[0] for fit in fits])
    n_params = np.array([fit[1] for fit in fits])
    predictions = np.array([fit[2] for fit in fits])
    floor = 1e-12 * float(np.mean(y * y)) + 1e-300  # a perfect fit is not infinitely better
    bic = n * np.log(np.maximum(sse / n, floor)) + n_params * math.log(n)
    weights = np.exp(-0.5 * (bic - bic.min()))
    return float(np.sum(weights * predictions) / np.sum(weights))


def _fit_family(family: _Family, x: np.ndarray, y: np.ndarray, target: float) -> tuple[float, int, float] | None:
    """(sum of squared errors, number of parameters, prediction at ``target``) of the
    family's best fit, or None if nothing on the grid fits."""
    dims = len(family.ranges)
    lows = np.array([low for low, _ in family.ranges])
    highs = np.array([high for _, high in family.ranges])
    count = _GRID_POINTS.get(dims, 1)
    best_theta, best_sse, best_coef = np.empty(0), math.inf, (0.0, 0.0)
    los, his = lows.copy(), highs.copy()
    with np.errstate(all="ignore"):
        for _ in range(_REFINEMENTS + 1 if dims else 1):
            thetas = np.empty((1, 0))
            if dims:
                axes = [np.linspace(lo, hi, count) for lo, hi in zip(los, his)]
                thetas = 10.0 ** np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, dims)
            g = family.shape(x[None, :], *(thetas[:, i:i + 1] for i in range(dims)))
            g = np.broadcast_to(g, (len(thetas), len(x)))
            c, a, sse = _regress(g, y)
            index = int(np.argmin(sse))
            if not sse[index] < best_sse:
                break
            best_theta, best_sse, best_coef = thetas[index], float(sse[index]), (c[index], a[index])
            width = (his - los) / max(count - 1, 1)
            centre = np.log10(best_theta)
            los, his = np.maximum(lows, centre - width), np.minimum(highs, centre + width)
        if not math.isfinite(best_sse):
            return None
        at_target = family.shape(np.array([target]), *best_theta)
        prediction = float(best_coef[0] + best_coef[1] * np.asarray(at_target).reshape(-1)[0])
    if not math.isfinite(prediction):
        return None
    return best_sse, family.n_params, prediction


def _regress(g: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of ``g``: the least-squares ``c``, ``a`` of ``y ~ c + a * g`` and the
    squared error (infinite for rows with non-finite entries)."""
    valid = np.all(np.isfinite(g), axis=1)
    g = np.where(valid[:, None], g, 0.0)
    g_mean = g.mean(axis=1)
    y_mean = y.mean()
    gc = g - g_mean[:, None]
    yc = y - y_mean
    sxx = np.einsum("ij,ij->i", gc, gc)
    sxy = gc @ yc
    flat = sxx <= 1e-12 * np.maximum(np.einsum("ij,ij->i", g, g), 1e-300)
    a = np.where(flat, 0.0, sxy / np.where(flat, 1.0, sxx))
    c = y_mean - a * g_mean
    residuals = yc[None, :] - a[:, None] * gc
    sse = np.einsum("ij,ij->i", residuals, residuals)
    sse = np.where(valid & np.isfinite(sse), sse, math.inf)
    return c, a, sse


def _fit_vapor_pressure(x: np.ndarray, y: np.ndarray, target: float) -> tuple[float, int, float] | None:
    """Vapor pressure, ``y = exp(a + b / x + c * log(x))``, fitted to ``log|y|`` (all
    results must have one sign and none be zero)."""
    sign = 1.0 if np.all(y > 0) else -1.0 if np.all(y < 0) else 0.0
    if sign == 0.0:
        return None
    design = np.column_stack([np.ones_like(x), 1.0 / x, np.log(x)])
    coef, *_ = np.linalg.lstsq(design, np.log(sign * y), rcond=None)
    with np.errstate(all="ignore"):
        fitted = sign * np.exp(design @ coef)
        prediction = float(sign * np.exp(coef[0] + coef[1] / target + coef[2] * math.log(target)))
        sse = float(np.sum((fitted - y) ** 2))
    if not (math.isfinite(prediction) and math.isfinite(sse)):
        return None
    return sse, _VAPOR_PRESSURE_PARAMS, prediction
