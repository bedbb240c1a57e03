"""What the server asks of a running search: the REST routes hand it users' changes
(a stop, a kill, an update, an import, a customized trial: engine/commands.py's records,
through ``apply_command``) and trials' reports, and read whether launching is paused.
The trial runner implements it; the server knows it by this protocol alone, so it never
needs the runner's class (the layering test checks it)::

    app = make_app(store, paths, search, hub, guard)   # search: ServedSearch | None
"""
from __future__ import annotations

from typing import Any, Protocol

from expmgr.engine.commands import CommandedSearch


class ServedSearch(CommandedSearch, Protocol):
    """A search that runs (TrialRunner): the commands' search, plus what the server reads and
    the trials' reports; each call refuses by raising the engine's Refusal kinds
    (expmgr.engine.errors), which the server maps to HTTP status."""

    @property
    def launching_paused(self) -> str | None:
        """What users are told while launching is paused, or None."""
        ...

    def receive_metric(self, trial_id: str, token: str | None, report: Any) -> None: ...
