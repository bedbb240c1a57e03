"""Processes a trial starts outside its process group (``setsid``, a double fork into a
new session) end with the trial, and with a SIGKILLed experiment: the watchdog finds
them by the trial's environment marker. Real ``expctl create`` runs, real signals."""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import psutil
import pytest

from tests.helpers.cli_create import BASE, start_create
from tests.helpers.common import wait_until

# Sequence 0 starts two escapees and ends at once; the trials after it start two and
# sleep (ESCAPE_ALL: every trial starts them). The pids land in $PIDS_DIR/<sequence id>.
TRIAL = """\
import os, subprocess, sys, time
sequence = os.environ["EXPMGR_TRIAL_SEQUENCE_ID"]
first = sequence == "0"
pids = [os.getpid()]
if first or os.environ.get("ESCAPE_ALL"):
    shell = subprocess.run("setsid sleep 300 >/dev/null 2>&1 & echo $!", shell=True, capture_output=True, text=True)
    pids.append(int(shell.stdout))
    read, write = os.pipe()
    if os.fork() == 0:  # a daemon: fork, new session, fork again, the middle one exits
        os.setsid()
        if os.fork() == 0:
            os.write(write, f"{os.getpid()}\\n".encode())
            os.execvp("sleep", ["sleep", "300"])
        os._exit(0)
    os.wait()
    pids.append(int(os.fdopen(read).readline()))
with open(os.path.join(os.environ["PIDS_DIR"], sequence + ".tmp"), "w") as file:
    file.write(" ".join(map(str, pids)))
os.rename(os.path.join(os.environ["PIDS_DIR"], sequence + ".tmp"), os.path.join(os.environ["PIDS_DIR"], sequence))
if not first:
    time.sleep(300)
"""


WARM = "trainingService:\n  platform: local\n  trialWarmStart: auto\n"
"""Trials forked from a warm template: the watchdog finds their processes all the same."""


@pytest.fixture(params=["cold", "warm"])
def project(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    (tmp_path / "trial.py").write_text(TRIAL)
    (tmp_path / "space.json").write_text('{"x": {"_type": "uniform", "_value": [0, 1]}}')
    (tmp_path / "config.yml").write_text(BASE + "trialGracePeriod: 2s\n" + (WARM if request.param == "warm" else ""))
    (tmp_path / "warm").write_text(WARM if request.param == "warm" else "")
    (tmp_path / "pids").mkdir()
    return tmp_path


def _alive(pids: list[int]) -> list[int]:
    def running(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False
    return [pid for pid in pids if running(pid)]


def _pids_of_trials(pids_dir: Path, count: int) -> list[list[int]]:
    files = sorted((f for f in pids_dir.iterdir() if not f.name.endswith(".tmp")), key=lambda f: int(f.name))
    return [[int(pid) for pid in f.read_text().split()] for f in files] if len(files) >= count else []


def _kill_leftovers(pids_dir: Path) -> None:
    """Whatever the test saw started and is still there (a failed test must not leave sleepers)."""
    for f in pids_dir.iterdir():
        for pid in f.read_text().split():
            try:
                psutil.Process(int(pid)).kill()
            except (psutil.Error, ValueError):
                pass


def test_processes_a_trial_started_in_a_new_session_end_when_the_trial_ends(project: Path):
    pids_dir = project / "pids"
    process = start_create(project, project / "home", extra_env={"PIDS_DIR": str(pids_dir)},
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        trials = wait_until(lambda: _pids_of_trials(pids_dir, 2), timeout=60,
                            what="the first trial's escapees and a second trial")
        escapees, second = trials[0][1:], trials[1][0]
        assert len(escapees) == 2
        wait_until(lambda: not _alive(escapees), timeout=10,
                   what="the processes the ended trial started with setsid and a double fork to end")
        assert _alive([second]) and process.poll() is None, "the experiment and its other trial go on"
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        _kill_leftovers(pids_dir)


def test_processes_trials_started_in_a_new_session_do_not_outlive_a_sigkilled_experiment(project: Path):
    pids_dir = project / "pids"
    (project / "config.yml").write_text(BASE.replace("trialConcurrency: 1", "trialConcurrency: 2")
                                        .replace("maxTrialNumber: 2", "maxTrialNumber: 3") + (project / "warm").read_text())
    process = start_create(project, project / "home", extra_env={"PIDS_DIR": str(pids_dir), "ESCAPE_ALL": "1"},
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        trials = wait_until(lambda: _pids_of_trials(pids_dir, 3), timeout=60, what="three trials with escapees")
        running = [pid for pids in trials[1:] for pid in pids]  # the second and third still run
        assert len(running) == 6 and _alive(running) == running
        process.kill()
        process.wait(timeout=30)
        wait_until(lambda: not _alive(running), timeout=10,
                   what="every trial process and what it started in a new session to end")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        _kill_leftovers(pids_dir)
