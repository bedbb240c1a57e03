"""A trial that ignores SIGTERM is still ended, by SIGKILL, once ``trialGracePeriod`` has
passed after its SIGTERM: on an experiment's stop, on ``kill_trial_job`` and when it runs
past ``maxTrialDuration``. Real trial processes that trap SIGTERM and sleep on."""
from __future__ import annotations

import os
import signal
import sqlite3
import threading
from pathlib import Path

import psutil
import pytest

from expmgr import Experiment, ExperimentConfig
from tests.helpers.common import wait_until, write_script

STUBBORN_TRIAL = """
    import os, signal, time
    import expmgr
    expmgr.get_next_parameter()
    marks = os.environ["MARK_DIR"]

    def note_and_ignore(signum, frame):
        open(os.path.join(marks, f"sigterm-{os.getpid()}"), "w").close()

    signal.signal(signal.SIGTERM, note_and_ignore)
    open(os.path.join(marks, f"started-{os.getpid()}"), "w").close()
    while True:
        time.sleep(0.05)
"""

GRACE = 1.0  # seconds; the tests wait far longer than this for the SIGKILL
DEADLINE = 60.0


@pytest.fixture
def marks(tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write_script(code_dir, "trial.py", STUBBORN_TRIAL)
    path = tmp_path / "marks"
    path.mkdir()
    monkeypatch.setenv("MARK_DIR", str(path))
    return path


def stubborn_experiment(tmp_path: Path, code_dir: Path, concurrency: int, **overrides) -> Experiment:
    return Experiment(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": list(range(concurrency))}},
        trial_command="python3 trial.py", trial_code_directory=code_dir, trial_concurrency=concurrency,
        max_trial_number=concurrency, tuner={"name": "GridSearch"}, trial_grace_period=GRACE,
        experiment_working_directory=tmp_path / "home", **overrides))


def pids(marks: Path, kind: str) -> set[int]:
    return {int(path.name.split("-")[1]) for path in marks.glob(f"{kind}-*")}


def rescue(trial_pids: set[int]) -> None:
    """SIGKILL the trials the product failed to kill, so a failing test ends cleanly."""
    for pid in trial_pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def attempt_signals(experiment: Experiment) -> list[int | None]:
    with sqlite3.connect(experiment.paths.database) as database:
        return [row[0] for row in database.execute("SELECT signal FROM attempts ORDER BY trial_id")]


def test_a_stop_sigkills_trials_that_ignore_sigterm_after_the_grace_period(
        tmp_path: Path, code_dir: Path, marks: Path):
    experiment = stubborn_experiment(tmp_path, code_dir, concurrency=2)
    experiment.start(port=0)
    started: set[int] = set()
    try:
        started = wait_until(lambda: len(pids(marks, "started")) == 2 and pids(marks, "started"),
                             what="two stubborn trials")
        stopper = threading.Thread(target=experiment.stop, name="test-stop")
        stopper.start()
        stopper.join(DEADLINE)
        hung = stopper.is_alive()
    finally:
        if experiment.get_status() == "RUNNING" or started and any(psutil.pid_exists(p) for p in started):
            rescue(started)
        experiment.stop()
    assert not hung, f"the stop hung: trials ignoring SIGTERM were not SIGKILLed {GRACE}s later"
    assert pids(marks, "sigterm") == started, "SIGTERM came first"
    assert not any(psutil.pid_exists(pid) for pid in started)
    assert experiment.get_status() == "STOPPED"
    assert {t.status for t in experiment.list_trial_jobs()} == {"USER_CANCELED"}
    assert attempt_signals(experiment) == [signal.SIGKILL, signal.SIGKILL]


@pytest.mark.parametrize("how", ["kill_trial_job", "maxTrialDuration"])
def test_one_trial_ignoring_sigterm_is_sigkilled_after_the_grace_period(
        tmp_path: Path, code_dir: Path, marks: Path, how: str):
    overrides = {"max_trial_duration": 1} if how == "maxTrialDuration" else {}
    experiment = stubborn_experiment(tmp_path, code_dir, concurrency=1, **overrides)
    experiment.start(port=0)
    started: set[int] = set()
    try:
        started = wait_until(lambda: pids(marks, "started"), what="the stubborn trial")
        if how == "kill_trial_job":
            experiment.kill_trial_job(experiment.list_trial_jobs()[0].trialJobId)
        wait_until(lambda: pids(marks, "sigterm"), what="its SIGTERM")
        wait_until(lambda: not any(psutil.pid_exists(pid) for pid in started), timeout=DEADLINE,
                   what=f"the trial's SIGKILL {GRACE}s after its SIGTERM")
        wait_until(lambda: experiment.list_trial_jobs()[0].status != "RUNNING", what="the trial's end")
    finally:
        rescue(started)
        experiment.stop()
    assert attempt_signals(experiment) == [signal.SIGKILL]
    assert experiment.list_trial_jobs()[0].status == ("USER_CANCELED" if how == "kill_trial_job" else "EARLY_STOPPED")
