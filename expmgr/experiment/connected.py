"""An experiment running in another process, as ``Experiment.connect`` reaches it: its
registry entry says whether it still runs, SIGTERM to its process stops it (as ``expctl
stop`` does), and commands (engine/commands.py) go through its REST API, each as NNI's
route. It is the ``Control`` (experiment/control.py) of a connected ``Experiment``::

    connection = Connection(registry, running_on_port(registry, 8080))
    connection.send(UpdateConfig("trialConcurrency", 3))    # PUT experiment?update_type=TRIAL_CONCURRENCY
    connection.stop()      # returns once it ended and its server closed
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Callable, TypeVar, cast

from expmgr.engine.commands import Command, KillTrial, UpdateConfig
from expmgr.experiment.errors import ExperimentError
from expmgr.experiment.remote import RestRefused, rest_call
from expmgr.layout import ExperimentPaths
from expmgr.server.auth import Access, AccessError
from expmgr.store.registry import Registry, RegistryEntry, experiment_process_alive

R = TypeVar("R")


def running_on_port(registry: Registry, port: int) -> RegistryEntry:
    """The entry of the experiment of ``registry`` served on ``port`` (its search running,
    or ended with its server still up); ExperimentError if none."""
    entry = next((e for e in registry.entries() if e.port == port and experiment_process_alive(e)), None)
    if entry is None:
        raise ExperimentError(f"no running experiment on port {port} in {registry.path}")
    return entry


class Connection:
    """The running experiment of ``entry``: its port and access (from its access file;
    ExperimentError when that cannot be read)."""

    def __init__(self, registry: Registry, entry: RegistryEntry) -> None:
        self.registry = registry
        self.entry = entry
        self.port = cast(int, entry.port)  # running: it has its port
        try:
            self.access = Access.load(ExperimentPaths(Path(entry.dir)).access_file)
        except AccessError as error:
            raise ExperimentError(str(error)) from None

    def current_entry(self) -> RegistryEntry:
        """The experiment's entry as the registry has it now; ExperimentError when it was
        deleted meanwhile."""
        current = self.registry.get(self.entry.id)
        if current is None:
            raise ExperimentError(f"experiment {self.entry.id} is no longer in the registry "
                                  f"({self.registry.path}): it was deleted while connected")
        return current

    def stop(self) -> None:
        """SIGTERM to its process (which stops it as Ctrl+C would, then closes its server),
        then wait until it no longer serves."""
        current = self.current_entry()
        if experiment_process_alive(current):  # alive: it has its pid
            os.kill(cast(int, current.pid), signal.SIGTERM)
        self._wait_for(lambda entry: not experiment_process_alive(entry), None)

    def wait(self, timeout: float | None) -> bool:
        """Block until its search ended (or its entry is gone); False if ``timeout`` seconds
        passed first. Its server may still answer."""
        return self._wait_for(lambda entry: entry.status.is_finished() or not experiment_process_alive(entry),
                              timeout)

    def _wait_for(self, condition: Callable[[RegistryEntry], bool], timeout: float | None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            current = self.registry.get(self.entry.id)
            if current is None or condition(current):
                return True
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.1)

    def send(self, command: Command[R]) -> R:
        """Apply ``command`` through its REST API: a trial kill or a field's update, as NNI's
        client sends them; the server's refusal as ExperimentError. The other commands (a
        strategy's) only work in the process that runs the experiment."""
        from expmgr.config import UPDATABLE_FIELDS
        try:
            if isinstance(command, KillTrial):
                rest_call(self.port, "DELETE", f"trial-jobs/{command.trial_id}", access=self.access)
            elif isinstance(command, UpdateConfig):
                update_type = next(entry.update_type for entry in UPDATABLE_FIELDS if entry.field == command.field)
                rest_call(self.port, "PUT", f"experiment?update_type={update_type}",
                          {"params": {command.field: command.value}}, access=self.access)
            else:
                raise ExperimentError(f"experiment {self.entry.id} runs in another process (port {self.port}): "
                                      f"{command!r} only works in the process that runs it")
        except RestRefused as refused:
            raise ExperimentError(str(refused)) from None
        return cast(R, None)   # both answer {}
