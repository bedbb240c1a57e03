"""The Experiment API: start, watch and stop one experiment from Python."""
from expmgr.experiment.experiment import Experiment, ExperimentError
from expmgr.experiment.records import TrialJob, TrialResult

__all__ = ["Experiment", "ExperimentError", "TrialJob", "TrialResult"]
