"""Fixtures for the browser tests: Debian's Chromium driven by Playwright, one fresh
browser (and profile) per test, and real experiments to point it at.

Chromium is never downloaded (no ``playwright install``): the tests use
``/usr/bin/chromium``, which ``.ci/run`` installs with apt when it is missing.
Every test leaves a screenshot of its page in its ``tmp_path`` and in
``<pytest basetemp>/webui-screenshots/`` (or ``$EXPMGR_SCREENSHOT_DIR``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from expmgr import Experiment, ExperimentConfig
from tests.helpers.browser import GATED_TRIAL, GatedExperiment, screenshot_dir, ui  # noqa: F401 - the browser fixtures
from tests.helpers.common import write_script


@pytest.fixture
def gated_experiment(tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch
                     ) -> Iterator[Callable[..., GatedExperiment]]:
    """Start (port 0) an experiment of GATED_TRIAL trials over x in 1..n; stopped after the test."""
    write_script(code_dir, "trial.py", GATED_TRIAL)
    gate_dir = tmp_path / "gate"
    gate_dir.mkdir()
    monkeypatch.setenv("GATE_DIR", str(gate_dir))
    started: list[Experiment] = []

    def start(trials: int = 4, concurrency: int = 2, **config: Any) -> GatedExperiment:
        experiment = Experiment(ExperimentConfig(**{
            "experiment_name": "webui-test",
            "search_space": {"x": {"_type": "choice", "_value": list(range(1, trials + 1))}},
            "trial_command": "python3 trial.py", "trial_code_directory": code_dir,
            "trial_concurrency": concurrency, "max_trial_number": trials,
            "tuner": {"name": "GridSearch"}, "trial_grace_period": 1,
            "experiment_working_directory": tmp_path / "home", **config}))
        started.append(experiment)
        experiment.start(port=0)
        return GatedExperiment(experiment, gate_dir / "release")

    yield start
    (gate_dir / "release").touch()
    for experiment in started:
        experiment.stop()
