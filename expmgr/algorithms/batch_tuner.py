"""The Batch tuner: runs a fixed list of configurations, each once, in list order.

NNI's ``BatchTuner``. The search space has one key, ``combine_params``, a choice
whose options are the configurations::

    {"combine_params": {"_type": "choice", "_value": [
        {"optimizer": "Adam", "lr": 0.001},
        {"optimizer": "SGD", "lr": 0.01},
    ]}}

The first trial gets ``{"optimizer": "Adam", "lr": 0.001}`` as its parameters (the
configuration itself, not wrapped in ``combine_params``), the second the next one,
and so on; then ``generate_parameters`` raises ``NoMoreTrialError``. A configuration
listed twice runs twice. Each imported record (``import_data``, a resume) uses up one
copy of its configuration, so it is not run again.
"""
from __future__ import annotations

import copy
import json
import logging
from collections import Counter
from typing import Any

from expmgr.algorithms.search_space import check_seed
from expmgr.algorithms.tuner import AlgorithmError, NoMoreTrialError, OptimizeMode, Tuner

_logger = logging.getLogger("nni.tuner.batch")

KEY = "combine_params"
"""The search space's only key (NNI's name)."""

_SHAPE = (
    f'{{"{KEY}": {{"_type": "choice", "_value": [{{...configuration 1...}}, {{...configuration 2...}}]}}}}'
    " (one key, a choice whose options are dicts of parameters)"
)


def _canonical(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


def configurations(search_space: Any) -> list[dict]:
    """The configurations of a Batch search space, in order; AlgorithmError if it has another shape."""
    def wrong(problem: str) -> AlgorithmError:
        return AlgorithmError(f"Batch tuner: {problem}; the search space should be {_SHAPE}")

    if not isinstance(search_space, dict) or list(search_space) != [KEY]:
        keys = sorted(search_space) if isinstance(search_space, dict) else search_space
        raise wrong(f"expected exactly one key {KEY!r}, got {keys!r}")
    entry = search_space[KEY]
    if not isinstance(entry, dict) or entry.get("_type") != "choice":
        raise wrong(f"{KEY} must be a choice, got {entry!r}")
    options = entry.get("_value")
    if not isinstance(options, list) or not options:
        raise wrong(f"{KEY}._value must be a non-empty list of configurations, got {options!r}")
    for index, option in enumerate(options):
        if not isinstance(option, dict):
            raise wrong(f"{KEY}._value[{index}] is {option!r}, not a dict of parameters")
    return [copy.deepcopy(option) for option in options]


class BatchTuner(Tuner):
    """Hands out the configurations of ``combine_params`` one by one.

    ``optimize_mode`` and ``seed`` are accepted (and checked) so a config can switch
    to Batch without editing classArgs; neither changes anything.
    """

    ask_ahead_safe = True  # the list is fixed; a configuration taken back is the next one again

    def __init__(self, optimize_mode: str | None = None, seed: int | None = None) -> None:
        if optimize_mode is not None:
            OptimizeMode.parse(optimize_mode)
        check_seed(seed)  # the order is fixed by the list
        self._queue: list[dict] | None = None
        self._used: Counter[str] = Counter()
        """Configurations generated or imported, by canonical JSON, with their counts."""

    def update_search_space(self, search_space: dict) -> None:
        """Take the list; configurations already generated or imported are not run again."""
        queue = configurations(search_space)
        used = Counter(self._used)
        remaining = []
        for config in queue:
            key = _canonical(config)
            if used[key] > 0:
                used[key] -= 1
            else:
                remaining.append(config)
        self._queue = remaining

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict:
        if self._queue is None:
            raise AlgorithmError("Batch tuner: update_search_space must be called before generate_parameters")
        if not self._queue:
            raise NoMoreTrialError("Batch tuner: every configuration of combine_params has been run")
        config = self._queue.pop(0)
        self._used[_canonical(config)] += 1
        return copy.deepcopy(config)

    def receive_trial_result(self, parameter_id: int, parameters: dict, value: Any, **kwargs: Any) -> None:
        """The list is fixed: results change nothing."""

    def take_back(self, parameters: dict) -> None:
        """The configuration is the next one again and no longer counts as used."""
        assert self._queue is not None, "taken back before it was generated"
        self._queue.insert(0, copy.deepcopy(parameters))
        self._used[_canonical(parameters)] -= 1

    def import_data(self, data: list[dict]) -> None:
        """Skip imported configurations (with or without a result): each record uses up one copy."""
        for number, record in enumerate(data):
            parameters = record.get("parameter") if isinstance(record, dict) else None
            if not isinstance(parameters, dict):
                _logger.warning("Batch: skipping imported record %d: no dict of parameters", number)
                continue
            key = _canonical(parameters)
            self._used[key] += 1
            if self._queue is None:
                continue  # applied when the search space comes
            for index, config in enumerate(self._queue):
                if _canonical(config) == key:
                    del self._queue[index]
                    break
