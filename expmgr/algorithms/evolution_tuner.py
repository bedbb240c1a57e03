"""The Evolution tuner: regularized (aging) tournament evolution, NNI's ``Evolution``
(after Real et al., 2019, "Regularized Evolution for Image Classifier Architecture Search").

Until ``population_size`` results exist, suggestions are random. From then on,
each suggestion is a child of one member of the population:

- tournament: ``population_size // 2`` members are sampled (at least 2) and the
  best of them is the parent;
- mutation: one of the parent's active parameters, chosen at random, changes.
  A choice or randint takes another of its values; a numeric parameter usually
  (``LOCAL_MOVE``, 80 %) takes a small normal step (``LOCAL_STEP``, a tenth of its
  range, in log space for log types, mirrored at the bounds, then q-rounded),
  otherwise it is drawn afresh from the space. When a nested choice switches to
  another option, that option's parameters are drawn at random.

Every result joins the population, and the oldest member leaves once there are
more than ``population_size``. Aging rather than removing the worst is the
"regularized" part: a member lives only as long as its line keeps producing good
children, so one lucky result of a noisy trial cannot steer the search forever;
in our benchmarks at 100 trials (Branin, Hartmann6, Rosenbrock, a mixed space)
removing the worst was slightly ahead on three of four noise-free objectives and
aging on three of four noisy ones. The tuner never waits for pending trials:
suggestions come from the results received so far, and points already handed
out or imported are not suggested again::

    tuner = EvolutionTuner("maximize", population_size=32, seed=1)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from expmgr.algorithms.arguments import require_int
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
    sample,
)
from expmgr.algorithms.tuner import OptimizeMode


TOURNAMENT_SHARE = 0.5
"""A tournament samples this share of the population (at least 2 members)."""
LOCAL_MOVE = 0.8
"""Chance that a numeric mutation is a small step rather than a fresh random draw."""
LOCAL_STEP = 0.1
"""A small step's standard deviation, as a share of the parameter's range (in log space for
log types; normal types count 4 sigma as their range)."""


@dataclass
class _Member:
    flat: dict[Key, Any]
    """Flat values of the active parameters (option index for a choice)."""
    parameters: dict
    """The same in NNI's shape, to re-read under a new search space."""
    loss: float
    """Smaller is better, whatever the optimize mode."""
    birth: int
    """Arrival number: larger is younger."""


class EvolutionTuner(NumpyDraws, SpaceTuner):
    """NNI's Evolution tuner: ``optimize_mode``, ``population_size`` and ``seed`` as classArgs.
    Results, imported ones too, join the population in order (as if they had just arrived)."""

    who = "Evolution"

    def __init__(self, optimize_mode: str = "maximize", population_size: int = 32, seed: int | None = None) -> None:
        self.optimize_mode = OptimizeMode.parse(optimize_mode)
        require_int("population_size", population_size, 2)
        self.population_size = population_size
        self._keep_seed(seed)
        self._space: dict | None = None
        self._specs: list[ParameterSpec] | None = None
        self._population: list[_Member] = []
        self._births = 0
        self._tried = TriedPoints("Evolution tuner")

    def update_search_space(self, search_space: dict) -> None:
        """Take a new space; members whose parameters fit it stay in the population."""
        self._space = search_space
        self._specs = parse_search_space(search_space)
        self._tried.update_search_space(self._specs)
        self._population = self._refit(self._population, "a member of the population")

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict:
        specs, space = self._require_specs(), self._space
        assert space is not None  # set together with the specs
        if len(self._population) < self.population_size:
            return self._tried.fresh(lambda: sample(space, self._rng), self._rng)
        return self._tried.fresh(
            lambda: format_parameters(self._mutate(specs, self._tournament().flat), specs), self._rng
        )

    def _add_result(self, flat: dict[Key, Any], parameters: dict, loss: float) -> None:
        self._population.append(_Member(flat, parameters, loss, self._births))
        self._births += 1
        while len(self._population) > self.population_size:
            del self._population[0]  # the oldest

    def _tournament(self) -> _Member:
        size = min(len(self._population), max(2, int(TOURNAMENT_SHARE * self.population_size)))
        picks = self._rng.choice(len(self._population), size=size, replace=False)
        return min((self._population[i] for i in picks), key=lambda m: (m.loss, -m.birth))

    def _mutate(self, specs: list[ParameterSpec], flat: dict[Key, Any]) -> dict[Key, Any]:
        """``flat`` with one active parameter changed (and a new option's children drawn)."""
        active = [spec for spec in specs if spec.key in flat]
        if not active:
            return dict(flat)
        target = active[int(self._rng.integers(len(active)))]
        new_value = self._mutated_value(target, flat[target.key])
        child: dict[Key, Any] = {}
        for spec in specs:
            if not spec.is_active(child):
                continue
            if spec.key == target.key:
                child[spec.key] = new_value
            elif spec.key in flat:
                child[spec.key] = flat[spec.key]
            else:
                child[spec.key] = spec.sample(self._rng)
        return child

    def _mutated_value(self, spec: ParameterSpec, value: Any) -> Any:
        """A new value for one parameter: another option of a choice or randint; for a
        numeric type, usually a small step from ``value``, sometimes a fresh random draw."""
        if spec.type in (CHOICE, RANDINT):
            lower = int(spec.values[0]) if spec.type == RANDINT else 0
            size = int(spec.values[1]) - lower if spec.type == RANDINT else len(spec.values)
            if size < 2:
                return value
            return lower + (value - lower + 1 + int(self._rng.integers(size - 1))) % size
        if self._rng.random() >= LOCAL_MOVE:
            return spec.sample(self._rng)
        centre = spec.to_model(value)
        if spec.normal:
            z = self._rng.normal(centre, LOCAL_STEP * 4 * spec.sigma)
        else:
            lo, hi = spec.model_bounds()
            z = _reflect(self._rng.normal(centre, LOCAL_STEP * (hi - lo)), lo, hi)
        return spec.from_model(z)


def _reflect(z: float, lo: float, hi: float) -> float:
    """``z`` mirrored at the bounds back into [lo, hi]."""
    width = hi - lo
    if width <= 0:
        return lo
    z = (z - lo) % (2 * width)
    return lo + (2 * width - z if z > width else z)
