"""The assessor base class (NNI's interface): decides from a trial's intermediate
results whether it is worth continuing.
"""
from __future__ import annotations

import enum
from typing import Any


class AssessResult(enum.Enum):
    """An assessor's verdict on a running trial (NNI's names)."""

    Good = True
    """The trial looks promising; let it continue."""
    Bad = False
    """The trial looks hopeless; stop it early."""


class Assessor:
    """Base class of assessors.

    ``assess_trial`` is called with the intermediate results a trial has reported
    so far (oldest first); ``trial_end`` when the trial has ended.
    """

    def assess_trial(self, trial_job_id: str, trial_history: list) -> AssessResult:
        """Judge a running trial from its intermediate results."""
        raise NotImplementedError(f"{type(self).__name__} must implement assess_trial")

    def trial_end(self, trial_job_id: str, success: bool, **kwargs: Any) -> None:
        """The trial has ended; forget whatever was kept about it."""

    def load_checkpoint(self) -> None:
        """Restore the assessor's own state, if it keeps any (NNI hook; nothing by default)."""

    def save_checkpoint(self) -> None:
        """Save the assessor's own state, if it keeps any (NNI hook; nothing by default)."""
