"""Servers to test the REST routes and the websocket against: a real experiment whose
trials advance one step per file the test creates, and a large finished one served by
``Experiment.view``; plus a small HTTP client and a websocket client."""
from __future__ import annotations

from pathlib import Path

import pytest

from expmgr import Experiment, ExperimentConfig
from tests.helpers.common import wait_until, write_script
from tests.helpers.fill import fill_experiment
from tests.helpers.server import STEPPED_TRIAL, Stepped, sockets  # noqa: F401 - sockets: the websocket client fixture


@pytest.fixture
def stepped(tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch):
    write_script(code_dir, "trial.py", STEPPED_TRIAL)
    gates = tmp_path / "gates"
    gates.mkdir()
    monkeypatch.setenv("GATE_DIR", str(gates))
    config = ExperimentConfig(
        experiment_name="stepped", search_space={"x": {"_type": "choice", "_value": [1, 2, 3, 4]}},
        trial_command="python3 trial.py", trial_code_directory=code_dir, trial_concurrency=2,
        max_trial_number=4, tuner={"name": "GridSearch"}, trial_grace_period=2,
        experiment_working_directory=tmp_path / "home")
    experiment = Experiment(config)
    stepped = Stepped(experiment, gates)
    # Stop what was started even when the setup fails (a start that fails half-way, no two
    # running trials in time): a leaked experiment's trials would outlive the test.
    try:
        experiment.start(port=0)
        wait_until(lambda: len(stepped.running()) == 2, what="two running trials")
        yield stepped
    finally:
        stepped.release()
        experiment.stop()


@pytest.fixture
def filled_view(tmp_path: Path):
    """A finished experiment of 30 trials with 4 intermediate results each, viewed."""
    home = tmp_path / "home"
    exp_id = fill_experiment(home, trials=30, metrics_per_trial=4)
    view = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
    yield view
    view.stop()


