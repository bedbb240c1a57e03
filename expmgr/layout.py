"""Where expmgr keeps things on disk: the one place that knows the file layout.

    paths = ExperimentPaths(Path("~/expmgr-experiments/ab12cd34").expanduser())
    paths.trial_dir("Xy3zQ") / "stdout"
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

HOME_ENV = "EXPMGR_HOME"
REGISTRY_FILE = "registry.sqlite"


def default_home() -> Path:
    """The folder holding every experiment: ``$EXPMGR_HOME`` or ``~/expmgr-experiments``."""
    return Path(os.environ.get(HOME_ENV) or "~/expmgr-experiments").expanduser().absolute()


@dataclass(frozen=True)
class ExperimentPaths:
    """The files of one experiment, all below ``root`` (``<home>/<exp_id>``)."""

    root: Path

    @property
    def config_file(self) -> Path:
        return self.root / "config.yml"

    @property
    def access_file(self) -> Path:
        """Host, url prefix and access token of its server (mode 0600; see manager/auth.py)."""
        return self.root / "access.json"

    @property
    def database(self) -> Path:
        return self.root / "db" / "experiment.sqlite"

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"

    @property
    def experiment_log(self) -> Path:
        return self.log_dir / "experiment.log"

    @property
    def dispatcher_log(self) -> Path:
        return self.log_dir / "dispatcher.log"

    @property
    def trials_dir(self) -> Path:
        return self.root / "trials"

    def trial_dir(self, trial_id: str) -> Path:
        return self.trials_dir / trial_id

    def create(self) -> None:
        for folder in (self.database.parent, self.log_dir, self.trials_dir):
            folder.mkdir(parents=True, exist_ok=True)


@dataclass(frozen=True)
class TrialFiles:
    """The files of one trial, in ``trials/<trial_id>/``."""

    root: Path

    @property
    def parameter_file(self) -> Path:
        return self.root / "parameter.json"

    @property
    def stdout(self) -> Path:
        return self.root / "stdout"

    @property
    def stderr(self) -> Path:
        return self.root / "stderr"

    @property
    def trial_log(self) -> Path:
        return self.root / "trial.log"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def checkpoint_dir(self) -> Path:
        return self.root / "checkpoint"

    @property
    def preempting_marker(self) -> Path:
        """Written by ``mark_preempting()`` with the attempt number."""
        return self.root / "preempting"
