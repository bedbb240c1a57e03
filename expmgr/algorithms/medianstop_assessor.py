"""The Medianstop assessor: the median stopping rule of Google Vizier (Golovin et al., 2017),
after NNI's ``Medianstop``.

At step t (the trial's t-th intermediate result) a trial is stopped when its best
result so far is strictly worse than the median, over the other trials that reached
step t, of their running averages up to step t. The other trials are the ones that
completed successfully and the ones still running::

    assessor = MedianstopAssessor("maximize", start_step=5)
    assessor.assess_trial("trial-a", [0.31, 0.42, 0.40])  # AssessResult.Good or .Bad
"""
from __future__ import annotations

import logging
import math
from typing import Any

from expmgr.algorithms.arguments import require_int
from expmgr.algorithms.assessor import AssessResult, Assessor
from expmgr.algorithms.tuner import OptimizeMode, extract_scalar_reward

_logger = logging.getLogger("nni.assessor.medianstop")


class MedianstopAssessor(Assessor):
    """NNI's Medianstop assessor: ``optimize_mode`` and ``start_step`` as NNI's classArgs.

    With an even number of other trials the median is the more lenient of the two
    middle values (as in NNI). A non-finite result (NaN, a diverged training) counts
    as the worst possible value. Trials that failed or were stopped early leave no
    trace once they end.
    """

    def __init__(self, optimize_mode: str = "maximize", start_step: int = 0) -> None:
        self.optimize_mode = OptimizeMode.parse(optimize_mode)
        require_int("start_step", start_step, 0)
        self.start_step = start_step
        # Running averages, in "larger is better" sign, of each running trial's
        # current history and of each successfully completed trial's whole history.
        self._running: dict[str, list[float]] = {}
        self._completed: dict[str, list[float]] = {}

    def assess_trial(self, trial_job_id: str, trial_history: list) -> AssessResult:
        values = [self._signed(value) for value in trial_history]
        self._running[trial_job_id] = _running_averages(values)
        step = len(values)
        if step == 0 or step < self.start_step:
            return AssessResult.Good
        others = [
            averages[step - 1]
            for trial, averages in (*self._completed.items(), *self._running.items())
            if trial != trial_job_id and len(averages) >= step
        ]
        if not others:
            return AssessResult.Good
        others.sort()
        median = others[(len(others) - 1) // 2]
        best = max(values)
        if best < median:
            _logger.debug("trial %s at step %d: best %g is below the median %g of %d trials",
                          trial_job_id, step, best, median, len(others))
            return AssessResult.Bad
        return AssessResult.Good

    def trial_end(self, trial_job_id: str, success: bool, **kwargs: Any) -> None:
        averages = self._running.pop(trial_job_id, None)
        if success and averages:
            self._completed[trial_job_id] = averages

    def _signed(self, value: Any) -> float:
        """The result as a number where larger is better; NaN and infinities are the worst."""
        number = extract_scalar_reward(value)
        if not math.isfinite(number):
            return -math.inf
        return number if self.optimize_mode is OptimizeMode.Maximize else -number


def _running_averages(values: list[float]) -> list[float]:
    averages, total = [], 0.0
    for count, value in enumerate(values, start=1):
        total += value
        averages.append(total / count)
    return averages
