"""The Random tuner: every trial gets independent random parameters from the space.

NNI's ``Random`` tuner; ``seed`` makes the sequence repeatable, and
``optimize_mode`` is accepted (and checked) for config compatibility but unused.
It never suggests the same parameters twice, nor parameters given to
``import_data`` (see ``tried_points.TriedPoints``, which the model-based tuners use too); when a finite space is
used up, ``generate_parameters`` raises ``NoMoreTrialError``.
"""
from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

from expmgr.algorithms.search_space import check_seed, make_rng, parse_search_space, sample
from expmgr.algorithms.tried_points import TriedPoints, tried_in
from expmgr.algorithms.tuner import AlgorithmError, OptimizeMode, Tuner

if TYPE_CHECKING:
    import numpy as np

_logger = logging.getLogger("nni.tuner.random")

class RandomTuner(Tuner):
    """Samples each parameter independently with NNI's distributions, never twice the same point."""

    def __init__(self, optimize_mode: str | None = "maximize", seed: int | None = None) -> None:
        if optimize_mode is not None:
            OptimizeMode.parse(optimize_mode)
        self._seed = check_seed(seed)
        self._space: dict | None = None
        self._tried = TriedPoints("Random tuner")

    @functools.cached_property
    def _rng(self) -> np.random.Generator:
        """Made at the first draw: building the tuner (the config check does, in the
        experiment process) does not import numpy."""
        return make_rng(self._seed)

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
