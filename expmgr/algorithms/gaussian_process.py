"""What the GP and Metis tuners share: a numeric search space as the unit cube, a
Gaussian process fitted with scikit-learn, and the search for the best point of a model.

    cube = UnitCube(parse_search_space(space), "GP", GP_TYPES)
    gp = fit_gp(cube_points, rewards, nu=2.5, alpha=1e-6, restarts=25, seed=1)
    best = maximize(lambda X: gp.predict(X), cube, rng, samples=1000, starts=10)[0]

Each parameter is one coordinate in [0, 1]: linear in its range, in log space for the
log types, and a number choice by its value between the smallest and largest option.
Points are snapped to what the parameter can take (integers, multiples of q, options),
so a point of the cube is always a point of the space. scikit-learn is an optional
extra (``pip install 'expmgr[gp]'``); ``require_sklearn`` checks for it without importing
it, and it is imported only when a model is first fitted. ``CubeModelTuner`` is what both
tuners do with a result or an import.
"""
from __future__ import annotations

import importlib.util
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from expmgr.algorithms.search_space import (
    CHOICE,
    LOGUNIFORM,
    QLOGUNIFORM,
    QUNIFORM,
    RANDINT,
    UNIFORM,
    Key,
    ParameterSpec,
    is_nested_option,
)
from expmgr.algorithms.tried_points import TriedPoints, imported_results, tried_in
from expmgr.algorithms.tuner import AlgorithmError, Tuner, extract_scalar_reward

_CHUNK = 10_000
"""Points predicted at once, so that a large warm-up does not build a huge kernel matrix."""
_FD_STEP = 1e-4
"""Finite-difference step (in the unit cube) of the gradient L-BFGS-B refines points with."""
_REFINE_ITERATIONS = 50
KERNEL_RESTARTS = 2
"""Random starts of the kernel's hyper-parameter fit besides the last fit's values (NNI
fits from scratch with 25 starts for GP, 250 for Metis: seconds per suggestion)."""


def require_sklearn(who: str) -> None:
    """AlgorithmError (a config error) unless scikit-learn can be imported; imports nothing."""
    if importlib.util.find_spec("sklearn") is None:
        raise AlgorithmError(
            f"the {who} tuner needs scikit-learn, which is not installed: pip install 'expmgr[gp]'"
        )


