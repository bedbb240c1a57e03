"""ASHA: asynchronous successive halving (Li et al., 2020, "A System for Massively
Parallel Hyperparameter Tuning"), after Ray Tune's AsyncHyperBandScheduler.

It is an assessor (configured in the ``assessor`` section as ``ASHA``): trials run
side by side, and each time one reaches a rung (its ``grace_period * reduction_factor**k``-th
intermediate result, below ``max_t``) it must be in the top ``1 / reduction_factor``
of the results recorded at that rung so far, or it stops. Nobody waits for a rung to fill::

    asha = AshaScheduler("maximize", grace_period=1, reduction_factor=4, max_t=100)
    asha.assess_trial("trial-a", [0.31])  # the first at rung 1: AssessResult.Good
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from expmgr.algorithms.arguments import require_int
from expmgr.algorithms.assessor import AssessResult, Assessor
from expmgr.algorithms.tuner import AlgorithmError, OptimizeMode, extract_scalar_reward

_logger = logging.getLogger("nni.assessor.asha")


@dataclass
class _Rung:
    milestone: int
    """The step (number of intermediate results) at which trials are compared."""
    values: list[float] = field(default_factory=list)
    """Every trial's result at this step, larger is better, in arrival order."""


@dataclass
class _Running:
    bracket: int
    next_rung: int = 0
    """Index of the first rung of its bracket that the trial has not reached yet."""


class AshaScheduler(Assessor):
    """Ray Tune's ASHA with NNI-style classArgs.

    The cutoff is Ray's: when a trial reaches a rung with value v, the cutoff is the
    ``1 - 1/reduction_factor`` quantile (numpy's linear interpolation) of the values
    recorded at that rung before it; the trial stops if v is strictly worse than the
    cutoff, and its value is recorded either way. The first trial at a rung continues.
    The value compared is the trial's result at exactly the milestone step.

    With ``brackets`` > 1, trials are dealt to brackets in turn as they first report;
    bracket s starts its rungs at ``grace_period * reduction_factor**s``. ``max_t`` only
    bounds the rungs: a trial that passed them all runs to its own end (stopping it
    would lose its final result). A non-finite result at a rung stops the trial and is
    not recorded.
    """

    def __init__(
        self,
        optimize_mode: str = "maximize",
        grace_period: int = 1,
        reduction_factor: int = 4,
        max_t: int = 100,
        brackets: int = 1,
    ) -> None:
        self.optimize_mode = OptimizeMode.parse(optimize_mode)
        for name, value, minimum in (("grace_period", grace_period, 1), ("reduction_factor", reduction_factor, 2),
                                     ("max_t", max_t, 1), ("brackets", brackets, 1)):
            require_int(name, value, minimum)
        if grace_period >= max_t:
            raise AlgorithmError(f"grace_period ({grace_period}) must be smaller than max_t ({max_t})")
        self.grace_period = grace_period
        self.reduction_factor = reduction_factor
        self.max_t = max_t
        self.brackets = brackets
        self._rungs: list[list[_Rung]] = [
            [_Rung(m) for m in milestones(grace_period * reduction_factor**s, reduction_factor, max_t)]
            for s in range(brackets)
        ]
        self._running: dict[str, _Running] = {}
        self._dealt = 0

    def assess_trial(self, trial_job_id: str, trial_history: list) -> AssessResult:
        trial = self._running.get(trial_job_id)
        if trial is None:
            trial = self._running[trial_job_id] = _Running(bracket=self._dealt % self.brackets)
            self._dealt += 1
        rungs = self._rungs[trial.bracket]
        # Normally one rung at a time; a history that skipped steps may pass several.
        while trial.next_rung < len(rungs) and len(trial_history) >= rungs[trial.next_rung].milestone:
            rung = rungs[trial.next_rung]
            trial.next_rung += 1
            if not self._passes(rung, trial_history[rung.milestone - 1]):
                _logger.debug("trial %s stops at rung %d", trial_job_id, rung.milestone)
                return AssessResult.Bad
        return AssessResult.Good

    def trial_end(self, trial_job_id: str, success: bool, **kwargs: Any) -> None:
        self._running.pop(trial_job_id, None)

    def _passes(self, rung: _Rung, result: Any) -> bool:
        """Whether ``result`` is in the top fraction at ``rung``; records it."""
        value = extract_scalar_reward(result)
        if not math.isfinite(value):
            return False
        if self.optimize_mode is OptimizeMode.Minimize:
            value = -value
        passes = True
        if rung.values:
            cutoff = float(np.percentile(rung.values, 100.0 * (1.0 - 1.0 / self.reduction_factor)))
            passes = value >= cutoff
        rung.values.append(value)
        return passes


def milestones(first: int, reduction_factor: int, max_t: int) -> list[int]:
    """The rung steps ``first * reduction_factor**k`` below ``max_t``."""
    steps = []
    while first < max_t:
        steps.append(first)
        first *= reduction_factor
    return steps
