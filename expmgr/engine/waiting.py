"""Trials that wait to be launched, and the order they go in: the runner's own (retries,
requeued and resumed trials; a preempted one first in line) before those a strategy or a
user submitted, each with the waiting reason last stored for it::

    waiting = WaitingTrials()
    waiting.requeue(record, attempt=2, first=True)       # preempted: before the others
    waiting.submitted(strategy_record)
    while waiting and free_slot():
        record, attempt = waiting.next()
    for trial_id in waiting.reasons_changed("waiting for a GPU"): ...    # store each
"""
from __future__ import annotations

from collections import deque

from expmgr.store import TrialRecord


class WaitingTrials:
    """The launch queue: (trial, attempt) of the runner's trials, then the submitted ones."""

    def __init__(self) -> None:
        self._requeued: deque[tuple[TrialRecord, int]] = deque()
        self._submitted: deque[TrialRecord] = deque()
        self._reasons: dict[str, str | None] = {}
        """The waiting reason stored for each trial that waits to start."""

    def requeue(self, record: TrialRecord, attempt: int, *, first: bool = False) -> None:
        """``record`` runs (again) as ``attempt``; ``first``: before every other trial."""
        if first:
            self._requeued.appendleft((record, attempt))
        else:
            self._requeued.append((record, attempt))

    def submitted(self, record: TrialRecord) -> None:
        """A strategy's or a user's new trial: launched after the runner's own."""
        self._submitted.append(record)

    @property
    def requeued(self) -> int:
        """How many of the runner's own trials wait (not those submitted)."""
        return len(self._requeued)

    @property
    def last_submitted(self) -> TrialRecord:
        return self._submitted[-1]

    def __len__(self) -> int:
        return len(self._requeued) + len(self._submitted)

    def next(self) -> tuple[TrialRecord, int]:
        """The trial to launch next, and its attempt (IndexError when none waits)."""
        if self._requeued:
            return self._requeued.popleft()
        return self._submitted.popleft(), 1

    def take_all(self) -> list[TrialRecord]:
        """Every waiting trial, in order, taken off the queue: they will never run (the experiment ends)."""
        records = [record for record, _ in self._requeued] + list(self._submitted)
        self._requeued.clear()
        self._submitted.clear()
        return records

    def restored_reason(self, trial_id: str, reason: str | None) -> None:
        """The reason the last run stored for a trial a resume requeued (said again or cleared)."""
        self._reasons[trial_id] = reason

    def reasons_changed(self, reason: str | None) -> list[str]:
        """The runner's queued trials whose stored waiting reason is not ``reason`` (the
        training service's, or None while it has capacity): each now has it, to be stored."""
        changed = []
        for record, _ in self._requeued:
            if self._reasons.get(record.trial_id) != reason:
                self._reasons[record.trial_id] = reason
                changed.append(record.trial_id)
        return changed

    def started(self, trial_id: str) -> None:
        """The trial's attempt started (or failed to): starting clears its stored reason."""
        self._reasons.pop(trial_id, None)
