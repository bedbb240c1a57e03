"""Training services: where trial processes run. ``base`` has the interface (process
control), ``files`` the trial-files port (a trial's output, reports and checkpoint),
``local`` this machine, ``ray`` a Ray cluster, ``remote`` machines reached by SSH.

May import: ``expmgr.config`` (a service is built from its part of the config),
``expmgr.algorithms`` and the bottom modules (layout, log, states, metrics, trial); nothing
from store, dispatcher, engine, server, experiment or cli.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Callable

from expmgr.training.base import (SystemLaunchError, TrialEvents, TrialLaunch, TrainingService,
                                  TrainingServiceError)
from expmgr.training.files import TRIAL_LOGS, TrialFiles, TrialFilesError

if TYPE_CHECKING:
    from expmgr.config import ResolvedConfig
    from expmgr.layout import ExperimentPaths

__all__ = ["SystemLaunchError", "TRIAL_LOGS", "TrialEvents", "TrialFiles", "TrialFilesError", "TrialLaunch",
           "TrainingService", "TrainingServiceError", "create_training_service", "trial_files"]

def create_training_service(config: "ResolvedConfig", events: TrialEvents, paths: "ExperimentPaths",
                            manager_host: str = "127.0.0.1") -> TrainingService:
    """The training service ``config`` asks for, telling ``events`` what becomes of its
    trials; trials reach the manager at ``manager_host`` (its server's local address).
    Built by the factory its platform names (``expmgr.config.PLATFORMS``); a platform with no
    service yet or a list of services (hybrid) gets one whose ``start()`` refuses."""
    from expmgr.config import PLATFORMS
    if len(config.training_services) > 1:
        return _NotBuilt(f"a list of training services (hybrid: {config.platform})", paths, manager_host)
    platform = PLATFORMS.get(config.training_service.platform)
    if platform is None:
        raise TrainingServiceError(f"no training service for platform {config.training_service.platform!r}")
    if platform.service is None:
        return _NotBuilt(f"the {platform.name} training service", paths, manager_host)
    module, function = platform.service.split(":")
    factory: Callable[..., TrainingService] = getattr(importlib.import_module(module), function)
    return factory(config, events, paths, manager_host)


class _NotBuilt(TrainingService):
    """The one refusal to run trials where the config is read and checked but no service
    runs them yet (a platform whose ``PLATFORMS`` entry names no service; a list of
    several services, hybrid): ``start()`` raises a one-line TrainingServiceError, which ends
    the experiment in ERROR with it before any trial, as any service failing to start."""

    def __init__(self, what: str, paths: "ExperimentPaths", manager_host: str) -> None:
        from expmgr.config import PLATFORMS
        from expmgr.training._folder import SharedTrialFolders
        built = ", ".join(name for name, entry in PLATFORMS.items() if entry.service is not None)
        self.refusal = (f"cannot start: {what} is not built yet (its config is read and checked); "
                        f"expmgr runs trials on one of: {built}")
        self.files = SharedTrialFolders(paths)
        self._manager_host = manager_host

    async def start(self) -> None:
        raise TrainingServiceError(self.refusal)

    def has_capacity(self) -> bool:
        return False

    async def launch(self, trial: TrialLaunch) -> None:
        raise TrainingServiceError(self.refusal)

    def signal(self, trial_id: str, signum: int) -> bool:
        return False

    async def stop(self, grace_period: float, signum: int = 15) -> None:
        return None   # it started nothing

    def manager_host(self) -> str:
        return self._manager_host

    def end_leftover(self, trial_id: str, pid: int, pid_started: float) -> bool:
        return False


def trial_files(paths: "ExperimentPaths", platform: str) -> TrialFiles:
    """The files of the trials of the experiment at ``paths`` whose trials run on
    ``platform`` (as stored with it): what its service's ``files`` reads, built without the
    service, for readers of a stored experiment (the server, ``expctl log``), by the
    callable its entry of ``expmgr.config.PLATFORMS`` names."""
    from expmgr.config import PLATFORMS
    entry = PLATFORMS.get(platform)
    if entry is None:
        raise TrainingServiceError(f"no trial files for platform {platform!r}: expected one of "
                                   f"{', '.join(PLATFORMS)}")
    module, name = entry.files.split(":")
    files: Callable[..., TrialFiles] = getattr(importlib.import_module(module), name)
    return files(paths)
