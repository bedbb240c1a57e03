"""A trial's processes are bounded (``trialProcessLimit``): a fork bomb, in its process
group and out of it (``setsid``), is ended by the watchdog, the trial ends FAILED with the
limit named in its stderr, and none of its processes is left. Real processes, a real
experiment."""
from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from expmgr import Experiment, ExperimentConfig
from tests.helpers.common import wait_until, write_script

LIMIT = 10
BOMB = """
    import os, sys, time
    import expmgr
    expmgr.get_next_parameter()
    # Every sleeper carries BOMB_TAG: the test finds any left by it.
    os.environ["BOMB_TAG"] = os.environ["BOMB_TAG_VALUE"]
    pids = os.open(os.environ["BOMB_PIDS"], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    for child in range(int(os.environ["BOMB_SIZE"])):
        pid = os.fork()
        if pid == 0:
            if child % 2:
                os.setsid()   # out of the trial's group: found by its marker
            os.execvp("sleep", ["sleep", "300"])
        os.write(pids, f"{pid}\\n".encode())
    time.sleep(300)
"""


def tagged_processes(tag: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get("BOMB_TAG") == tag and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:
            pass
    return found


@pytest.mark.parametrize("warm", ["off", "auto"])   # cold, and forked from a warm template
def test_a_fork_bomb_over_the_process_limit_ends_failed_with_the_limit_named_and_nothing_left(
        tmp_path: Path, monkeypatch, warm: str):
    code = tmp_path / "code"
    code.mkdir()
    write_script(code, "trial.py", BOMB)
    tag, pids = str(tmp_path), tmp_path / "pids"
    monkeypatch.setenv("BOMB_TAG_VALUE", tag)
    monkeypatch.setenv("BOMB_PIDS", str(pids))
    monkeypatch.setenv("BOMB_SIZE", str(3 * LIMIT))
    experiment = Experiment(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1]}}, trial_command="python3 trial.py",
        trial_code_directory=code, trial_concurrency=1, max_trial_number=1, tuner={"name": "Random"},
        training_service={"platform": "local", "trial_process_limit": LIMIT, "trial_warm_start": warm},
        trial_grace_period=1,
        experiment_working_directory=tmp_path / "home"))
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=120), "the trial ended (it would sleep 300 s otherwise)"
        [trial] = experiment.list_trial_jobs()
        assert trial.status == "FAILED"
        stderr = (experiment.paths.trial_dir(trial.trialJobId) / "stderr").read_text()
        assert f"more than its limit of {LIMIT} (trialProcessLimit): all of them were killed" in stderr, stderr
        assert wait_until(lambda: not tagged_processes(tag), what="every process of the bomb gone")
        started = [int(pid) for pid in pids.read_text().split()]
        assert len(started) >= LIMIT, "the bomb went over the limit before it was ended"
        if warm == "auto":
            assert (experiment.paths.log_dir / "warm-template.log").exists(), "the trial was started warm"
            assert "warm start not used" not in experiment.paths.experiment_log.read_text()
    finally:
        experiment.stop()
        for process in tagged_processes(tag):
            process.kill()


@pytest.mark.parametrize("warm", ["off", "auto"])
def test_a_trial_within_its_limit_and_the_limit_off_are_left_alone(tmp_path: Path, monkeypatch, warm: str):
    code = tmp_path / "code"
    code.mkdir()
    write_script(code, "trial.py", BOMB.replace("time.sleep(300)", "expmgr.report_final_result(1.0)"))
    tag, pids = str(tmp_path), tmp_path / "pids"
    monkeypatch.setenv("BOMB_TAG_VALUE", tag)
    monkeypatch.setenv("BOMB_PIDS", str(pids))
    monkeypatch.setenv("BOMB_SIZE", str(LIMIT))
    experiment = Experiment(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1, 2]}}, trial_command="python3 trial.py",
        trial_code_directory=code, trial_concurrency=1, max_trial_number=1, tuner={"name": "GridSearch"},
        training_service={"platform": "local", "trial_process_limit": 3 * LIMIT, "trial_warm_start": warm},
        trial_grace_period=1,
        experiment_working_directory=tmp_path / "home"))
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=120)
        assert [trial.status for trial in experiment.list_trial_jobs()] == ["SUCCEEDED"]
    finally:
        experiment.stop()
        for process in tagged_processes(tag):
            process.kill()
