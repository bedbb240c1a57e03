"""One duration everywhere: a trial's duration is the time its attempts' processes ran, all
together (not the wait before a retry); the server computes it and sends it (``duration``,
with ``runningSince`` while an attempt runs), and ``expctl trial ls`` prints the same number.
A real experiment with a retried trial, a real server, real expctl."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from expmgr import Experiment, ExperimentConfig
from tests.helpers.common import REPO, write_script

# The first attempt fails once its retry can only start later; the second one succeeds.
TRIAL = """
    import os, time, expmgr
    expmgr.get_next_parameter()
    if os.environ["EXPMGR_TRIAL_ATTEMPT"] == "1":
        raise SystemExit(1)
    expmgr.report_final_result(1.0)
"""


def get(port: int, route: str) -> object:
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{route}", timeout=30) as answer:
        return json.loads(answer.read())


def test_a_retried_trials_duration_is_its_attempts_time_in_rest_and_in_trial_ls(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", TRIAL)
    home = tmp_path / "home"
    experiment = Experiment(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1]}}, trial_command="python3 trial.py",
        trial_code_directory=code_dir, trial_concurrency=1, max_trial_number=1, max_trial_retries=1,
        tuner={"name": "GridSearch"}, experiment_working_directory=home))
    assert experiment.run(port=0) is True
    [trial] = experiment.list_trial_jobs()
    view = get(experiment.port, f"/api/v1/expmgr/trials/{trial.trialJobId}")
    attempts = view["attemptDetails"]
    assert [a["status"] for a in attempts] == ["FAILED", "SUCCEEDED"]
    ran = sum(a["endTime"] - a["startTime"] for a in attempts) / 1000
    assert abs(view["duration"] - ran) < 0.002 and "runningSince" not in view
    # Not the first start to the last end, which holds the wait before the retry (a big one,
    # a manager's downtime, in test_resume_downtime.py).
    assert view["duration"] <= (view["endTime"] - view["startTime"]) / 1000 + 0.002
    [changed] = get(experiment.port, "/api/v1/expmgr/changes")["trials"]
    assert changed["duration"] == view["duration"]
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    listed = subprocess.run([sys.executable, "-m", "expmgr.cli", "trial", "ls", experiment.id, "--json"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert json.loads(listed.stdout)[0]["seconds"] == round(view["duration"], 1)
    experiment.stop()
