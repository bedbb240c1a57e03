"""Training services: where trial processes run. ``base`` has the interface (process
control), ``files`` the trial-files port (a trial's output, reports and checkpoint),
``local`` this machine, ``ray`` a Ray cluster.

May import: ``expmgr.config`` (a service is built from its part of the config),
``expmgr.algorithms`` and the bottom modules (layout, log, states, metrics, trial); nothing
from store, dispatcher, engine, server, experiment or cli.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from expmgr.training.base import (SystemLaunchError, TrialEvents, TrialLaunch, TrainingService,
                                  TrainingServiceError)
from expmgr.training.files import TRIAL_LOGS, TrialFiles, TrialFilesError

if TYPE_CHECKING:
    from expmgr.config import ResolvedConfig
    from expmgr.layout import ExperimentPaths

__all__ = ["SystemLaunchError", "TRIAL_LOGS", "TrialEvents", "TrialFiles", "TrialFilesError", "TrialLaunch",
           "TrainingService", "TrainingServiceError", "create_training_service", "trial_files"]

SHARED_FOLDER_PLATFORMS = ("local", "ray")
"""Platforms whose trials' folders are the manager's own ``trials/<id>/`` (Ray's through a
folder every node shares)."""


def create_training_service(config: "ResolvedConfig", events: TrialEvents, paths: "ExperimentPaths",
                            manager_host: str = "127.0.0.1") -> TrainingService:
    """The training service ``config`` asks for, telling ``events`` what becomes of its
    trials; trials reach the manager at ``manager_host`` (its server's local address).
    A new service is one module plus one branch here, and one in ``trial_files``."""
    from expmgr.config import ResolvedLocalConfig, ResolvedRayConfig
    service = config.training_service
    if isinstance(service, ResolvedLocalConfig):
        from expmgr.training.local import LocalTrainingService
        return LocalTrainingService(service, config.trial_gpu_number, events, paths, manager_host=manager_host,
                                    log_limits=config.log_limits)
    if isinstance(service, ResolvedRayConfig):
        from expmgr.training.ray import RayTrainingService
        return RayTrainingService(service, events, paths, manager_host=manager_host, log_limits=config.log_limits)
    raise TrainingServiceError(f"no training service for platform {service.platform!r}")


def trial_files(paths: "ExperimentPaths", platform: str) -> TrialFiles:
    """The files of the trials of the experiment at ``paths`` whose trials run on
    ``platform`` (as its stored config names it): what its service's ``files`` reads, built
    without the service, for readers of a stored experiment (the server, ``expctl log``)."""
    from expmgr.training._folder import SharedTrialFolders
    if platform in SHARED_FOLDER_PLATFORMS:
        return SharedTrialFolders(paths)
    raise TrainingServiceError(f"no trial files for platform {platform!r}: expected one of "
                               f"{', '.join(SHARED_FOLDER_PLATFORMS)}")
