"""The time no manager ran is no one's run time: after a SIGKILL of the experiment process
and ``expctl resume``, the attempt the manager died under ends when the manager was last
known alive (the watchdog notes the kill in the trial's stderr), so neither the trial's
duration nor the experiment's counts the downtime; and a trial's duration is one number
(the sum of its attempts' running times), the same in the REST answer the web UI reads and
in ``expctl trial ls``. A real daemon, a real SIGKILL, a real resume."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

from expmgr import Experiment
from expmgr.store.registry import Registry
from tests.helpers.common import REPO, wait_until, write_script

DOWNTIME = 3.0
"""Seconds the experiment stays without a manager: more than any delay a busy machine adds."""

# The first attempt runs silently until its manager dies; the one after the resume ends at once.
TRIAL = """
    import os, time, expmgr
    expmgr.get_next_parameter()
    if os.environ["EXPMGR_TRIAL_ATTEMPT"] == "1":
        time.sleep(300)
    expmgr.report_final_result(1.0)
"""


def test_the_downtime_after_a_sigkill_is_neither_the_trials_nor_the_experiments_run_time(
        tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", TRIAL)
    (tmp_path / "config.yml").write_text(
        "searchSpace: {x: {_type: choice, _value: [1]}}\n"
        f"trialCommand: python3 trial.py\ntrialCodeDirectory: {code_dir}\ntrialConcurrency: 1\n"
        "maxTrialNumber: 1\ntrialGracePeriod: 1s\ntuner: {name: GridSearch}\n")
    home = tmp_path / "home"
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}

    def expctl(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "expmgr.cli", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
    created = expctl("create", "--config", "config.yml", "--port", "0")
    assert created.returncode == 0, created.stderr
    exp_id = created.stdout.split()[1]
    database = home / exp_id / "db" / "experiment.sqlite"

    def rows(query: str) -> list:
        connection = sqlite3.connect(database)
        try:
            return connection.execute(query).fetchall()
        finally:
            connection.close()
    wait_until(lambda: rows("SELECT COUNT(*) FROM attempts")[0][0] == 1, timeout=60, what="the trial running")
    entry = Registry(home).get(exp_id)
    os.kill(entry.pid, signal.SIGKILL)
    killed = time.time()
    wait_until(lambda: not psutil.pid_exists(entry.pid) or psutil.Process(entry.pid).status() == "zombie",
               what="the daemon gone")
    wait_until(lambda: time.time() > killed + DOWNTIME, timeout=DOWNTIME + 5, what="some downtime")
    resumed_at = time.time()
    resumed = expctl("resume", exp_id, "--port", "0", "--foreground", "--exit-when-done")
    assert resumed.returncode == 0, resumed.stderr

    [(trial_id, status, first_start, last_end)] = rows("SELECT trial_id, status, start_time, end_time FROM trials")
    assert status == "SUCCEEDED"
    (start1, end1, state1), (start2, end2, _) = rows(
        "SELECT start_time, end_time, status FROM attempts ORDER BY attempt")
    assert state1 == "CRASHED"
    assert end1 < resumed_at, "the attempt the manager died under ends before the resume, not at it"
    assert "the experiment process ended without stopping this trial" in (
        home / exp_id / "trials" / trial_id / "stderr").read_text()
    ran = (end1 - start1) + (end2 - start2)
    assert ran < (last_end - first_start) - DOWNTIME / 2, "the downtime between the attempts is not counted"

    # One duration: expctl trial ls and the REST view the web UI reads say the same number.
    [listed] = json.loads(expctl("trial", "ls", exp_id, "--json").stdout)
    assert listed["seconds"] == round(ran, 1)
    view = served_trial(home, exp_id, trial_id)
    assert abs(view["duration"] - ran) < 1e-6 and "runningSince" not in view

    # The experiment's run time: its runs, the dead one ending where its manager was last seen.
    runs = rows("SELECT started, ended FROM runs ORDER BY id")
    assert len(runs) == 2 and runs[0][1] is not None and runs[0][1] < resumed_at <= runs[1][0]


def served_trial(home: Path, exp_id: str, trial_id: str) -> dict:
    """The trial as the web UI's server sends it (``expctl view``'s server, in this process)."""
    viewer = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{viewer.port}/api/v1/expmgr/trials/{trial_id}",
                                    timeout=30) as answer:
            return json.loads(answer.read())
    finally:
        viewer.stop()
