"""Preemption: trials that checkpoint, mark themselves preempting and exit are run
again with the same parameters and checkpoint folder; SIGUSR1 to the experiment
tells every trial and stops the experiment resumable."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from expmgr import Experiment, ExperimentConfig
from tests.helpers.common import REPO, wait_until, write_script

SELF_PREEMPTING_TRIAL = """
    import os, sys
    import expmgr
    checkpoint = os.path.join(expmgr.get_checkpoint_dir(), "state")
    if expmgr.get_attempt() == 1:
        with open(checkpoint, "w") as f:
            f.write("epoch 5")
        expmgr.mark_preempting()
        sys.exit(128 + 15)
    with open(checkpoint) as f:
        resumed_from = f.read()
    expmgr.report_final_result({"default": 1.0, "resumed": resumed_from == "epoch 5"})
"""


def test_a_trial_that_marks_itself_preempting_runs_again_from_its_checkpoint(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", SELF_PREEMPTING_TRIAL)
    config = ExperimentConfig(search_space={"x": {"_type": "choice", "_value": [1]}},
                              trial_command="python3 trial.py", trial_code_directory=code_dir,
                              trial_concurrency=1, max_trial_number=1, max_trial_retries=0,
                              tuner={"name": "GridSearch"}, experiment_working_directory=tmp_path / "home")
    experiment = Experiment(config)
    assert experiment.run(port=0)
    [trial] = experiment.list_trial_jobs()
    assert (trial.status, trial.attempts, trial.finalMetric) == ("SUCCEEDED", 2, {"default": 1.0, "resumed": True})
    attempts = sqlite3.connect(experiment.paths.database).execute(
        "SELECT attempt, status, exit_code FROM attempts ORDER BY attempt").fetchall()
    assert attempts == [(1, "PREEMPTED", 143), (2, "SUCCEEDED", 0)], "not a failure, although retries are 0"


HANDLER_TRIAL = """
    import os, time
    import expmgr
    params = expmgr.get_next_parameter()
    state = os.path.join(expmgr.get_checkpoint_dir(), "state.json")
    if os.path.exists(state):
        with open(state) as f:
            saved = f.read()
        expmgr.report_final_result({"default": params["x"], "saved": saved})
    else:
        def save():
            with open(state, "w") as f:
                f.write(f"x={params['x']}")
        expmgr.install_preemption_handler(save)
        print("handler installed", flush=True)
        time.sleep(120)
