"""Training services: where trial processes run. ``base`` has the interface, ``local`` this machine.

May import: ``expmgr.config`` (a service is built from its part of the config),
``expmgr.algorithms`` and the bottom modules (layout, log, states, metrics, trial); nothing
from store, dispatcher, engine, server, experiment or cli.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from expmgr.training.base import (SystemLaunchError, TrialEvents, TrialLaunch, TrainingService,
                                  TrainingServiceError)

if TYPE_CHECKING:
    from expmgr.config import ResolvedConfig
    from expmgr.layout import ExperimentPaths

__all__ = ["SystemLaunchError", "TrialEvents", "TrialLaunch", "TrainingService", "TrainingServiceError",
           "create_training_service"]


def create_training_service(config: "ResolvedConfig", events: TrialEvents, paths: "ExperimentPaths",
                            manager_host: str = "127.0.0.1") -> TrainingService:
    """The training service ``config`` asks for, telling ``events`` what becomes of its
    trials; trials reach the manager at ``manager_host`` (its server's local address).
    A new service is one module plus one branch here."""
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
