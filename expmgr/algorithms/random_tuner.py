"""The Random tuner: every trial gets independent random parameters from the space.

NNI's ``Random`` tuner; ``seed`` makes the sequence repeatable, and
``optimize_mode`` is accepted (and checked) for config compatibility but unused.
"""
from __future__ import annotations

from typing import Any

from expmgr.algorithms.search_space import make_rng, sample
from expmgr.algorithms.tuner import AlgorithmError, OptimizeMode, Tuner


class RandomTuner(Tuner):
    """Samples each parameter independently with NNI's distributions."""

    def __init__(self, optimize_mode: str | None = "maximize", seed: int | None = None) -> None:
        if optimize_mode is not None:
            OptimizeMode.parse(optimize_mode)
        self._rng = make_rng(seed)
        self._space: dict | None = None

    def update_search_space(self, search_space: dict) -> None:
        self._space = search_space

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict:
        if self._space is None:
            raise AlgorithmError("Random tuner: update_search_space must be called before generate_parameters")
        return sample(self._space, self._rng)

    def receive_trial_result(self, parameter_id: int, parameters: dict, value: Any, **kwargs: Any) -> None:
        """Random search does not learn from results."""
