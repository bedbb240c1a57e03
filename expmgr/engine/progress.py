"""The experiment's progress as experiment.log says it, one line a trial end: how many
trials ended how, and the best final result so far (by its ``default`` number)::

    progress = Progress(minimize=config.minimizes)
    progress.trial_ended("a1b2c", TrialState.SUCCEEDED, 0.93, has_final=True)
    logger.info("%s", progress.line(max_trial_number=config.max_trial_number, running=len(live)))
"""
from __future__ import annotations

from typing import Any

from expmgr.metrics import is_better, metric_number
from expmgr.states import TrialState


class Progress:
    """Trials ended, by state, and the best final result seen and its trial; a non-finite
    result (NaN, an infinity) is never the best."""

    def __init__(self, minimize: bool) -> None:
        self._minimize = minimize
        self._best: tuple[float, str] | None = None
        self._ended: dict[TrialState, int] = {}

    def trial_ended(self, trial_id: str, status: TrialState, final_value: Any, has_final: bool) -> None:
        self._ended[status] = self._ended.get(status, 0) + 1
        if has_final:
            self._offer(trial_id, final_value)

    def restore(self, ended: dict[TrialState, int], results: list[tuple[str, Any]]) -> None:
        """A resume goes on from the earlier runs' count and results."""
        for status, count in ended.items():
            self._ended[status] = self._ended.get(status, 0) + count
        for trial_id, value in results:
            self._offer(trial_id, value)

    def _offer(self, trial_id: str, value: Any) -> None:
        number = metric_number(value)
        if number is not None and is_better(number, None if self._best is None else self._best[0], self._minimize):
            self._best = (number, trial_id)

    @property
    def best(self) -> tuple[float, str] | None:
        """The best final result's number and its trial, if any."""
        return self._best

    def line(self, *, max_trial_number: int | None, running: int) -> str:
        done = sum(self._ended.values())
        counts = ", ".join(f"{count} {state.value.lower()}" for state, count in sorted(
            self._ended.items(), key=lambda item: -item[1]))
        best = "" if self._best is None else f", best {self._best[0]:g} (trial {self._best[1]})"
        return (f"progress: {done}{f'/{max_trial_number}' if max_trial_number else ''} trials ended ({counts}), "
                f"{running} running{best}")
