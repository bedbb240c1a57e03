"""expctl without an experiment id picks "the running experiment": one whose search runs.
A DONE experiment whose server stays (the default, as NNI's) is not running: it is neither
picked nor counted by such commands, while the commands that need a live server (stop,
update) still reach it when it is the only one served. ``experiment list`` shows its state
(DONE) and, apart, that it is served. Real experiments, real servers, real expctl."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from expmgr import Experiment, ExperimentConfig
from expmgr.store.registry import Registry
from tests.helpers.common import REPO, refuses_connections, wait_until, write_script


def expctl(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "expmgr.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def config(code_dir: Path, home: Path, script: str, trials: int) -> ExperimentConfig:
    return ExperimentConfig(search_space={"x": {"_type": "choice", "_value": [1, 2, 3]}},
                            trial_command=f"python3 {script}", trial_code_directory=code_dir, trial_concurrency=1,
                            max_trial_number=trials, tuner={"name": "GridSearch"}, trial_grace_period=1,
                            experiment_working_directory=home)


def test_a_served_done_experiment_is_not_the_running_one(code_dir: Path, tmp_path: Path):
    home = tmp_path / "home"
    write_script(code_dir, "quick.py", "import expmgr\nexpmgr.report_final_result(1.0)\n")
    write_script(code_dir, "slow.py", "import time\ntime.sleep(120)\n")
    (code_dir / "config.yml").write_text(
        "searchSpace: {x: {_type: choice, _value: [1, 2]}}\ntrialCommand: python3 quick.py\n"
        "trialConcurrency: 1\nmaxTrialNumber: 1\ntuner: {name: GridSearch}\n")
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    # Its own process (expctl stop signals it): served after DONE until stopped.
    serving = subprocess.Popen([sys.executable, "-m", "expmgr.cli", "create", "--config", "config.yml", "--port", "0",
                                "--foreground"], cwd=code_dir, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    try:
        def done_entry():  # noqa: ANN202
            entries = Registry(home).entries() if (home / "registry.sqlite").exists() else []
            return entries and entries[0].status.value == "DONE" and entries[0]
        done = wait_until(done_entry, timeout=60, what="DONE")
        running = Experiment(config(code_dir, home, "slow.py", 2))
        running.start(port=0)
        try:
            wait_until(lambda: [t.status for t in running.list_trial_jobs()] == ["RUNNING"], what="a running trial")
            [trial] = running.list_trial_jobs()
            result = expctl(home, "trial", "ls")
            assert result.returncode == 0 and trial.trialJobId in result.stdout, result.stderr
            result = expctl(home, "experiment", "status", "--table")
            assert result.returncode == 0 and result.stdout.split()[:2] == [running.id, "RUNNING"], result
            listed = {row["id"]: row for row in json.loads(expctl(home, "experiment", "list", "--json").stdout)}
            assert (listed[done.id]["status"], listed[done.id]["served"]) == ("DONE", True)
            assert (listed[running.id]["status"], listed[running.id]["served"]) == ("RUNNING", True)
        finally:
            running.stop()
        # Only the DONE one is served now: not running, so not picked for reading...
        result = expctl(home, "trial", "ls")
        assert result.returncode == 2 and f"no experiment is running (served after their end: {done.id} (DONE))" \
            in result.stderr, result.stderr
        # ...but stop (as nnictl stop) reaches the only one served.
        result = expctl(home, "stop")
        assert result.returncode == 0 and f"experiment {done.id} DONE" in result.stdout, result.stderr
        serving.communicate(timeout=60)
        assert Registry(home).get(done.id).pid is None and refuses_connections(done.port)
    finally:
        if serving.poll() is None:
            serving.kill()
            serving.communicate()
