"""What a reported result means, decided once: the number a metric stands for and which
result is the best. The store, the runner, the server's views, the CLI and the
``Experiment`` API all ask here (the web UI gets the answers from the server).

A metric is a number or a dict with a number under ``default`` (NNI's rule). Its number
is None when that is not a finite float: NaN from a diverging trial, an infinity, or an
integer beyond any float (10**400, kept exactly in the store), so such a result is never
the best. The direction (minimize or maximize) is ``ExperimentConfig.minimizes``.

A bottom-layer module: it imports only the standard library.
"""
from __future__ import annotations

import math
from typing import Any, Iterable, TypeVar

Key = TypeVar("Key")


DEFAULT_KEY = "default"
"""The key of a dict result that is its number (NNI's rule); the web UI may chart another."""


def reported_number(value: Any, key: str = DEFAULT_KEY) -> Any:
    """What a metric reports as its number, unchecked: the value itself, or a dict's ``key``
    (a plain number is the ``default`` key's alone)."""
    if isinstance(value, dict):
        return value.get(key)
    return value if key == DEFAULT_KEY else None


def metric_number(value: Any, key: str = DEFAULT_KEY) -> float | None:
    """A metric's number: the value, or its ``default`` (or ``key``); None when that is not
    a finite number (NaN reported by a diverging trial), which JSON cannot carry."""
    number = reported_number(value, key)
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        return None
    try:
        finite = math.isfinite(number)
    except OverflowError:  # an integer beyond any float (10**400): kept exactly in value_json only
        return None
    return number if finite else None


def is_better(number: float, than: float | None, minimize: bool) -> bool:
    """Whether result ``number`` beats ``than`` (None: nothing yet) in the direction given."""
    return than is None or (number < than if minimize else number > than)


def best_result(results: Iterable[tuple[Key, Any]], minimize: bool) -> tuple[Key, float] | None:
    """Of ``(key, metric value)`` pairs, the key and number of the best result (the first
    of equals); None when none has a finite number."""
    best: tuple[Key, float] | None = None
    for key, value in results:
        number = metric_number(value)
        if number is not None and is_better(number, None if best is None else best[1], minimize):
            best = (key, number)
    return best


def ranked(results: Iterable[tuple[Key, Any]], minimize: bool,
           result_key: str = DEFAULT_KEY) -> tuple[list[Key], list[Key]]:
    """Of ``(key, metric value)`` pairs: the keys with a finite number (under ``result_key``
    of a dict result), best first (equals in their given order), and the keys without one,
    in their given order."""
    scored: list[tuple[float, Key]] = []
    unscored: list[Key] = []
    for key, value in results:
        number = metric_number(value, result_key)
        if number is None:
            unscored.append(key)
        else:
            scored.append((number, key))
    scored.sort(key=lambda item: item[0], reverse=not minimize)  # stable: equals keep their order
    return [key for _, key in scored], unscored
