"""The training-service interface: the trial runner hands it trials to run, and it
tells the runner what became of them through a :class:`TrialEvents` listener::

    service = LocalTrainingService(config.training_service, config.trial_gpu_number, runner)
    await service.start()
    if service.has_capacity():
        await service.launch(TrialLaunch(...))
    service.signal("Xy3zQ", signal.SIGTERM)
    await service.stop()
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


class TrainingServiceError(Exception):
    """A trial could not be launched, or the service cannot run with this config."""


@dataclass(frozen=True)
class TrialLaunch:
    """One attempt of one trial, as the runner asks for it; ``trial_directory`` exists."""

    trial_id: str
    attempt: int
    command: str
    code_directory: Path
    trial_directory: Path
    env: dict[str, str] = field(default_factory=dict)


class TrialEvents(Protocol):
    """What a training service tells the runner; called on the runner's event loop."""

    def trial_started(self, trial_id: str, attempt: int, pid: int | None) -> None: ...

    def trial_exited(self, trial_id: str, attempt: int, exit_code: int | None, signal: int | None) -> None:
        """The attempt's process ended: with ``exit_code``, or killed by ``signal``."""

    def trial_lost(self, trial_id: str, attempt: int, reason: str) -> None:
        """The attempt can no longer be reached (a lost node): it counts as crashed."""

    def service_failed(self, error: str) -> None:
        """The service itself broke (``error`` is its traceback): the experiment ends in ERROR."""


class TrainingService(abc.ABC):
    """Runs trials as processes; ``stop()`` is idempotent and leaves none behind."""

    @abc.abstractmethod
    async def start(self) -> None: ...

    @abc.abstractmethod
    def has_capacity(self) -> bool:
        """Whether one more trial could be launched now (GPUs, slots)."""

    @abc.abstractmethod
    async def launch(self, trial: TrialLaunch) -> None:
        """Start an attempt; its end is reported through ``TrialEvents.trial_exited``."""

    @abc.abstractmethod
    def signal(self, trial_id: str, signum: int) -> bool:
        """Send ``signum`` to the trial's whole process group; False if it is not running."""

    @abc.abstractmethod
    async def stop(self, grace_period: float, signum: int = 15) -> None:
        """Send ``signum`` (SIGTERM; SIGUSR1 for a preemption) to every running trial,
        SIGKILL what is left after ``grace_period`` seconds, and wait until all have
        exited (their exits are reported)."""
