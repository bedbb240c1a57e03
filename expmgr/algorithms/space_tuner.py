"""The base of the tuners that learn from results in a parsed search space (Anneal,
Evolution, TPE): the rules they share, in one place. A result counts once its reward is
a number and its parameters fit the space (else it is skipped with a warning); every
imported point counts as tried, and those with a value are learned from; a new space
keeps the earlier results that still fit it::

    class MyTuner(SpaceTuner):
        who = "Mine"                       # in messages and the logger, nni.tuner.mine
        def _add_result(self, flat, parameters, loss): self._results.append((flat, loss))
"""
from __future__ import annotations

import logging
import math
from typing import Any, Protocol, TypeVar

from expmgr.algorithms.search_space import Key, ParameterSpec
from expmgr.algorithms.tried_points import TriedPoints, fit_to_space, imported_results, tried_in
from expmgr.algorithms.tuner import AlgorithmError, OptimizeMode, Tuner, extract_scalar_reward


class _Refittable(Protocol):
    flat: dict[Key, Any]
    parameters: dict


R = TypeVar("R", bound=_Refittable)


class SpaceTuner(Tuner):
    """Subclasses set ``who``, ``optimize_mode``, ``_specs`` (None until a space comes) and
    ``_tried``, and implement ``_add_result``."""

    who = "Tuner"
    optimize_mode: OptimizeMode
    _specs: list[ParameterSpec] | None
    _tried: TriedPoints

    def receive_trial_result(self, parameter_id: int, parameters: dict, value: Any, **kwargs: Any) -> None:
        self._tried.add(parameters)
        self._learn(parameters, extract_scalar_reward(value), f"the result of parameter {parameter_id}")

    def import_data(self, data: list[dict]) -> None:
        """Learn from ``[{"parameter": {...}, "value": ...}]``; every imported point
        counts as tried, those without a value are not learned from, and records
        that do not fit the space are skipped."""
        self._require_specs()
        for parameters in tried_in(data):
            self._tried.add(parameters)
        for number, parameters, reward in imported_results(data, self.who):
            self._learn(parameters, reward, f"imported record {number}")

    def _add_result(self, flat: dict[Key, Any], parameters: dict, loss: float) -> None:
        """Keep a result: its flat values under the space, its parameters, its loss
        (smaller is better, whatever the optimize mode)."""
        raise NotImplementedError(f"{type(self).__name__} must implement _add_result")

    def _learn(self, parameters: dict, reward: float, what: str, flat: dict[Key, Any] | None = None) -> None:
        """Add the result (``what`` names it in warnings) unless its reward is NaN or its
        parameters do not fit the space; ``flat``: its values under the space, when known."""
        if math.isnan(reward):
            logging.getLogger(f"nni.tuner.{self.who.lower()}").warning(
                "%s: ignoring a NaN final metric in %s", self.who, what)
            return
        if flat is None:
            flat = self._deformat(parameters, what)
            if flat is None:
                return
        self._add_result(flat, parameters, reward if self.optimize_mode is OptimizeMode.Minimize else -reward)

    def _refit(self, results: list[R], what: str) -> list[R]:
        """The ``results`` whose parameters fit the current space, their ``flat`` re-read under it."""
        kept = []
        for result in results:
            flat = self._deformat(result.parameters, what)
            if flat is not None:
                result.flat = flat
                kept.append(result)
        return kept

    def _require_specs(self) -> list[ParameterSpec]:
        if self._specs is None:
            raise AlgorithmError(f"{self.who} tuner: update_search_space must be called first")
        return self._specs

    def _deformat(self, parameters: Any, what: str) -> dict[Key, Any] | None:
        return fit_to_space(parameters, self._require_specs(), self.who, what)
