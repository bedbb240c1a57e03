"""Training services: where trial processes run. ``base`` has the interface, ``local`` this machine.

May import: ``expmgr.config`` (a service is built from its part of the config),
``expmgr.algorithms`` and the bottom modules (layout, log, states, metrics, trial); nothing
from store, dispatcher, engine, server, experiment or cli.
"""
from expmgr.training.base import TrialEvents, TrialLaunch, TrainingService, TrainingServiceError

__all__ = ["TrialEvents", "TrialLaunch", "TrainingService", "TrainingServiceError"]
