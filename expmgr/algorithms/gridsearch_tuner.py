"""The GridSearch tuner: every combination of the space's grid, once, in a fixed order.

Each parameter contributes a list of grid values, and combinations are the
cartesian product (the first parameter varies slowest; nested choices expand
recursively, only under the option that holds them):

- ``choice``: every option; ``randint``: every integer in ``[lower, upper)``;
- ``quniform`` / ``qloguniform``: every value the type can take, i.e. the
  multiples of ``q`` in ``[low, high]`` plus the clipped bounds;
- ``uniform``: 5 evenly spaced points from ``low`` to ``high``; ``loguniform``:
  5 log-spaced points; ``normal`` / ``qnormal``: ``mu + k*sigma`` for
  k = -2..2 (q-rounded); ``lognormal`` / ``qlognormal``: ``exp`` of those.

Duplicate combinations (and those given to ``import_data``) are skipped; when all
are used, ``generate_parameters`` raises ``NoMoreTrialError``.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from expmgr.algorithms.search_space import (
    CHOICE,
    QLOGUNIFORM,
    QUNIFORM,
    RANDINT,
    Key,
    ParameterSpec,
    format_parameters,
    parse_search_space,
)
from expmgr.algorithms.tuner import AlgorithmError, NoMoreTrialError, OptimizeMode, Tuner

CONTINUOUS_GRID_POINTS = 5
"""How many points a continuous (uniform, loguniform, normal, ...) parameter is tried at."""


def grid_values(spec: ParameterSpec) -> list:
    """The flat values GridSearch tries for one parameter (option indices for a choice)."""
    if spec.type == CHOICE:
        return list(range(len(spec.values)))
    if spec.type == RANDINT:
        return list(range(int(spec.values[0]), int(spec.values[1])))
    if spec.type in (QUNIFORM, QLOGUNIFORM):
        q = spec.q
        steps = range(int(np.round(spec.low / q)), int(np.round(spec.high / q)) + 1)
        raw = [k * q for k in steps]
    elif spec.normal:
        offsets = np.linspace(-2.0, 2.0, CONTINUOUS_GRID_POINTS)
        raw = [spec.mu + k * spec.sigma for k in offsets]
        if spec.log:
            raw = [math.exp(z) for z in raw]
    elif spec.log:
        raw = list(np.geomspace(spec.low, spec.high, CONTINUOUS_GRID_POINTS))
    else:
        raw = list(np.linspace(spec.low, spec.high, CONTINUOUS_GRID_POINTS))
    return list(dict.fromkeys(spec.finish(float(x)) for x in raw))


def _canonical(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


class GridSearchTuner(Tuner):
    """Tries each grid combination exactly once, in a deterministic order."""

    def __init__(self, optimize_mode: str | None = None) -> None:
        if optimize_mode is not None:
            OptimizeMode.parse(optimize_mode)
        self._combinations: Iterator[dict] | None = None
        self._used: set[str] = set()

    def update_search_space(self, search_space: dict) -> None:
        self._combinations = self._enumerate(parse_search_space(search_space))

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict:
        if self._combinations is None:
            raise AlgorithmError("GridSearch tuner: update_search_space must be called before generate_parameters")
        for params in self._combinations:
            key = _canonical(params)
            if key not in self._used:
                self._used.add(key)
                return params
        raise NoMoreTrialError("GridSearch tuner: every combination of the search space has been tried")

    def receive_trial_result(self, parameter_id: int, parameters: dict, value: Any, **kwargs: Any) -> None:
        """Grid search does not learn from results."""

    def import_data(self, data: list[dict]) -> None:
        """Mark the imported parameters as tried, so they are not generated again."""
        for record in data:
            self._used.add(_canonical(record["parameter"]))

    @staticmethod
    def _enumerate(specs: list[ParameterSpec]) -> Iterator[dict]:
        grids = [grid_values(spec) for spec in specs]
        flat: dict[Key, Any] = {}

        def walk(i: int) -> Iterator[dict]:
            if i == len(specs):
                yield format_parameters(flat, specs)
                return
            spec = specs[i]
            if not spec.is_active(flat):
                yield from walk(i + 1)
                return
            for value in grids[i]:
                flat[spec.key] = value
                yield from walk(i + 1)
            del flat[spec.key]

        return walk(0)
