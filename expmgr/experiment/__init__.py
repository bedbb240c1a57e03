"""The Experiment API: start, watch and stop one experiment from Python."""
from expmgr.experiment.experiment import (Experiment, ExperimentError, HostError, PortInUseError,
                                          current_experiment)
from expmgr.server.auth import AccessError
from expmgr.experiment.records import TrialJob, TrialResult
from expmgr.experiment.strategy import TrialHandle, TrialOutcome

__all__ = ["AccessError", "Experiment", "ExperimentError", "HostError", "PortInUseError", "current_experiment", "TrialHandle", "TrialJob", "TrialOutcome", "TrialResult"]
