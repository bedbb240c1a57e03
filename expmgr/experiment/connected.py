"""An experiment running in another process, as ``Experiment.connect`` reaches it: its
registry entry says whether it still runs, SIGTERM to its process stops it (as ``expctl
stop`` does), and changes go through its REST API::

    connection = Connection(registry, running_on_port(registry, 8080))
    connection.change(TrialRunner.update_config, "trialConcurrency", 3)
    connection.stop()      # returns once it ended and its server closed
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any, Callable, cast

from expmgr.engine.runner import TrialRunner
from expmgr.experiment.errors import ExperimentError
from expmgr.experiment.remote import RestRefused, rest_call
from expmgr.layout import ExperimentPaths
from expmgr.server.auth import Access, AccessError
from expmgr.store.registry import Registry, RegistryEntry, experiment_process_alive


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

    def change(self, method: Callable[..., object], *args: Any) -> None:
        """What ``method`` of its runner would do (kill a trial, update a field), through its REST API."""
        from expmgr.config import UPDATABLE_FIELDS
        try:
            if method is TrialRunner.kill_trial:
                rest_call(self.port, "DELETE", f"trial-jobs/{args[0]}", access=self.access)
            else:
                field, value = args
                update_type = next(entry.update_type for entry in UPDATABLE_FIELDS if entry.field == field)
                rest_call(self.port, "PUT", f"experiment?update_type={update_type}",
                          {"params": {field: value}}, access=self.access)
        except RestRefused as refused:
            raise ExperimentError(str(refused)) from None
