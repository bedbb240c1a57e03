"""The dispatcher's answers as typed values, for whoever asks it (the engine's ``Dispatcher``
protocol): the client turns the channel's reply frames into these, so no caller reads frame
keys::

    answer = await client.generate(parameter_id=3)
    if isinstance(answer, Generated): ...        # answer.parameters, answer.checkpoint_from
    elif isinstance(answer, TunerWaits): ...     # none until a running trial reports or ends
    if await client.assess(trial_id, history) is Assessment.STOP: ...
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Union


class DispatcherError(Exception):
    """The dispatcher failed; ``str()`` holds its traceback when it sent one. ``fatal`` is
    False for a request it refused and went on from (a search space its tuner cannot use)."""

    def __init__(self, message: str, fatal: bool = True) -> None:
        super().__init__(message)
        self.fatal = fatal


@dataclass(frozen=True)
class Generated:
    """The tuner's next trial."""

    parameters: dict[str, Any]
    checkpoint_from: Any = None
    """The parameter id of the trial whose checkpoint it starts from (PBT's exploit), or None.
    As the tuner gave it: the runner checks that such a trial exists."""


@dataclass(frozen=True)
class NoMoreTrials:
    """The tuner has no more trials (a used-up grid), for good."""


@dataclass(frozen=True)
class TunerWaits:
    """The tuner has nothing until a running trial reports or ends (NNI's NoTrialYetError)."""


GenerateAnswer = Union[Generated, NoMoreTrials, TunerWaits]


class Assessment(enum.Enum):
    """The assessor's verdict on a running trial."""

    KEEP = "Good"
    """It goes on."""
    STOP = "Bad"
    """It is stopped early (EARLY_STOPPED)."""
