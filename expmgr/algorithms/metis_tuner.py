"""The Metis tuner: a Gaussian process that weighs exploring, exploiting and re-sampling
(NNI's ``Metis`` / ``MetisTuner``, after Li et al., "Metis: Robustly tuning tail
latencies of cloud systems", 2018).

The first ``cold_start_num`` suggestions are random. After that, each suggestion fits
a Gaussian process to the results (the median of each point's results, as a loss) and:

1. finds the point the model predicts best, the *current optimum*: the model's mean is
   scored at ``selection_num_starting_points`` random points and the best few refined;
2. unless ``no_candidates``, gathers candidates: the point where the model is least sure
   (largest predicted deviation: *exploration*); once 12 results are in, the point most
   likely under a Gaussian mixture of the best third of the results against one of the
   rest (*exploitation*); and, unless ``no_resampling``, once 50 points have results, the
   points whose result lies outside the 98% band of a model fitted without them
   (*re-sampling*, each point at most three times);
3. for each candidate, refits the model as if it had given its predicted value plus or
   minus 1.96 deviations, and keeps the candidate that would lower the predicted
   optimum most (the *information gain*);
4. suggests that candidate with probability ``exploration_probability``, or when the
   current optimum has been tried already; the current optimum otherwise. With no
   candidate, a random untried point.

Only ``choice`` (of numbers), ``randint``, ``uniform`` and ``quniform`` are accepted, as in
NNI. Needs scikit-learn (``pip install 'expmgr[gp]'``)::

    tuner = MetisTuner("minimize", cold_start_num=10, seed=1)
"""
from __future__ import annotations

import logging
import math
import statistics
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from expmgr.algorithms.arguments import require_int
from expmgr.algorithms.gaussian_process import (
    CubeModelTuner,
    METIS_TYPES,
    UnitCube,
    fit_gp,
    maximize,
    predict,
    refine_best,
    require_sklearn,
    single_threaded,
)
from expmgr.algorithms.search_space import format_parameters, make_rng, parse_search_space
from expmgr.algorithms.tried_points import TriedPoints, fit_to_space
from expmgr.algorithms.tuner import AlgorithmError, OptimizeMode

_logger = logging.getLogger("nni.tuner.metis")

NU = 1.5
"""Smoothness of the Matern kernel (NNI's Metis)."""
ALPHA = 1e-8
"""Observation noise added to the kernel's diagonal, for numerical stability only."""
REFINED = 5
"""How many of the best random points L-BFGS-B refines when Metis looks for an optimum."""
EXPLOITATION_AFTER = 12
"""Results (re-samples included) needed before the Gaussian-mixture candidate."""
RESAMPLING_AFTER = 50
"""Distinct points with results needed before re-sampling candidates."""
GOOD_FRACTION = 0.34
"""Share of the points that make the 'good' mixture."""
MAX_RESAMPLES = 3
"""Results one point may have before it is no longer a re-sampling candidate."""
OUTLIER_Z = 2.33
"""A result further than this many predicted deviations from the model without it is an outlier (98%)."""
GAIN_Z = 1.96
"""A candidate's outcomes imagined in the information gain: its mean plus or minus this many deviations."""


@dataclass
class _Point:
    x: np.ndarray
    """The point in the unit cube."""
    losses: list[float] = field(default_factory=list)
    """Its results as losses (smaller is better), in arrival order."""

    @property
    def loss(self) -> float:
        return statistics.median(self.losses)


@dataclass
class _Candidate:
    x: np.ndarray
    mean: float
    std: float
    reason: str


