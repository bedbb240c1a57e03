"""Training services: where trial processes run. ``base`` has the interface (process
control), ``files`` the trial-files port (a trial's output, reports and checkpoint),
``local`` this machine, ``ray`` a Ray cluster.

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
    Built by the factory its platform names (``expmgr.config.PLATFORMS``)."""
    from expmgr.config import PLATFORMS
    if len(config.training_services) > 1:
        raise _not_built(config.platform, hybrid=True)
    platform = PLATFORMS.get(config.training_service.platform)
    if platform is None:
        raise TrainingServiceError(f"no training service for platform {config.training_service.platform!r}")
    if platform.service is None:
        raise _not_built(platform.name)
    module, function = platform.service.split(":")
    factory: Callable[..., TrainingService] = getattr(importlib.import_module(module), function)
    return factory(config, events, paths, manager_host)


def _not_built(platform: str, *, hybrid: bool = False) -> TrainingServiceError:
    """The one refusal to start trials where the config is read and checked but no service
    runs them yet: a platform whose ``PLATFORMS`` entry names no service (remote), and a
    list of several services (hybrid, ``local+remote``)."""
    from expmgr.config import PLATFORMS
    what = f"a list of training services (hybrid: {platform})" if hybrid else f"the {platform} training service"
    built = ", ".join(name for name, entry in PLATFORMS.items() if entry.service is not None)
    return TrainingServiceError(f"cannot start: {what} is not built yet (its config is read and checked); "
                                f"expmgr runs trials on one of: {built}")


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
