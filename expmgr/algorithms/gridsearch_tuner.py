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
are used, ``generate_parameters`` raises ``NoMoreTrialError``. A space of more than
``GRID_LIMIT`` (1,000,000) combinations is refused by ``update_search_space``.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from expmgr.algorithms.search_space import (
    GRID_LIMIT,
    Key,
    ParameterSpec,
    format_parameters,
    grid_size,
    grid_values,
    parse_search_space,
)
from expmgr.algorithms.tried_points import TriedPoints, tried_in
from expmgr.algorithms.tuner import AlgorithmError, NoMoreTrialError, OptimizeMode, Tuner


class GridSearchTuner(Tuner):
    """Tries each grid combination exactly once, in a deterministic order."""

    ask_ahead_safe = True  # the order is fixed; a combination taken back comes next again

    def __init__(self, optimize_mode: str | None = None) -> None:
        if optimize_mode is not None:
            OptimizeMode.parse(optimize_mode)
        self._combinations: Iterator[dict] | None = None
        self._taken_back: list[dict] = []
        """Combinations generated and then taken back: they come before the rest, latest first."""
        self._tried = TriedPoints("GridSearch tuner")

    def update_search_space(self, search_space: dict) -> None:
        specs = parse_search_space(search_space)
        if grid_size(specs) > GRID_LIMIT:
            raise AlgorithmError(f"GridSearch tuner: the grid has more than {GRID_LIMIT:,} combinations "
                                 "(the limit); narrow the randint and q ranges, give fewer choices, "
                                 "or use a sampling tuner such as Random or TPE")
        self._tried.update_search_space(specs)
        self._combinations = self._enumerate(specs)
        self._taken_back.clear()  # the new enumeration starts over: it has them where they belong

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict:
        if self._combinations is None:
            raise AlgorithmError("GridSearch tuner: update_search_space must be called before generate_parameters")
        while self._taken_back:
            params = self._taken_back.pop()
            if params not in self._tried:
                self._tried.add(params)
                return params
        for params in self._combinations:
            if params not in self._tried:
                self._tried.add(params)
                return params
        raise NoMoreTrialError("GridSearch tuner: every combination of the search space has been tried")

    def receive_trial_result(self, parameter_id: int, parameters: dict, value: Any, **kwargs: Any) -> None:
        """Grid search does not learn from results."""

    def take_back(self, parameters: dict) -> None:
        """The combination is the next one generated again (unless it is imported meanwhile)."""
        self._tried.discard(parameters)
        self._taken_back.append(parameters)

    def import_data(self, data: list[dict]) -> None:
        """Mark the imported parameters as tried, so they are not generated again
        (compared by value: an imported ``4`` is the grid's ``4.0``)."""
        for parameters in tried_in(data):
            self._tried.add(parameters)

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
