"""No exception escapes an event handler of the loop: a fault injected into the
store write of the trial-exit handler ends the experiment in ERROR with the
traceback, its trials stopped, instead of a trial left RUNNING forever."""
from __future__ import annotations

from pathlib import Path

import pytest

from expmgr import Experiment, ExperimentConfig
from expmgr.store import ExperimentStore
from tests.helpers.common import write_script


class InjectedFault(Exception):
    pass


def test_a_failing_trial_exit_handler_ends_the_experiment_in_error_with_its_traceback(
        tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch):
    # x=0 ends at once; x=1 runs until the experiment stops it.
    write_script(code_dir, "trial.py", """
        import time, expmgr
        if expmgr.get_next_parameter()["x"] == 1:
            time.sleep(120)
    """)

    def end_attempt(*args, **kwargs):  # fault injection into our own code, not a mock of a dependency
        raise InjectedFault("injected fault in end_attempt")

    monkeypatch.setattr(ExperimentStore, "end_attempt", end_attempt)
    experiment = Experiment(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [0, 1]}}, trial_command="python3 trial.py",
        trial_code_directory=code_dir, trial_concurrency=2, max_trial_number=2, tuner={"name": "GridSearch"},
        trial_grace_period=1, experiment_working_directory=tmp_path / "home"))
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=60), "the failing handler must end the experiment, not hang it"
    finally:
        experiment.stop()
    assert experiment.get_status() == "ERROR"
    error = experiment.get_error()
    assert "trial_exited failed" in error and "Traceback" in error
    assert "InjectedFault: injected fault in end_attempt" in error
    # the autouse fixture checks that no trial process is left behind


def test_a_failing_wait_task_of_the_training_service_ends_the_experiment_in_error(
        tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch):
    from expmgr.training import local
    write_script(code_dir, "trial.py", "import time\ntime.sleep(1)\n")
    real_exit_of = local._exit_of

    async def failing_exit_of(process):  # fault injection: the wait for the trial's exit breaks
        await real_exit_of(process)
        raise InjectedFault("injected fault in the trial's wait task")

    monkeypatch.setattr(local, "_exit_of", failing_exit_of)
    experiment = Experiment(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [0]}}, trial_command="python3 trial.py",
        trial_code_directory=code_dir, trial_concurrency=1, max_trial_number=1, tuner={"name": "GridSearch"},
        trial_grace_period=1, experiment_working_directory=tmp_path / "home"))
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=60), "a failing wait task must end the experiment, not hang it"
    finally:
        experiment.stop()
    assert experiment.get_status() == "ERROR"
    assert "the training service failed" in experiment.get_error()
    assert "InjectedFault: injected fault in the trial's wait task" in experiment.get_error()