class UnitCube:
    """A search space of numeric parameters as the unit cube; AlgorithmError naming the
    parameter when a type is not in ``allowed`` or a choice has an option that is not a number."""

    def __init__(self, specs: list[ParameterSpec], who: str, allowed: Sequence[str]) -> None:
        for spec in specs:
            if spec.type not in allowed:
                raise AlgorithmError(
                    f"{who} tuner: parameter {spec.path!r} has type {spec.type!r}; {who} takes only "
                    f"{', '.join(allowed)} (a choice of numbers)"
                )
            if spec.categorical:
                for option in spec.values:
                    if is_nested_option(option) or isinstance(option, bool) or not isinstance(option, (int, float)):
                        raise AlgorithmError(
                            f"{who} tuner: parameter {spec.path!r} is a choice with the option {option!r}; "
                            f"{who} takes only choices of numbers"
                        )
        self.specs = specs
        self.dim = len(specs)
        self._low = np.zeros(self.dim)
        self._span = np.zeros(self.dim)
        for i, spec in enumerate(specs):
            if spec.categorical:
                low, high = float(min(spec.values)), float(max(spec.values))
            else:
                low, high = spec.model_bounds()
            self._low[i], self._span[i] = low, high - low
        # each choice's options as coordinates, to snap to the nearest one
        self._positions = {i: self._to_unit(i, np.array([float(v) for v in spec.values]))
                           for i, spec in enumerate(specs) if spec.categorical}

    def _to_unit(self, i: int, z: np.ndarray) -> np.ndarray:
        if self._span[i] <= 0:
            return np.zeros_like(z)
        return np.clip((z - self._low[i]) / self._span[i], 0.0, 1.0)

    def sample(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """``count`` random points, (count, dim), each parameter drawn as NNI draws it."""
        X = rng.random((count, self.dim))
        for i, spec in enumerate(self.specs):
            if spec.categorical:
                X[:, i] = self._positions[i][rng.integers(len(spec.values), size=count)]
            elif spec.type == RANDINT:
                low, high = int(spec.values[0]), int(spec.values[1])
                X[:, i] = self._to_unit(i, rng.integers(low, high, size=count).astype(float))
        return self.snap(X)

    def snap(self, X: np.ndarray) -> np.ndarray:
        """``X`` clipped to the cube with each coordinate moved to the nearest value its parameter takes."""
        X = np.clip(np.array(X, dtype=float, ndmin=2), 0.0, 1.0)
        for i, spec in enumerate(self.specs):
            if spec.categorical:
                positions = self._positions[i]
                X[:, i] = positions[np.abs(X[:, [i]] - positions[None, :]).argmin(axis=1)]
            elif spec.q is not None:
                raw = self._raw(i, X[:, i])
                low, high = spec.bounds()
                raw = np.clip(np.round(raw / spec.q) * spec.q, low, high)
                X[:, i] = self._to_unit(i, np.log(raw) if spec.log else raw)
        return X

    def _raw(self, i: int, u: np.ndarray) -> np.ndarray:
        z = self._low[i] + u * self._span[i]
        return np.exp(z) if self.specs[i].log else z

    def to_flat(self, x: np.ndarray) -> dict[Key, Any]:
        """The flat values (an option index for a choice) of one snapped point."""
        flat: dict[Key, Any] = {}
        for i, spec in enumerate(self.specs):
            if spec.categorical:
                flat[spec.key] = int(np.abs(self._positions[i] - x[i]).argmin())
            else:
                flat[spec.key] = spec.finish(float(self._raw(i, np.array([x[i]]))[0]))
        return flat

    def from_flat(self, flat: dict[Key, Any]) -> np.ndarray:
        """The point of flat values (as ``deformat_parameters`` gives them)."""
        x = np.zeros(self.dim)
        for i, spec in enumerate(self.specs):
            value = flat[spec.key]
            if spec.categorical:
                x[i] = self._positions[i][value]
            else:
                x[i] = self._to_unit(i, np.array([spec.to_model(value)]))[0]
        return x


GP_TYPES = (CHOICE, RANDINT, UNIFORM, QUNIFORM, LOGUNIFORM, QLOGUNIFORM)
"""The parameter types NNI's GP tuner takes."""
METIS_TYPES = (CHOICE, RANDINT, UNIFORM, QUNIFORM)
"""The parameter types NNI's Metis tuner takes."""


def single_threaded() -> Any:
    """A context in which BLAS uses one thread: these models' matrices are small, and
    threads waiting on each other made suggestions several times slower on a busy machine."""
    from threadpoolctl import threadpool_limits  # a dependency of scikit-learn

    return threadpool_limits(limits=1)


def fit_gp(X: np.ndarray, y: np.ndarray, *, nu: float, alpha: float, seed: int,
           start: Any = None, keep: Any = None) -> Any:
    """A scikit-learn GaussianProcessRegressor fitted to ``X`` -> ``y``: a constant times a
    Matern kernel with one length scale per coordinate. Its hyper-parameters are fitted
    from ``start`` (an earlier model's ``kernel_``, so each fit goes on from the last) and
    from ``KERNEL_RESTARTS`` random starts; with ``keep`` (a fitted kernel) they are not fitted."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern

    if keep is not None:
        gp = GaussianProcessRegressor(kernel=keep, alpha=alpha, normalize_y=True, optimizer=None)
    else:
        kernel = start if start is not None else ConstantKernel(1.0, (1e-3, 1e3)) * Matern(
            length_scale=np.full(X.shape[1], 0.5), length_scale_bounds=(1e-3, 1e3), nu=nu)
        gp = GaussianProcessRegressor(kernel=kernel, alpha=alpha, normalize_y=True,
                                      n_restarts_optimizer=KERNEL_RESTARTS, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence notes on tiny data sets
        gp.fit(X, y)
    return gp


def predict(gp: Any, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of ``gp`` at the points ``X``, predicted in chunks."""
    means, stds = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for start in range(0, len(X), _CHUNK):
            mean, std = gp.predict(X[start:start + _CHUNK], return_std=True)
            means.append(mean)
            stds.append(np.maximum(std, 1e-12))
    return np.concatenate(means), np.concatenate(stds)


def maximize(score: Callable[[np.ndarray], np.ndarray], cube: UnitCube, rng: np.random.Generator, *,
             samples: int, starts: int) -> tuple[np.ndarray, np.ndarray]:
    """Points of the cube by ``score`` (higher first) and their scores: ``samples`` random
    points, and the best ``starts`` of them refined with L-BFGS-B (``refine_best``)."""
    return refine_best(score, cube, cube.sample(max(samples, 1), rng), starts)


def refine_best(score: Callable[[np.ndarray], np.ndarray], cube: UnitCube, X: np.ndarray,
                starts: int) -> tuple[np.ndarray, np.ndarray]:
    """The points ``X`` and the best ``starts`` of them refined together with L-BFGS-B and
    snapped, by ``score`` (higher first), with their scores."""
    values = score(X)
    if starts > 0:
        best = X[np.argsort(-values, kind="stable")[:starts]]
        refined = cube.snap(_refine(score, best))
        X = np.vstack([refined, X])
        values = np.concatenate([score(refined), values])
    order = np.argsort(-values, kind="stable")
    return X[order], values[order]


def _refine(score: Callable[[np.ndarray], np.ndarray], X0: np.ndarray) -> np.ndarray:
    """Each row of ``X0`` moved uphill on ``score`` within the cube. The rows are independent,
    so one L-BFGS-B run on all of them at once gets each row's gradient from ``dim`` + 1
    batched evaluations (forward differences, backward at the upper bound)."""
    from scipy.optimize import minimize

    count, dim = X0.shape

    def negated(v: np.ndarray) -> tuple[float, np.ndarray]:
        X = v.reshape(count, dim)
        base = score(X)
        gradient = np.zeros_like(X)
        for j in range(dim):
            step = np.where(X[:, j] + _FD_STEP <= 1.0, _FD_STEP, -_FD_STEP)
            moved = X.copy()
            moved[:, j] += step
            gradient[:, j] = (score(moved) - base) / step
        return -float(base.sum()), -gradient.ravel()

    result = minimize(negated, X0.ravel(), jac=True, method="L-BFGS-B",
                      bounds=[(0.0, 1.0)] * (count * dim), options={"maxiter": _REFINE_ITERATIONS})
    return np.clip(result.x.reshape(count, dim), 0.0, 1.0)


def expected_improvement(mean: np.ndarray, std: np.ndarray, best: float, xi: float) -> np.ndarray:
    """How much a point is expected to improve on ``best`` (larger is better) by more than ``xi``."""
    from scipy.special import ndtr

    z = (mean - best - xi) / std
    return (mean - best - xi) * ndtr(z) + std * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)


def probability_of_improvement(mean: np.ndarray, std: np.ndarray, best: float, xi: float) -> np.ndarray:
    """The probability that a point improves on ``best`` (larger is better) by more than ``xi``."""
    from scipy.special import ndtr

    return ndtr((mean - best - xi) / std)


class CubeModelTuner(Tuner):
    """The GP and Metis tuners' one rule for results: a reported or imported point counts as
    tried, and its reward (imports fitted to the space first) goes to the model (``_record``)."""

    _label = ""
    """The tuner's name in messages about imported records ("GP")."""
    _tried: TriedPoints

    def receive_trial_result(self, parameter_id: int, parameters: dict, value: Any, **kwargs: Any) -> None:
        self._tried.add(parameters)
        self._record(parameters, extract_scalar_reward(value))

    def import_data(self, data: list[dict]) -> None:
        """Learn from ``[{"parameter": {...}, "value": ...}]``; imported points count as tried."""
        self._require_cube()
        for parameters in tried_in(data):
            self._tried.add(parameters)
        for _, parameters, reward in imported_results(data, self._label):
            self._record(parameters, reward)

    def _require_cube(self) -> UnitCube:
        raise NotImplementedError

    def _record(self, parameters: dict, reward: float) -> None:
        raise NotImplementedError
