"""The Random tuner: every trial gets independent random parameters from the space.

NNI's ``Random`` tuner; ``seed`` makes the sequence repeatable, and
``optimize_mode`` is accepted (and checked) for config compatibility but unused.
It never suggests the same parameters twice, nor parameters given to
``import_data`` (see ``TriedPoints``, which the model-based tuners use too); when a finite space is
used up, ``generate_parameters`` raises ``NoMoreTrialError``.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from expmgr.algorithms.gridsearch_tuner import grid_values
from expmgr.algorithms.search_space import (
    CHOICE,
    QLOGUNIFORM,
    QUNIFORM,
    RANDINT,
    Key,
    ParameterSpec,
    deformat_parameters,
    format_parameters,
    make_rng,
    parse_search_space,
    sample,
)
from expmgr.algorithms.tuner import AlgorithmError, NoMoreTrialError, OptimizeMode, Tuner

_logger = logging.getLogger("nni.tuner.random")

MAX_RESAMPLES = 100
"""Draws that may hit already-tried parameters before the untried ones are listed."""
LISTING_LIMIT = 100_000
"""Largest finite space whose untried points are listed when resampling keeps hitting tried ones."""

_FINITE_TYPES = {CHOICE, RANDINT, QUNIFORM, QLOGUNIFORM}


class _Unlisted(Exception):
    """A space, or the rest of one, that is infinite or larger than ``LISTING_LIMIT``."""


class TriedPoints:
    """The parameters already suggested or imported, so that a tuner does not suggest them again.

    Points are compared by value under the current search space (``4`` and ``4.0``
    are the same point; a choice is its option), so imported parameters match
    generated ones. ``fresh`` draws until it finds an untried point; ``exhausted``
    tells a model-based tuner whether a partly chosen point can still be completed
    into an untried one.
    """

    def __init__(self, who: str) -> None:
        self._who = who
        self._specs: list[ParameterSpec] | None = None
        self._points: list[dict] = []
        self._keys: set[frozenset] = set()

    def update_search_space(self, specs: list[ParameterSpec]) -> None:
        """Compare points under ``specs`` from now on (tried points that do not fit are forgotten)."""
        self._specs = specs
        self._keys = {key for key in map(self._key, self._points) if key is not None}

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, params: dict) -> bool:
        return self._key(params) in self._keys

    def add(self, params: Any) -> None:
        """Remember ``params`` (kept even before the space is known, and across space changes)."""
        if isinstance(params, dict):
            self._points.append(params)
            key = self._key(params)
            if key is not None:
                self._keys.add(key)

    def exhausted(self, flat: dict[Key, Any]) -> bool:
        """Whether every completion of the partly chosen flat parameters ``flat`` has been tried
        (False when the rest of the space is infinite or too large to list)."""
        if not self._keys:
            return False
        try:
            return all(frozenset(c.items()) in self._keys for c in self._completions(flat))
        except _Unlisted:
            return False

    def fresh(self, draw: Callable[[], dict], rng: np.random.Generator) -> dict:
        """An untried point: the first untried one of up to ``MAX_RESAMPLES`` draws; failing that,
        a random one of the untried points of a finite space (``NoMoreTrialError`` when there are
        none left); in an infinite or very large space, the last draw even though it was tried."""
        for _ in range(MAX_RESAMPLES):
            params = draw()
            if params not in self:
                self.add(params)
                return params
        try:
            untried = [c for c in self._completions({}) if frozenset(c.items()) not in self._keys]
        except _Unlisted:
            _logger.warning("%s: %d draws in a row were tried before; suggesting one again",
                            self._who, MAX_RESAMPLES)
            return params
        if not untried:
            raise NoMoreTrialError(f"{self._who}: every point of the search space has been tried")
        params = format_parameters(untried[int(rng.integers(len(untried)))], self._specs or [])
        self.add(params)
        return params

    def _completions(self, flat: dict[Key, Any]) -> Iterator[dict[Key, Any]]:
        """Every flat point that extends ``flat``; raises _Unlisted for an infinite or huge rest."""
        specs = self._specs or []
        current = dict(flat)
        listed = 0

        def walk(i: int) -> Iterator[dict[Key, Any]]:
            nonlocal listed
            if i == len(specs):
                listed += 1
                if listed > LISTING_LIMIT:
                    raise _Unlisted
                yield dict(current)
                return
            spec = specs[i]
            if spec.key in current or not spec.is_active(current):
                yield from walk(i + 1)
                return
            if spec.type not in _FINITE_TYPES:
                raise _Unlisted
            for value in grid_values(spec):
                current[spec.key] = value
                yield from walk(i + 1)
            del current[spec.key]

        return walk(0)

    def _key(self, params: Any) -> frozenset | None:
        if self._specs is None or not isinstance(params, dict):
            return None
        try:
            return frozenset(deformat_parameters(params, self._specs).items())
        except (ValueError, TypeError):
            return None  # does not fit the space: cannot be suggested anyway


def tried_in(data: Iterable[dict]) -> Iterable[Any]:
    """The parameters of ``import_data`` records, whether or not they have a value."""
    for record in data:
        if isinstance(record, dict) and "parameter" in record:
            yield record["parameter"]


class RandomTuner(Tuner):
    """Samples each parameter independently with NNI's distributions, never twice the same point."""

    def __init__(self, optimize_mode: str | None = "maximize", seed: int | None = None) -> None:
        if optimize_mode is not None:
            OptimizeMode.parse(optimize_mode)
        self._rng = make_rng(seed)
        self._space: dict | None = None
        self._tried = TriedPoints("Random tuner")

    def update_search_space(self, search_space: dict) -> None:
        self._space = search_space
        self._tried.update_search_space(parse_search_space(search_space))

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict:
        if self._space is None:
            raise AlgorithmError("Random tuner: update_search_space must be called before generate_parameters")
        space = self._space
        return self._tried.fresh(lambda: sample(space, self._rng), self._rng)

    def receive_trial_result(self, parameter_id: int, parameters: dict, value: Any, **kwargs: Any) -> None:
        """Random search does not learn from results."""

    def import_data(self, data: list[dict]) -> None:
        """Remember the imported parameters as tried, so they are not suggested again."""
        for params in tried_in(data):
            self._tried.add(params)
