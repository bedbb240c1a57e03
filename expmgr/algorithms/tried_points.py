"""What a tuner has already suggested or been given, so that it suggests nothing twice.

    tried = TriedPoints("TPE tuner")
    tried.update_search_space(parse_search_space(space))
    params = tried.fresh(lambda: sample(space, rng), rng)   # never a tried point
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from expmgr.algorithms.search_space import (
    CHOICE,
    Draws,
    QLOGUNIFORM,
    QUNIFORM,
    RANDINT,
    Key,
    ParameterSpec,
    deformat_parameters,
    format_parameters,
    grid_count,
    grid_values,
)
from expmgr.algorithms.tuner import AlgorithmError, NoMoreTrialError, extract_scalar_reward

_logger = logging.getLogger("nni.tuner")

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

    def discard(self, params: dict) -> None:
        """Forget the last ``add`` of ``params`` (a point suggested but never used)."""
        for index in range(len(self._points) - 1, -1, -1):
            if self._points[index] == params:
                del self._points[index]
                self._keys = {key for key in map(self._key, self._points) if key is not None}
                return

    def exhausted(self, flat: dict[Key, Any]) -> bool:
        """Whether every completion of the partly chosen flat parameters ``flat`` has been tried
        (False when the rest of the space is infinite or too large to list)."""
        if not self._keys:
            return False
        try:
            return all(frozenset(c.items()) in self._keys for c in self._completions(flat))
        except _Unlisted:
            return False

    def fresh(self, draw: Callable[[], dict], rng: Draws) -> dict:
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
            if spec.type not in _FINITE_TYPES or grid_count(spec) > LISTING_LIMIT:
                raise _Unlisted   # counted first: a q type's values are listed in full (2**53 of them at most)
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


def imported_results(data: Iterable[dict], who: str) -> Iterator[tuple[int, dict, float]]:
    """(record number, parameters, reward) of the ``import_data`` records that have a
    usable value; records without one are passed over, malformed ones with a warning."""
    for number, record in enumerate(data):
        try:
            parameters = record["parameter"]
            if record.get("value") is None:
                continue  # a trial that ended without a result
            reward = extract_scalar_reward(record["value"])
        except (AlgorithmError, KeyError, TypeError) as exc:
            _logger.warning("%s: skipping imported record %d: %s", who, number, exc)
            continue
        yield number, parameters, reward


def fit_to_space(parameters: Any, specs: list[ParameterSpec], who: str, what: str) -> dict[Key, Any] | None:
    """The flat values of ``parameters`` under ``specs``, or None (with a warning naming
    ``what``) when they do not fit the search space."""
    try:
        if not isinstance(parameters, dict):
            raise ValueError(f"parameters should be a dict, got {parameters!r}")
        return deformat_parameters(parameters, specs)
    except ValueError as exc:
        _logger.warning("%s: ignoring %s, it does not fit the search space: %s", who, what, exc)
        return None
