"""expmgr: an experiment manager for hyperparameter optimization and architecture search.

The trial API is imported at once and costs next to nothing; everything else
(``Experiment``, ``ExperimentConfig``, ...) is imported on first use.
"""
from __future__ import annotations

from expmgr.trial import (
    get_attempt,
    get_checkpoint_dir,
    get_experiment_id,
    get_next_parameter,
    get_sequence_id,
    get_trial_id,
    install_preemption_handler,
    mark_preempting,
    report_final_result,
    report_intermediate_result,
)

__version__ = "0.1.0"

_LAZY = {
    "Experiment": "expmgr.experiment",
    "current_experiment": "expmgr.experiment",
    "ExperimentConfig": "expmgr.config",
    "AlgorithmConfig": "expmgr.config",
    "LocalConfig": "expmgr.config",
    "ConfigError": "expmgr.config",
    "TrialState": "expmgr.states",
    "ExperimentState": "expmgr.states",
    "Tuner": "expmgr.algorithms.tuner",
    "NoMoreTrialError": "expmgr.algorithms.tuner",
    "Assessor": "expmgr.algorithms.assessor",
    "AssessResult": "expmgr.algorithms.assessor",
}

__all__ = [
    "get_next_parameter", "report_intermediate_result", "report_final_result",
    "get_experiment_id", "get_trial_id", "get_sequence_id", "get_attempt", "get_checkpoint_dir",
    "mark_preempting", "install_preemption_handler", *_LAZY,
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'expmgr' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