"""


def test_sigusr1_preempts_every_trial_and_resume_continues_them_from_their_checkpoints(tmp_path: Path,
                                                                                      code_dir: Path):
    write_script(code_dir, "trial.py", HANDLER_TRIAL)
    (tmp_path / "config.yml").write_text(
        "searchSpace: {x: {_type: choice, _value: [1, 2]}}\ntrialCommand: python3 trial.py\n"
        f"trialCodeDirectory: {code_dir}\ntrialConcurrency: 2\nmaxTrialNumber: 2\n"
        "trialGracePeriod: 30s\ntuner: {name: GridSearch}\n")
    home = tmp_path / "home"
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "expmgr.cli"]
    process = subprocess.Popen([*command, "create", "--config", "config.yml", "--port", "0", "--foreground",
                                "--exit-when-done"],
                               cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def database() -> Path | None:
            found = list(home.glob("*/db/experiment.sqlite"))
            return found[0] if found else None

        def running() -> int:
            try:
                return database() and sqlite3.connect(database()).execute(
                    "SELECT COUNT(*) FROM trials WHERE status = 'RUNNING'").fetchone()[0]
            except sqlite3.OperationalError:
                return 0
        wait_until(lambda: running() == 2, what="two running trials")

        def ready() -> int:
            return sum("handler installed" in path.read_text() for path in home.glob("*/trials/*/stdout"))
        wait_until(lambda: ready() == 2, what="both trials' preemption handlers")
        process.send_signal(signal.SIGUSR1)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stderr
    rows = sqlite3.connect(database()).execute("SELECT trial_id, status, parameters_json FROM trials").fetchall()
    assert [status for _, status, _ in rows] == ["PREEMPTED", "PREEMPTED"]
    exp_id = database().parent.parent.name
    for trial_id, _, parameters in rows:
        saved = (home / exp_id / "trials" / trial_id / "checkpoint" / "state.json").read_text()
        assert saved == f"x={json.loads(parameters)['x']}"
    events = sqlite3.connect(database()).execute("SELECT kind FROM events").fetchall()
    assert ("experiment_preempted",) in events
    status = subprocess.run([*command, "experiment", "status", exp_id, "--table"], env=env, capture_output=True, text=True)
    assert status.stdout == f"{exp_id} STOPPED (preempted)\n"

    resumed = subprocess.run([*command, "resume", exp_id, "--port", "0", "--foreground",
                              "--exit-when-done"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    status = subprocess.run([*command, "experiment", "status", exp_id, "--table"], env=env, capture_output=True, text=True)
    assert status.stdout.startswith(f"{exp_id} DONE") and "preempted" not in status.stdout, \
        "the flag is about the last run"
    finals = sqlite3.connect(database()).execute(
        "SELECT t.parameters_json, t.attempts, m.value_json FROM trials t JOIN metrics m USING (trial_id) "
        "WHERE m.type = 'FINAL'").fetchall()
    assert sorted((json.loads(p)["x"], attempts, json.loads(v)["saved"]) for p, attempts, v in finals) == [
        (1, 2, "x=1"), (2, 2, "x=2")], "same parameters, next attempt, from their own checkpoint"


def test_manager_sigkilled_with_four_trials_and_their_children_then_resumed(tmp_path: Path, code_dir: Path):
    import psutil
    write_script(code_dir, "trial.py", """
        import os, subprocess, time
        import expmgr
        x = expmgr.get_next_parameter()["x"]
        expmgr.report_intermediate_result(x)
        if expmgr.get_attempt() == 1 and x < 4:
            child = subprocess.Popen(["sleep", "120"])
            with open(os.path.join(os.environ["PIDS_DIR"], expmgr.get_trial_id()), "w") as f:
                f.write(f"{os.getpid()} {child.pid}")
            time.sleep(120)
        expmgr.report_final_result(x)
    """)
    (tmp_path / "config.yml").write_text(
        "searchSpace: {x: {_type: choice, _value: [0, 1, 2, 3, 4, 5]}}\ntrialCommand: python3 trial.py\n"
        f"trialCodeDirectory: {code_dir}\ntrialConcurrency: 4\nmaxTrialNumber: 6\n"
        "trialGracePeriod: 2s\ntuner: {name: GridSearch}\n")
    home, pids_dir = tmp_path / "home", tmp_path / "pids"
    pids_dir.mkdir()
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO), "PIDS_DIR": str(pids_dir)}
    command = [sys.executable, "-m", "expmgr.cli"]
    manager = subprocess.Popen([*command, "create", "--config", "config.yml", "--port", "0", "--foreground",
                                "--exit-when-done"],
                               cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: len([p for p in pids_dir.iterdir() if p.read_text()]) == 4, what="four trials and children")
        pids = [int(pid) for path in pids_dir.iterdir() for pid in path.read_text().split()]
        database = next(home.glob("*/db/experiment.sqlite"))
        acknowledged = set(sqlite3.connect(database).execute("SELECT trial_id, attempt, sequence FROM metrics"))
        manager.kill()
        manager.wait(timeout=30)
    finally:
        if manager.poll() is None:
            manager.kill()
            manager.wait()

    def alive() -> list[int]:
        return [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
    wait_until(lambda: not alive(), timeout=5, what="no trial process or child to survive (5 s)")
    exp_id = database.parent.parent.name
    resumed = subprocess.run([*command, "resume", exp_id, "--port", "0", "--foreground",
                              "--exit-when-done"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    rows = sqlite3.connect(database).execute("SELECT trial_id, status, parameters_json FROM trials").fetchall()
    assert len(rows) == 6 and len({trial_id for trial_id, _, _ in rows}) == 6
    assert sorted(json.loads(parameters)["x"] for _, _, parameters in rows) == [0, 1, 2, 3, 4, 5]
    assert {status for _, status, _ in rows} == {"SUCCEEDED"}
    kept = set(sqlite3.connect(database).execute("SELECT trial_id, attempt, sequence FROM metrics"))
    assert acknowledged <= kept, "every metric stored before the kill is still there"
