"""Final results by key, for the web UI's key chooser, top-K card and importance: which keys
of dict results were reported (``{"default": 0.9, "loss": 0.3}``), a trial's number under a
key, and the best trials under a key. One home for these rules; the rule for the best is
``expmgr.metrics`` (``ranked``): the experiment's optimize mode applied to the chosen key,
finite numbers only, the first of equals first::

    keys = stored_result_keys(store)                         # ["default", "loss"]
    answer = top_trials_view(store, key="loss", count=10)   # GET /api/v1/expmgr/top?key=loss&k=10
"""
from __future__ import annotations

from typing import Any, Iterable

from expmgr.engine.errors import RefusalKind
from expmgr.metrics import DEFAULT_KEY, metric_number, ranked
from expmgr.server.refusals import RequestError
from expmgr.store import Store

MAX_KEY_LENGTH = 200
"""A key longer than this is refused before it is looked for (no result key is that long)."""
MAX_TOP = 1000
"""The most trials a top-K answer lists."""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def result_keys_of(value: Any) -> list[str]:
    """The keys a final result has a number under: ``default`` for a plain number, else the
    keys of a dict whose values are numbers (finite or not), in the dict's order."""
    if isinstance(value, dict):
        return [key for key, item in value.items() if isinstance(key, str) and _is_number(item)]
    return [DEFAULT_KEY] if _is_number(value) else []


def add_result_keys(keys: list[str], value: Any) -> bool:
    """Add ``value``'s keys (``result_keys_of``) missing from ``keys``, ``default`` first;
    whether any was added."""
    added = False
    for key in result_keys_of(value):
        if key not in keys:
            if key == DEFAULT_KEY:
                keys.insert(0, key)
            else:
                keys.append(key)
            added = True
    return added


def result_keys(values: Iterable[Any]) -> list[str]:
    """The keys of final results ``values``: ``default`` first, then the others in the order
    first seen. The web UI offers them in its key chooser (the experiment's ``resultKeys``)."""
    keys: list[str] = []
    for value in values:
        add_result_keys(keys, value)
    return keys


def stored_result_keys(store: Store) -> list[str]:
    """``result_keys`` of the store's final results, from the store's index of their keys
    (a few ms at 10,000 trials, where reading every result takes a good part of a second)."""
    keys: list[str] = []
    found, unreadable = store.final_result_keys()
    for key in found:
        add_result_keys(keys, 0 if key is None else {key: 0})
    for value in unreadable:
        add_result_keys(keys, value)
    return keys


def final_numbers_by_key(value: Any) -> dict[str, float | None] | None:
    """A dict result's number under each of its keys (None where not finite), for the trial
    views; None for a plain number (its number is ``finalNumber``)."""
    if not isinstance(value, dict):
        return None
    return {key: metric_number(value, key) for key in result_keys_of(value)}


def checked_key(raw: str | None, keys: list[str]) -> str:
    """The ``key`` query argument: ``default`` when absent; a RequestError (400) naming it
    when it is not a key of any final result."""
    if raw is None or raw == "":
        return DEFAULT_KEY
    if len(raw) > MAX_KEY_LENGTH:
        raise RequestError(RefusalKind.INVALID, f"key: at most {MAX_KEY_LENGTH} characters, got {len(raw)}")
    if raw not in keys and raw != DEFAULT_KEY:
        seen = ", ".join(repr(key) for key in keys[:20]) or "none yet"
        raise RequestError(RefusalKind.INVALID,
                           f"key: {raw!r} is not a key of any final result (keys reported: {seen})")
    return raw


def numbers_under_key(finals: list[tuple[str, int, dict[str, Any], Any]], key: str
                      ) -> list[tuple[str, int, dict[str, Any], float]]:
    """Of ``store.final_results()``: those with a finite number under ``key``, with it."""
    selected = []
    for trial_id, sequence_id, parameters, value in finals:
        number = metric_number(value, key)
        if number is not None:
            selected.append((trial_id, sequence_id, parameters, number))
    return selected


def top_trials_view(store: Store, key: str | None, count: int, keys: list[str] | None = None) -> dict[str, Any]:
    """``GET /api/v1/expmgr/top``: the ``count`` best trials under ``key`` (the experiment's
    optimize mode applied to that key; finite results only; the first reported of equals
    first), each with its sequence id and number, and how many trials have a finite
    result under the key. ``keys``: the result keys when known (the server's facts), else
    read from the store."""
    with store.snapshot():
        minimize = store.profile().minimizes
        key = checked_key(key, stored_result_keys(store) if keys is None else keys)
        if key == DEFAULT_KEY:  # the store has these numbers without reading the results
            numbers = {trial_id: number for trial_id, number in store.final_numbers().items() if number is not None}
        else:
            numbers = {trial_id: number for trial_id, metric in store.final_metrics().items()
                       if (number := metric_number(metric.value, key)) is not None}
        sequence_ids = store.sequence_ids()
    order, _ = ranked(numbers.items(), minimize)
    return {"key": key, "optimizeMode": "minimize" if minimize else "maximize", "scored": len(order),
            "trials": [{"trialJobId": trial_id, "sequenceId": sequence_ids.get(trial_id, -1),
                        "number": numbers[trial_id]} for trial_id in order[:count]]}
