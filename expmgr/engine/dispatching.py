"""What the runner asks of the process hosting the tuner and the assessor: the
``Dispatcher`` protocol, typed calls and answers (``expmgr.dispatcher.answers``). The
subprocess client (``expmgr.dispatcher.client.DispatcherClient``) implements it; the
composition root (experiment/manager.py) builds it and hands it to the runner, and the
runner's unit tests hand it a fake checked against it::

    answer = await dispatcher.generate(parameter_id)
    if isinstance(answer, Generated): ...                  # NoMoreTrials, TunerWaits
    if await dispatcher.assess(trial_id, history) is Assessment.STOP: ...
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from expmgr.dispatcher.answers import (Assessment, DispatcherError, GenerateAnswer, Generated, NoMoreTrials,
                                       TunerWaits)

if TYPE_CHECKING:
    from expmgr.config import AlgorithmConfig

__all__ = ["Assessment", "Dispatcher", "DispatcherError", "GenerateAnswer", "Generated", "NoMoreTrials",
           "TunerWaits", "algorithm_spec"]


def algorithm_spec(algorithm: "AlgorithmConfig | None") -> dict[str, Any] | None:
    """A tuner's or assessor's config as ``Dispatcher.initialize`` is given it (None: none)."""
    if algorithm is None:
        return None
    return {"name": algorithm.name, "className": algorithm.class_name,
            "codeDirectory": str(algorithm.code_directory) if algorithm.code_directory else None,
            "classArgs": algorithm.class_args or {}}


class Dispatcher(Protocol):
    """The tuner and the assessor, as the runner talks to them. Calls are answered in the
    order made; ``tell_*`` and ``replay_results`` are not answered (a failure shows in
    ``failure``). A call raises DispatcherError when the dispatcher failed."""

    exited: asyncio.Event
    """Set once the dispatcher ended (asked to, or not: then ``failure`` says why)."""

    @property
    def failure(self) -> DispatcherError | None:
        """Why the dispatcher ended before it was asked to, if it did."""
        ...

    async def start(self) -> None:
        """Start it; a second call does nothing."""
        ...

    async def stop(self) -> None:
        """End it; idempotent."""
        ...

    async def initialize(self, search_space: dict[str, Any] | None, tuner: dict[str, Any] | None,
                         assessor: dict[str, Any] | None) -> None: ...

    async def generate(self, parameter_id: int) -> GenerateAnswer:
        """The tuner's next trial | no more trials | it waits for running trials."""
        ...

    async def assess(self, trial_id: str, history: Sequence[Any]) -> Assessment:
        """Keep or stop a running trial, given its intermediate results so far."""
        ...

    def tell_result(self, parameter_id: int, parameters: dict[str, Any], value: Any) -> None: ...

    def tell_end(self, parameter_id: int, trial_id: str, success: bool, *, assessor_only: bool = False) -> None: ...

    async def update_search_space(self, search_space: dict[str, Any]) -> None:
        """DispatcherError, not ``fatal``, when the tuner refuses the space (it keeps the old one)."""
        ...

    def replay_results(self, history: list[Any]) -> None:
        """A resume's earlier results, for a fresh tuner."""
        ...

    async def import_frames(self, frames: Iterable[Sequence[Any]],
                            before_each: Callable[[Sequence[Any]], None] | None = None) -> int:
        """Imported results, a frame at a time, the loop running between frames; how many were sent."""
        ...
