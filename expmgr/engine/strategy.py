"""The trials a strategy (NAS-style code in the experiment process) or a user submitted, as
the runner answers for them: a future of each one's outcome, settled once with (final
state, final value), and whether the strategy still runs or how it failed::

    strategy = StrategyTrials(running=True)
    future = strategy.submitted(record.trial_id)
    strategy.settle(record.trial_id, TrialState.SUCCEEDED, 0.93)    # future.result() == (SUCCEEDED, 0.93)
    strategy.finished(error=None)                                    # it returned
"""
from __future__ import annotations

import concurrent.futures
from typing import Any

from expmgr.states import TrialState


class StrategyTrials:
    """The futures of submitted trials not settled yet, and the strategy's own state."""

    def __init__(self, *, running: bool) -> None:
        self.running = running
        """The strategy runs (it may submit more trials)."""
        self.error: str | None = None
        """Its traceback, once it raised."""
        self._outcomes: dict[str, concurrent.futures.Future] = {}

    def submitted(self, trial_id: str) -> concurrent.futures.Future:
        """A future of the trial's (final state, final value); it is a submitted trial from now on."""
        outcome: concurrent.futures.Future = concurrent.futures.Future()
        self._outcomes[trial_id] = outcome
        return outcome

    def __contains__(self, trial_id: object) -> bool:
        """Whether it is a submitted trial whose outcome is not settled yet."""
        return trial_id in self._outcomes

    def settle(self, trial_id: str, status: TrialState, value: Any) -> None:
        """The trial ended (or will run only after a resume: PREEMPTED): its future gets
        (``status``, ``value``), once; then it is no longer answered for."""
        outcome = self._outcomes.pop(trial_id, None)
        if outcome is not None and not outcome.done():
            outcome.set_result((status, value))

    def finished(self, error: str | None) -> None:
        """The strategy returned (``error`` None) or raised (its traceback)."""
        self.running = False
        self.error = error
