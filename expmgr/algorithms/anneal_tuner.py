"""The Anneal tuner: random search that closes in on the best results, after
hyperopt's ``anneal`` algorithm (NNI's ``Anneal``).

Each suggestion starts from one earlier result, picked among the best: the
results are ranked by metric (ties: the more recent first) and the rank is drawn
from a geometric distribution with mean ``AVG_BEST_IDX`` (2), so the best result
is the most likely start, the runner-up the next, and so on. Every parameter is
then drawn near that result's value, within a neighbourhood that shrinks as the
parameter's results accumulate, by ``1 / (1 + SHRINK_COEF * n)`` (hyperopt's
schedule, ``SHRINK_COEF`` = 0.1):

- ``uniform`` / ``quniform``: uniform in a window of that fraction of the range,
  centred on the value and shifted to stay within the bounds; ``loguniform`` /
  ``qloguniform`` the same in log space;
- ``normal`` / ``lognormal`` (and q forms): a normal around the value (its log)
  whose sigma is the space's sigma times that fraction;
- ``choice`` / ``randint``: the value is kept with probability ``1 - fraction``,
  else drawn again at random (so it is kept more and more often).

q types are rounded and everything is clipped to its bounds. A parameter inside
a nested choice is drawn only when its option is chosen; if the starting result
had chosen another option, the best-ranked result that chose this one serves as
the start for that parameter's children (hyperopt's runner-up). Until a
parameter has a result, it is drawn at random, so the first suggestion is random
and the early ones nearly so (the window still spans almost the whole range).
Suggestions already handed out or imported are not repeated::

    tuner = AnnealTuner("maximize", seed=1)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from expmgr.algorithms.space_tuner import SpaceTuner
from expmgr.algorithms.tried_points import TriedPoints
from expmgr.algorithms.search_space import (
    NumpyDraws,
    CHOICE,
    RANDINT,
    Key,
    ParameterSpec,
    format_parameters,
    parse_search_space,
)
from expmgr.algorithms.tuner import OptimizeMode


AVG_BEST_IDX = 2.0
"""Mean rank (0 = the best) of the result a suggestion starts from (hyperopt's default)."""
SHRINK_COEF = 0.1
"""After n results of a parameter its neighbourhood is ``1 / (1 + SHRINK_COEF * n)`` of its range."""


@dataclass
class _Result:
    flat: dict[Key, Any]
    """Flat values of the active parameters (option index for a choice)."""
    parameters: dict
    """The same in NNI's shape, to re-read under a new search space."""
    loss: float
    """Smaller is better, whatever the optimize mode."""
    order: int
    """Arrival number: larger is more recent."""


class AnnealTuner(NumpyDraws, SpaceTuner):
    """NNI's Anneal tuner: ``optimize_mode`` and ``seed`` as classArgs."""

    who = "Anneal"

    def __init__(self, optimize_mode: str = "minimize", seed: int | None = None) -> None:
        self.optimize_mode = OptimizeMode.parse(optimize_mode)
        self._keep_seed(seed)
        self._specs: list[ParameterSpec] | None = None
        self._results: list[_Result] = []
        self._tried = TriedPoints("Anneal tuner")

    # -- the Tuner interface ------------------------------------------------

    def update_search_space(self, search_space: dict) -> None:
        """Take a new space; earlier results whose parameters fit it are kept."""
        self._specs = parse_search_space(search_space)
        self._tried.update_search_space(self._specs)
        self._results = self._refit(self._results, "an earlier result")

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict:
        specs = self._require_specs()
        return self._tried.fresh(lambda: format_parameters(self._propose(specs), specs), self._rng)

    def _add_result(self, flat: dict[Key, Any], parameters: dict, loss: float) -> None:
        self._results.append(_Result(flat, parameters, loss, len(self._results)))

    # -- the algorithm ----------------------------------------------------------

    def _propose(self, specs: list[ParameterSpec]) -> dict[Key, Any]:
        flat: dict[Key, Any] = {}
        starts: list[_Result] = []  # results chosen so far, best-ranked first
        for spec in specs:
            if not spec.is_active(flat):
                continue
            observed = [r for r in self._results if spec.key in r.flat]
            if not observed:
                flat[spec.key] = spec.sample(self._rng)
                continue
            start = next((r for r in starts if spec.key in r.flat), None)
            if start is None:
                start = self._pick_start(observed)
                starts.append(start)
            shrink = 1.0 / (1.0 + SHRINK_COEF * len(observed))
            flat[spec.key] = self._near(spec, start.flat[spec.key], shrink)
        return flat

    def _pick_start(self, observed: list[_Result]) -> _Result:
        ranked = sorted(observed, key=lambda r: (r.loss, -r.order))
        rank = int(self._rng.geometric(1.0 / AVG_BEST_IDX)) - 1
        return ranked[min(rank, len(ranked) - 1)]

    def _near(self, spec: ParameterSpec, value: Any, shrink: float) -> Any:
        """A draw of ``spec`` concentrated around ``value``; ``shrink`` in (0, 1] scales the neighbourhood."""
        if spec.type in (CHOICE, RANDINT):
            return value if self._rng.random() >= shrink else spec.sample(self._rng)
        centre = spec.to_model(value)
        if spec.normal:
            z = self._rng.normal(centre, spec.sigma * shrink)
        else:
            lo, hi = spec.model_bounds()
            half = 0.5 * (hi - lo) * shrink
            centre = min(max(centre, lo + half), hi - half)
            z = self._rng.uniform(centre - half, centre + half)
        return spec.from_model(z)
