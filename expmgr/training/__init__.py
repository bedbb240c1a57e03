"""Training services: where trial processes run. ``base`` has the interface (process
control), ``files`` the trial-files port (a trial's output, reports and checkpoint),
``local`` this machine, ``ray`` a Ray cluster, ``remote`` machines reached by SSH, ``hybrid``
a list of services as one.

May import: ``expmgr.config`` (a service is built from its part of the config),
``expmgr.algorithms`` and the bottom modules (layout, log, states, metrics, trial); nothing
from store, dispatcher, engine, server, experiment or cli.
"""
from __future__ import annotations

import dataclasses
import importlib
from typing import TYPE_CHECKING, Callable

from expmgr.training.base import (SystemLaunchError, TrialEvents, TrialLaunch, TrainingService,
                                  TrainingServiceError)
from expmgr.training.files import TRIAL_LOGS, TrialFiles, TrialFilesError

if TYPE_CHECKING:
    from pathlib import Path

    from expmgr.config import ResolvedConfig
    from expmgr.layout import ExperimentPaths

__all__ = ["SystemLaunchError", "TRIAL_LOGS", "TrialEvents", "TrialFiles", "TrialFilesError", "TrialLaunch",
           "TrainingService", "TrainingServiceError", "create_training_service", "trial_files"]

def create_training_service(config: "ResolvedConfig", events: TrialEvents, paths: "ExperimentPaths",
                            manager_host: str = "127.0.0.1", report_socket: "Path | None" = None) -> TrainingService:
    """The training service ``config`` asks for, telling ``events`` what becomes of its
    trials; trials reach the manager at ``manager_host`` (its server's local address), and
    local trials send their reports to ``report_socket`` when there is one (the server's
    report_socket.py; trials on other machines, or in Ray, never get it).
    Built by the factory its platform names (``expmgr.config.PLATFORMS``). A list of services (NNI's
    hybrid form) is a ``HybridTrainingService`` over each one's service, built so, each
    telling ``events`` of its own trials."""
    if len(config.training_services) == 1:
        return _service_of(config, events, paths, manager_host, report_socket)
    from expmgr.training.hybrid import HybridTrainingService
    members = [_service_of(dataclasses.replace(config, training_service=section, training_services=(section,)),
                           events, paths, manager_host, report_socket) for section in config.training_services]
    return HybridTrainingService(members, names=[f"trainingService[{index}] ({section.platform})"
                                                 for index, section in enumerate(config.training_services)])


def _service_of(config: "ResolvedConfig", events: TrialEvents, paths: "ExperimentPaths",
                manager_host: str, report_socket: "Path | None") -> TrainingService:
    """The service of ``config``'s one training service (``config.training_service``)."""
    from expmgr.config import PLATFORMS
    platform = PLATFORMS.get(config.training_service.platform)
    if platform is None:
        raise TrainingServiceError(f"no training service for platform {config.training_service.platform!r}")
    module, function = platform.service.split(":")
    factory: Callable[..., TrainingService] = getattr(importlib.import_module(module), function)
    return factory(config, events, paths, manager_host, report_socket=report_socket)


def trial_files(paths: "ExperimentPaths", platform: str) -> TrialFiles:
    """The files of the trials of the experiment at ``paths`` whose trials run on
    ``platform`` (as stored with it): what its service's ``files`` reads, built without the
    service, for readers of a stored experiment (the server, ``expctl log``), by the
    callable its entry of ``expmgr.config.PLATFORMS`` names. A list of services, stored as
    ``local+remote``, is read by the one its members share (each keeps its trials' files
    in the manager's ``trials/<id>/``, as ``HybridTrainingService`` requires)."""
    from expmgr.config import PLATFORMS
    from expmgr.config._platforms import HYBRID_SEPARATOR   # joins a list's platforms (platforms_label)
    names = platform.split(HYBRID_SEPARATOR)
    unknown = [name for name in names if name not in PLATFORMS]
    if unknown:
        raise TrainingServiceError(f"no trial files for platform {unknown[0]!r}"
                                   f"{f' (in {platform!r})' if len(names) > 1 else ''}: expected one of "
                                   f"{', '.join(PLATFORMS)}")
    kinds = {PLATFORMS[name].files for name in names}
    if len(kinds) > 1:
        raise TrainingServiceError(
            f"no trial files for platform {platform!r}: its training services keep their trials' files in "
            f"different ways ({', '.join(f'{name}: {PLATFORMS[name].files}' for name in names)})")
    module, name = kinds.pop().split(":")
    files: Callable[..., TrialFiles] = getattr(importlib.import_module(module), name)
    return files(paths)