class MetisTuner(CubeModelTuner):
    """NNI's Metis tuner with its classArgs and defaults, and ``seed``."""

    _label = "Metis"

    def __init__(self, optimize_mode: str = "maximize", no_resampling: bool = True, no_candidates: bool = False,
                 selection_num_starting_points: int = 600, cold_start_num: int = 10,
                 exploration_probability: float = 0.9, seed: int | None = None) -> None:
        self.optimize_mode = OptimizeMode.parse(optimize_mode)
        for name, value in (("no_resampling", no_resampling), ("no_candidates", no_candidates)):
            if not isinstance(value, bool):
                raise AlgorithmError(f"{name} must be true or false, got {value!r}")
        require_int("selection_num_starting_points", selection_num_starting_points, 1)
        require_int("cold_start_num", cold_start_num, 1)
        if (isinstance(exploration_probability, bool) or not isinstance(exploration_probability, (int, float))
                or not 0 <= exploration_probability <= 1):
            raise AlgorithmError(f"exploration_probability must be a number in [0, 1], got {exploration_probability!r}")
        require_sklearn("Metis")
        self.no_resampling = no_resampling
        self.no_candidates = no_candidates
        self.selection_num_starting_points = selection_num_starting_points
        self.cold_start_num = cold_start_num
        self.exploration_probability = float(exploration_probability)
        self._rng = make_rng(seed)
        self._cube: UnitCube | None = None
        self._results: list[tuple[dict, float]] = []
        """(parameters, loss) in arrival order, kept across search spaces."""
        self._points: dict[tuple, _Point] = {}
        """The results that fit the current space, by point."""
        self._kernel: Any = None
        self._tried = TriedPoints("Metis tuner")

    # -- the Tuner interface ------------------------------------------------

    def update_search_space(self, search_space: dict) -> None:
        specs = parse_search_space(search_space)
        self._cube = UnitCube(specs, "Metis", METIS_TYPES)
        self._tried.update_search_space(specs)
        self._points, self._kernel = {}, None
        for parameters, loss in self._results:
            self._add_point(parameters, loss)

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict:
        cube = self._require_cube()
        if len(self._points) < self.cold_start_num:
            return self._random(cube)
        try:
            with warnings.catch_warnings(), single_threaded():
                warnings.simplefilter("ignore")
                x = self._select(cube)
        except (np.linalg.LinAlgError, ValueError) as exc:
            _logger.warning("Metis tuner: the models could not be fitted (%s); suggesting a random point", exc)
            return self._random(cube)
        if x is None:
            return self._random(cube)
        params = format_parameters(cube.to_flat(x), cube.specs)
        self._tried.add(params)
        return params

    # -- the algorithm ----------------------------------------------------------

    def _select(self, cube: UnitCube) -> np.ndarray | None:
        points = list(self._points.values())
        X = np.array([p.x for p in points])
        y = np.array([p.loss for p in points])
        gp = fit_gp(X, y, nu=NU, alpha=ALPHA, seed=self._seed(), start=self._kernel)
        self._kernel = gp.kernel_
        # one set of random points for every search of an optimum, so that they compare
        search = cube.sample(self.selection_num_starting_points, self._rng)
        optimum, optimum_mean = self._lowest_mean(gp, cube, search)

        candidate = None
        if not self.no_candidates:
            candidates = self._exploration(gp, cube) + self._exploitation(gp, cube, points)
            if not self.no_resampling and len(points) >= RESAMPLING_AFTER:
                candidates += self._resampling(gp, points)
            candidate = self._most_informative(candidates, points, cube, search, optimum_mean)
        optimum_params = format_parameters(cube.to_flat(optimum), cube.specs)
        if optimum_params in self._tried or self._rng.random() <= self.exploration_probability:
            if candidate is not None:
                _logger.info("Metis tuner: suggesting the %s candidate", candidate.reason)
                return candidate.x
            return None
        return optimum

    def _lowest_mean(self, gp: Any, cube: UnitCube, search: np.ndarray) -> tuple[np.ndarray, float]:
        def score(points: np.ndarray) -> np.ndarray:
            return -predict(gp, points)[0]

        ranked, values = refine_best(score, cube, search, REFINED)
        return ranked[0], -float(values[0])

    def _exploration(self, gp: Any, cube: UnitCube) -> list[_Candidate]:
        candidates, _ = maximize(lambda points: predict(gp, points)[1], cube, self._rng,
                                 samples=self.selection_num_starting_points, starts=REFINED)
        return self._first_untried(gp, cube, candidates, "exploration")

    def _exploitation(self, gp: Any, cube: UnitCube, points: list[_Point]) -> list[_Candidate]:
        if sum(len(p.losses) for p in points) < EXPLOITATION_AFTER:
            return []
        from sklearn.mixture import BayesianGaussianMixture

        ranked = sorted(points, key=lambda p: p.loss)
        good_count = max(1, int(len(ranked) * GOOD_FRACTION))
        good = np.array([p.x for p in ranked[:good_count]])
        bad = np.array([p.x for p in ranked[good_count:]])
        if len(good) < 2 or len(bad) < 2:
            return []
        mixtures = []
        for members in (good, bad):
            mixture = BayesianGaussianMixture(n_components=max(1, min(len(members) - 1, 5)),
                                              random_state=self._seed(), reg_covar=1e-4)
            try:
                mixture.fit(members)
            except ValueError as exc:   # collapsed points: no exploitation candidate this time
                _logger.debug("Metis tuner: no Gaussian mixture: %s", exc)
                return []
            mixtures.append(mixture)
        good_mixture, bad_mixture = mixtures
        drawn = cube.snap(good_mixture.sample(self.selection_num_starting_points)[0])
        drawn = np.vstack([drawn, cube.sample(self.selection_num_starting_points, self._rng)])
        ratio = good_mixture.score_samples(drawn) - bad_mixture.score_samples(drawn)
        return self._first_untried(gp, cube, drawn[np.argsort(-ratio, kind="stable")], "exploitation")

    def _resampling(self, gp: Any, points: list[_Point]) -> list[_Candidate]:
        candidates = []
        X = np.array([p.x for p in points])
        y = np.array([p.loss for p in points])
        for i, point in enumerate(points):
            if len(point.losses) >= MAX_RESAMPLES:
                continue
            others = np.arange(len(points)) != i
            without = fit_gp(X[others], y[others], nu=NU, alpha=ALPHA, seed=0, keep=gp.kernel_)
            mean, std = predict(without, point.x[None, :])
            if abs(point.loss - mean[0]) > OUTLIER_Z * std[0]:
                candidates.append(_Candidate(point.x, float(mean[0]), float(std[0]), "re-sampling"))
        return candidates

    def _most_informative(self, candidates: list[_Candidate], points: list[_Point], cube: UnitCube,
                          search: np.ndarray, optimum_mean: float) -> _Candidate | None:
        """The candidate whose imagined outcome lowers the predicted optimum most, if any lowers it."""
        best, best_gain = None, 0.0
        for candidate in candidates:
            lowest = math.inf
            for outcome in (candidate.mean + GAIN_Z * candidate.std, candidate.mean - GAIN_Z * candidate.std):
                X, y = self._imagined(points, candidate.x, outcome)
                imagined = fit_gp(X, y, nu=NU, alpha=ALPHA, seed=0, keep=self._kernel)
                lowest = min(lowest, float(predict(imagined, np.vstack([search, candidate.x]))[0].min()))
            gain = lowest - optimum_mean
            if gain < best_gain:
                best, best_gain = candidate, gain
        return best

    @staticmethod
    def _imagined(points: list[_Point], x: np.ndarray, outcome: float) -> tuple[np.ndarray, np.ndarray]:
        """The data with ``outcome`` observed at ``x`` too."""
        X = [p.x for p in points]
        y = []
        found = False
        for p in points:
            if np.array_equal(p.x, x):
                y.append(statistics.median(p.losses + [outcome]))
                found = True
            else:
                y.append(p.loss)
        if not found:
            X.append(x)
            y.append(outcome)
        return np.array(X), np.array(y)

    def _first_untried(self, gp: Any, cube: UnitCube, ranked: np.ndarray, reason: str) -> list[_Candidate]:
        for x in ranked:
            if format_parameters(cube.to_flat(x), cube.specs) not in self._tried:
                mean, std = predict(gp, x[None, :])
                return [_Candidate(x, float(mean[0]), float(std[0]), reason)]
        return []

    # -- bookkeeping ----------------------------------------------------------

    def _require_cube(self) -> UnitCube:
        if self._cube is None:
            raise AlgorithmError("Metis tuner: update_search_space must be called first")
        return self._cube

    def _seed(self) -> int:
        return int(self._rng.integers(2**31))

    def _record(self, parameters: dict, reward: float) -> None:
        if math.isnan(reward):
            _logger.warning("Metis tuner: ignoring a NaN final metric")
            return
        loss = -reward if self.optimize_mode is OptimizeMode.Maximize else reward
        self._results.append((parameters, loss))
        self._add_point(parameters, loss)

    def _add_point(self, parameters: dict, loss: float) -> None:
        cube = self._require_cube()
        flat = fit_to_space(parameters, cube.specs, "Metis", "a result")
        if flat is None:
            return
        x = cube.from_flat(flat)
        self._points.setdefault(tuple(x), _Point(x)).losses.append(loss)

    def _random(self, cube: UnitCube) -> dict:
        return self._tried.fresh(lambda: format_parameters(cube.to_flat(cube.sample(1, self._rng)[0]), cube.specs),
                                 self._rng)

