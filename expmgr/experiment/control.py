"""How an ``Experiment`` reaches its search, whichever process runs it: one ``Control``
that sends the commands of engine/commands.py, waits for the search's end and stops it.

- ``LocalControl``: the search runs here, on the Manager's event loop.
- ``Connection`` (experiment/connected.py): it runs in another process, reached by REST.
- ``ViewControl``: a stored experiment served read-only here; it refuses every command.

    control.send(KillTrial("a1b2c"))     # ExperimentError when it is refused, saying why
    control.wait(timeout=None)           # until the search ended
    control.stop()                       # the search and its server
"""
from __future__ import annotations

from typing import Protocol, TypeVar

from expmgr.engine.commands import Command, SubmitTrial, UpdateConfig
from expmgr.engine.errors import Refusal
from expmgr.experiment.errors import ExperimentError
from expmgr.experiment.manager import Manager
from expmgr.experiment.viewer import Viewer

R = TypeVar("R")


class Control(Protocol):
    """The search of one experiment, as the Python API drives it."""

    def send(self, command: Command[R]) -> R:
        """Apply ``command`` to the search and return its result (commands.apply_command),
        awaited when the search completes it later; ExperimentError when it is refused."""
        ...

    def wait(self, timeout: float | None) -> bool:
        """Block until the search ended (DONE, STOPPED, ERROR); False if ``timeout`` seconds
        passed first. Its server may still answer."""
        ...

    def stop(self) -> None:
        """Stop the search gracefully, then its server; returns once it closed. Idempotent."""
        ...


class LocalControl:
    """The search this process runs, through its Manager's event loop: after DONE, a raised
    maxTrialNumber or maxExperimentDuration runs it again (Manager.send)."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager

    def send(self, command: Command[R]) -> R:
        try:
            return self.manager.send(command)
        except (Refusal, RuntimeError) as refused:   # RuntimeError: the experiment ended
            raise ExperimentError(self._refused(command, refused)) from None

    def _refused(self, command: Command[R], refused: Exception) -> str:
        """Why ``command`` was refused; once the server closed, what to do instead."""
        if isinstance(command, SubmitTrial):
            return f"cannot submit a trial: {refused}"
        final = self.manager.final_state
        if isinstance(command, UpdateConfig) and isinstance(refused, RuntimeError) and final is not None:
            exp_id = self.manager.exp_id
            return (f"experiment {exp_id} is {final.value} and its server closed; resume it to run more "
                    f"trials: Experiment(None, '{exp_id}').resume()")
        return str(refused)

    def wait(self, timeout: float | None) -> bool:
        return self.manager.wait_search(timeout)

    def stop(self) -> None:
        self.manager.request_stop()
        self.manager.wait()


class ViewControl:
    """A stored experiment served read-only (``Experiment.view``): no search runs, so every
    command is refused; ``stop()`` closes the view's server."""

    def __init__(self, viewer: Viewer, exp_id: str) -> None:
        self.viewer = viewer
        self.exp_id = exp_id

    def send(self, command: Command[R]) -> R:
        raise ExperimentError(f"experiment {self.exp_id} is only viewed (read-only, Experiment.view): {command!r} "
                              f"is refused; resume it to change it: Experiment(None, '{self.exp_id}').resume()")

    def wait(self, timeout: float | None) -> bool:
        raise ExperimentError(f"experiment {self.exp_id} is only viewed (read-only, Experiment.view): no search "
                              "runs to wait for; stop() closes the view")

    def stop(self) -> None:
        self.viewer.stop()
