"""Commands to a running search, as small records, and the one function that applies them.

The Python API (``Experiment``, through its control: experiment/control.py), the REST
handlers (server/rest.py) and a connected ``Experiment`` (experiment/connected.py, which
sends them as NNI's REST routes) all speak these records; only ``apply_command`` turns
one into a call of the search (the trial runner, known by the ``CommandedSearch`` protocol)::

    apply_command(runner, KillTrial("a1b2c"))                 # on the runner's event loop
    control.send(UpdateConfig("maxTrialNumber", 20))          # from any thread (Control)

Each record is a ``Command[R]``: ``R`` is what applying it returns. Refusals are the
engine's kinds (expmgr.engine.errors), raised by the search.
"""
from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Generic, Protocol, TypeVar, cast

from expmgr.engine.imports import ImportBatch
from expmgr.store import TrialRecord

R = TypeVar("R")


class Command(Generic[R]):
    """A command to a running search; ``R`` is what ``apply_command`` returns for it."""

    __slots__ = ()


@dataclass(frozen=True)
class KillTrial(Command[None]):
    """Stop one running trial as USER_CANCELED (NNI's ``DELETE trial-jobs/<id>``, ``kill_trial_job``)."""

    trial_id: str


@dataclass(frozen=True)
class UpdateConfig(Command["Awaitable[None] | None"]):
    """Change ``field`` (camelCase, one of config.UPDATABLE_FIELDS) to ``value`` (NNI's ``PUT
    experiment?update_type=...``, ``update_*``). Applying it returns an awaitable when the
    loop completes it later (a search space, once the tuner took it), else None."""

    field: str
    value: Any


@dataclass(frozen=True)
class SubmitTrial(Command["tuple[str, concurrent.futures.Future]"]):
    """Queue a trial with these parameters (a strategy's ``submit_trial``); applying it returns
    the trial's id and a future of its (final state, final value)."""

    parameters: dict[str, Any]


@dataclass(frozen=True)
class AddCustomizedTrial(Command[TrialRecord]):
    """NNI's customized trial (``POST trial-jobs``, the web UI's "Add trial"): parameters a user
    chose, checked against the search space; applying it returns the queued trial."""

    parameters: Any


@dataclass(frozen=True)
class ImportData(Command[int]):
    """NNI's ``POST experiment/import-data``: earlier results for the tuner, read by
    imports.read_import; ``on_taken`` is called once the tuner took them. Returns how many."""

    batch: ImportBatch
    on_taken: Callable[[], None] | None = None


@dataclass(frozen=True)
class StopSearch(Command[None]):
    """Stop the search gracefully (NNI's ``DELETE experiment``); asking again changes nothing
    (a second stop from the experiment's own process, ``expctl stop --cancel``, kills at once)."""


@dataclass(frozen=True)
class StrategyFinished(Command[None]):
    """The experiment's strategy returned (``error`` None) or raised (its traceback)."""

    error: str | None


class CommandedSearch(Protocol):
    """What the commands call on a running search (the trial runner); each call refuses by
    raising the engine's Refusal kinds."""

    @property
    def stop_requested(self) -> bool:
        """Whether a stop (or a preemption) was asked for."""
        ...

    def request_stop(self, *, kill_now: bool = False) -> None: ...

    def kill_trial(self, trial_id: str) -> None: ...

    def update_config(self, field: str, value: Any) -> Awaitable[None] | None: ...

    def submit_trial(self, parameters: dict[str, Any]) -> tuple[str, concurrent.futures.Future]: ...

    def add_customized_trial(self, parameters: Any) -> TrialRecord: ...

    def import_data(self, batch: ImportBatch, on_taken: Callable[[], None] | None = None) -> int: ...

    def strategy_finished(self, error: str | None) -> None: ...


def apply_command(search: CommandedSearch, command: Command[R]) -> R:
    """Apply ``command`` to ``search`` (on its event loop) and return what it returns; the
    search's refusals are raised on."""
    result: Any = None
    if isinstance(command, KillTrial):
        search.kill_trial(command.trial_id)
    elif isinstance(command, UpdateConfig):
        result = search.update_config(command.field, command.value)
    elif isinstance(command, SubmitTrial):
        result = search.submit_trial(command.parameters)
    elif isinstance(command, AddCustomizedTrial):
        result = search.add_customized_trial(command.parameters)
    elif isinstance(command, ImportData):
        result = search.import_data(command.batch, on_taken=command.on_taken)
    elif isinstance(command, StopSearch):
        if not search.stop_requested:
            search.request_stop()
    elif isinstance(command, StrategyFinished):
        search.strategy_finished(command.error)
    else:
        raise TypeError(f"not a command to a running search: {command!r}")
    return cast(R, result)
