"""The Experiment API: start, watch and stop one experiment from Python."""
from expmgr.experiment.experiment import Experiment, ExperimentError, current_experiment
from expmgr.experiment.records import TrialJob, TrialResult
from expmgr.experiment.strategy import TrialHandle, TrialOutcome

__all__ = ["Experiment", "ExperimentError", "current_experiment", "TrialHandle", "TrialJob", "TrialOutcome", "TrialResult"]
