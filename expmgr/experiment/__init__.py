"""The Experiment API: start, watch and stop one experiment from Python."""
from expmgr.experiment.experiment import Experiment, ExperimentError, PortInUseError, current_experiment
from expmgr.experiment.records import TrialJob, TrialResult
from expmgr.experiment.strategy import TrialHandle, TrialOutcome

__all__ = ["Experiment", "ExperimentError", "PortInUseError", "current_experiment", "TrialHandle", "TrialJob", "TrialOutcome", "TrialResult"]
