"""Training services: where trial processes run. ``base`` has the interface, ``local`` this machine."""
from expmgr.training.base import TrialEvents, TrialLaunch, TrainingService, TrainingServiceError

__all__ = ["TrialEvents", "TrialLaunch", "TrainingService", "TrainingServiceError"]
