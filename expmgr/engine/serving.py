"""What the server asks of a running search: the REST routes hand it users' changes
(a stop, a kill, an update, an import, a customized trial) and trials' reports, and read
whether launching is paused. The trial runner implements it; the server knows it by this
protocol alone, so it never needs the runner's class (the layering test checks it)::

    app = make_app(store, paths, search, hub, guard)   # search: ServedSearch | None
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable, Protocol

from expmgr.engine.imports import ImportBatch
from expmgr.store import TrialRecord


class ServedSearch(Protocol):
    """A search that runs (TrialRunner); each call refuses by raising the engine's Refusal
    kinds (expmgr.engine.errors), which the server maps to HTTP status."""

    @property
    def stop_requested(self) -> bool:
        """Whether a stop (or a preemption) was asked for."""
        ...

    @property
    def launching_paused(self) -> str | None:
        """What users are told while launching is paused, or None."""
        ...

    def request_stop(self, *, kill_now: bool = False) -> None: ...

    def kill_trial(self, trial_id: str) -> None: ...

    def update_config(self, field: str, value: Any) -> Awaitable[None] | None: ...

    def import_data(self, batch: ImportBatch, on_taken: Callable[[], None] | None = None) -> int: ...

    def add_customized_trial(self, parameters: Any) -> TrialRecord: ...

    def receive_metric(self, trial_id: str, token: str | None, report: Any) -> None: ...
