"""Strategies: Python code that drives an experiment by submitting trials itself
(NAS-style multi-trial search), in its own thread of the experiment process.

    def search(experiment):
        handles = [experiment.submit_trial({"width": w}) for w in (16, 32, 64)]
        best = max(handles, key=lambda h: h.wait().value or 0)
        logging.getLogger("nni.search").info("best width: %s", best.parameters["width"])

    Experiment(config, strategy=search).run(port=8080)

A strategy is a callable taking the experiment, or an object whose ``run(experiment)``
does. The experiment is DONE once the strategy returned and its trials ended; if
the strategy raises, the experiment ends in ERROR with its traceback.
"""
from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass
from typing import Any

from expmgr.states import TrialState


@dataclass(frozen=True)
class TrialOutcome:
    """How a submitted trial ended: its final state and final result (None when it reported none)."""

    trial_id: str
    status: TrialState
    value: Any


class TrialHandle:
    """A trial submitted by ``Experiment.submit_trial``; ``wait()`` for its outcome."""

    def __init__(self, trial_id: str, parameters: dict[str, Any], future: concurrent.futures.Future) -> None:
        self.trial_id = trial_id
        self.parameters = parameters
        self._future = future

    def done(self) -> bool:
        return self._future.done()

    def wait(self, timeout: float | None = None) -> TrialOutcome:
        """Block until the trial ended (retries included); TimeoutError after ``timeout`` s."""
        status, value = self._future.result(timeout)
        return TrialOutcome(self.trial_id, status, value)

    def __repr__(self) -> str:
        return f"TrialHandle({self.trial_id!r}, {self.parameters!r})"
