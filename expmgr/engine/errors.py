"""What the engine refuses, and why, in words a Python API user can act on.

A refusal carries a kind (bad input, not yours, not found, not now, try later...) and
a message naming what is wrong; it carries no HTTP status. The REST layer maps each
kind to its status in one table (``expmgr.server.refusals.STATUS_OF_KIND``)::

    try:
        runner.kill_trial(trial_id)
    except UpdateRefused as refused:
        if refused.kind is RefusalKind.NOT_FOUND: ...
"""
from __future__ import annotations

import enum


class RefusalKind(enum.Enum):
    """Why something was refused; the caller decides what that means to its own user."""

    INVALID = "invalid"
    """Bad input: a field of the wrong type or out of range. Fix the input."""
    FORBIDDEN = "forbidden"
    """Not yours: a report without the running trial's token."""
    NOT_FOUND = "not found"
    """No such thing: an unknown trial."""
    CONFLICT = "conflict"
    """Not now: the experiment is stopping or read-only, the trial is not running, the budget is spent."""
    TOO_MANY = "too many"
    """A limit on how many is reached: release one first."""
    UNAVAILABLE = "unavailable"
    """Try later: the store cannot be written now."""
    FAILED = "failed"
    """Our own fault: the manager failed while handling it (a bug)."""


class Refusal(Exception):
    """A request the engine (or a layer above it) refuses; ``kind`` says why, the
    message says what is wrong and where."""

    def __init__(self, kind: RefusalKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class UpdateRefused(Refusal):
    """A change to a running experiment (update, import, trial kill, stop) that cannot be made."""


class MetricRejected(Refusal):
    """A metric report that is malformed or not the running trial's."""


class SubmissionRefused(Refusal):
    """A trial submitted by a strategy cannot be run (bad parameters, budget spent,
    experiment stopping)."""
