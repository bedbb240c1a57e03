"""The GP tuner: Bayesian optimization with a Gaussian process (NNI's ``GP`` / ``GPTuner``).

The first ``cold_start_num`` suggestions are random. After that, each suggestion fits
a Gaussian process (a Matern kernel of smoothness ``nu``, observation noise ``alpha``)
to every result so far and proposes the point that maximizes the ``utility``:

- ``ei``: the expected improvement over the best result by more than ``xi``;
- ``poi``: the probability of improving on the best result by more than ``xi``;
- ``ucb``: the predicted mean plus ``kappa`` predicted standard deviations.

The utility is scored at ``selection_num_warm_up`` random points and the best
``selection_num_starting_points`` of them are refined with L-BFGS-B (NNI starts L-BFGS-B
from as many random points instead). The model works in the unit cube, with log
types in log space (NNI models their raw values). Only numeric types and choices of
numbers are accepted, as in NNI; points already suggested or imported are not
suggested again. Needs scikit-learn (``pip install 'expmgr[gp]'``)::

    tuner = GpTuner("maximize", utility="ei", cold_start_num=10, seed=1)
"""
from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from expmgr.algorithms.arguments import require_int, require_number
from expmgr.algorithms.gaussian_process import (
    CubeModelTuner,
    GP_TYPES,
    UnitCube,
    expected_improvement,
    fit_gp,
    maximize,
    predict,
    probability_of_improvement,
    require_sklearn,
    single_threaded,
)
from expmgr.algorithms.search_space import format_parameters, make_rng, parse_search_space
from expmgr.algorithms.tried_points import TriedPoints, fit_to_space
from expmgr.algorithms.tuner import AlgorithmError, OptimizeMode

_logger = logging.getLogger("nni.tuner.gp")

UTILITIES = ("ei", "ucb", "poi")


class GpTuner(CubeModelTuner):
    """NNI's GP tuner with its classArgs and defaults, and ``seed``."""

    _label = "GP"

    def __init__(self, optimize_mode: str = "maximize", utility: str = "ei", kappa: float = 5.0,
                 xi: float = 0.0, nu: float = 2.5, alpha: float = 1e-6, cold_start_num: int = 10,
                 selection_num_warm_up: int = 100000, selection_num_starting_points: int = 250,
                 seed: int | None = None) -> None:
        self.optimize_mode = OptimizeMode.parse(optimize_mode)
        if not isinstance(utility, str) or utility.lower() not in UTILITIES:
            raise AlgorithmError(f"utility must be one of {', '.join(UTILITIES)}, got {utility!r}")
        require_number("kappa", kappa, 0)
        require_number("xi", xi, 0)
        require_number("nu", nu, 0, above=True)
        require_number("alpha", alpha, 0, above=True)
        require_int("cold_start_num", cold_start_num, 1)
        require_int("selection_num_warm_up", selection_num_warm_up, 1)
        require_int("selection_num_starting_points", selection_num_starting_points, 0)
        require_sklearn("GP")
        self.utility = utility.lower()
        self.kappa, self.xi, self.nu, self.alpha = float(kappa), float(xi), float(nu), float(alpha)
        self.cold_start_num = cold_start_num
        self.selection_num_warm_up = selection_num_warm_up
        self.selection_num_starting_points = selection_num_starting_points
        self._rng = make_rng(seed)
        self._kernel: Any = None
        """The last fitted kernel, where the next fit starts (None after a new search space)."""
        self._cube: UnitCube | None = None
        self._results: list[tuple[dict, float]] = []
        """(parameters, reward to maximize) in arrival order, kept across search spaces."""
        self._points: list[np.ndarray] = []
        self._rewards: list[float] = []
        """The results that fit the current space, as points of the cube, and their rewards."""
        self._tried = TriedPoints("GP tuner")

    # -- the Tuner interface ------------------------------------------------

    def update_search_space(self, search_space: dict) -> None:
        specs = parse_search_space(search_space)
        self._cube = UnitCube(specs, "GP", GP_TYPES)
        self._tried.update_search_space(specs)
        self._points, self._rewards, self._kernel = [], [], None
        for parameters, reward in self._results:
            self._add_point(parameters, reward)

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict:
        cube = self._require_cube()
        if len(self._rewards) < self.cold_start_num:
            return self._random(cube)
        try:
            with single_threaded():
                candidates = self._candidates(cube)
        except (np.linalg.LinAlgError, ValueError) as exc:
            _logger.warning("GP tuner: the Gaussian process could not be fitted (%s); suggesting a random point", exc)
            return self._random(cube)
        for x in candidates:
            params = format_parameters(cube.to_flat(x), cube.specs)
            if params not in self._tried:
                self._tried.add(params)
                return params
        return self._random(cube)  # every candidate was tried: an untried point, or NoMoreTrialError

    # -- helpers --------------------------------------------------------------

    def _require_cube(self) -> UnitCube:
        if self._cube is None:
            raise AlgorithmError("GP tuner: update_search_space must be called first")
        return self._cube

    def _record(self, parameters: dict, reward: float) -> None:
        if math.isnan(reward):
            _logger.warning("GP tuner: ignoring a NaN final metric")
            return
        reward = reward if self.optimize_mode is OptimizeMode.Maximize else -reward
        self._results.append((parameters, reward))
        self._add_point(parameters, reward)

    def _add_point(self, parameters: dict, reward: float) -> None:
        cube = self._require_cube()
        flat = fit_to_space(parameters, cube.specs, "GP", "a result")
        if flat is not None:
            self._points.append(cube.from_flat(flat))
            self._rewards.append(reward)

    def _candidates(self, cube: UnitCube) -> np.ndarray:
        """Points of the cube, the highest utility first, from a model of the results so far."""
        X, y = np.array(self._points), np.array(self._rewards)
        gp = fit_gp(X, y, nu=self.nu, alpha=self.alpha, seed=int(self._rng.integers(2**31)), start=self._kernel)
        self._kernel = gp.kernel_
        best = float(y.max())

        def score(points: np.ndarray) -> np.ndarray:
            mean, std = predict(gp, points)
            if self.utility == "ucb":
                return mean + self.kappa * std
            if self.utility == "poi":
                return probability_of_improvement(mean, std, best, self.xi)
            return expected_improvement(mean, std, best, self.xi)

        return maximize(score, cube, self._rng, samples=self.selection_num_warm_up,
                        starts=self.selection_num_starting_points)[0]

    def _random(self, cube: UnitCube) -> dict:
        return self._tried.fresh(lambda: format_parameters(cube.to_flat(cube.sample(1, self._rng)[0]), cube.specs),
                                 self._rng)
