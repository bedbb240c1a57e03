"""The Experiment API: start, watch and stop one experiment from Python, and the hosts
that run one (``manager.Manager``: engine and server; ``viewer.Viewer``: the server
alone, over a stopped experiment's store).

It stands where NNI's ``nni.experiment`` does: ``Experiment``, ``ExperimentConfig``,
``AlgorithmConfig``, ``LocalConfig`` and NNI's records, so ``from nni.experiment import X``
becomes ``from expmgr.experiment import X`` (docs/nni-migration.md, "Python API").

May import: server, engine, store, training, dispatcher, config, algorithms and the
bottom modules (layout, log, states, metrics, trial); nothing from cli.
"""
from expmgr.config import AlgorithmConfig, ExperimentConfig, LocalConfig
from expmgr.experiment.errors import ExperimentError, HostError, PortInUseError
from expmgr.experiment.experiment import Experiment, current_experiment
from expmgr.server.auth import AccessError
from expmgr.experiment.records import TrialHyperParameters, TrialJob, TrialMetricData, TrialResult
from expmgr.experiment.strategy import TrialHandle, TrialOutcome

__all__ = ["AccessError", "AlgorithmConfig", "Experiment", "ExperimentConfig", "ExperimentError", "HostError",
           "LocalConfig", "PortInUseError", "current_experiment", "TrialHandle", "TrialHyperParameters", "TrialJob",
           "TrialMetricData", "TrialOutcome", "TrialResult"]
