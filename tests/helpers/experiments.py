"""Experiment configs and tuner sources that tests in several folders start from."""
from __future__ import annotations

from pathlib import Path

from expmgr import ExperimentConfig


def grid_config(tmp_path: Path, code_dir: Path, **overrides) -> ExperimentConfig:
    fields = dict(search_space={"x": {"_type": "choice", "_value": list(range(6))}},
                  trial_command="python3 trial.py", trial_code_directory=code_dir, trial_concurrency=2,
                  max_trial_number=6, tuner={"name": "GridSearch"}, trial_grace_period=1,
                  experiment_working_directory=tmp_path / "home")
    fields.update(overrides)
    return ExperimentConfig(**fields)


def strategy_config(tmp_path: Path, code_dir: Path, **overrides) -> ExperimentConfig:
    fields = dict(trial_command="python3 trial.py", trial_code_directory=code_dir, trial_concurrency=2,
                  max_trial_number=4, experiment_working_directory=tmp_path / "home")
    fields.update(overrides)
    return ExperimentConfig(**fields)


CRASHING_TUNER = """
    from expmgr.algorithms.tuner import Tuner

    class ExplodingTuner(Tuner):
        def update_search_space(self, search_space):
            self.calls = 0

        def generate_parameters(self, parameter_id, **kwargs):
            self.calls += 1
            if self.calls > 2:
                raise RuntimeError("tuner exploded on purpose")
            return {"x": self.calls}

        def receive_trial_result(self, parameter_id, parameters, value, **kwargs):
            pass
"""
