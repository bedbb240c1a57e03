"""A launch the system refuses is not the trial's failure: with the trials' disk out of
inodes (no trial folder can be made, while the store's files still grow), trials are not
FAILED and use up neither the budget nor their retries; launching pauses (said once, in
experiment.log and check-status), is tried again with backoff, goes on once the disk has
room, and the experiment ends DONE with every trial SUCCEEDED."""
from __future__ import annotations

import json
import shutil
import sqlite3
import urllib.request
from pathlib import Path
from typing import Callable

from expmgr import Experiment, ExperimentConfig
from tests.helpers.common import wait_until, write_script
from tests.helpers.disks import use_up_inodes

TRIAL = """
    import os, time, expmgr
    x = expmgr.get_next_parameter()["x"]
    code = os.getcwd()
    print("started", flush=True)
    expmgr.report_intermediate_result(x)   # its files are made before the disk is used up
    open(os.path.join(code, f"reported-{x}"), "w").close()
    while x < 2 and not os.path.exists(os.path.join(code, "go")):
        time.sleep(0.05)
    expmgr.report_final_result(x * 10)
"""


def _check_status(experiment: Experiment) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{experiment.port}/api/v1/nni/check-status", timeout=5) as answer:
        return json.load(answer)


def _attempts(experiment: Experiment) -> list[tuple[str, str]]:
    conn = sqlite3.connect(f"file:{experiment.paths.database}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT trial_id, status FROM attempts").fetchall()
    finally:
        conn.close()


def _start_until_paused(code_dir: Path, disk: Path) -> tuple[Experiment, Path]:
    """Start 6 trials (2 at a time) on ``disk``, use up its inodes once the first two made
    their files, let them end, and wait until launching is paused and tried again twice:
    the experiment, and the folder of fillers to remove to free the disk."""
    write_script(code_dir, "trial.py", TRIAL)
    experiment = Experiment(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": list(range(6))}}, trial_command="python3 trial.py",
        trial_code_directory=code_dir, trial_concurrency=2, max_trial_number=6, max_trial_retries=1,
        tuner={"name": "GridSearch"}, trial_grace_period=1, log_level="debug", experiment_working_directory=disk))
    experiment.start(port=0)
    log = experiment.paths.experiment_log
    wait_until(lambda: all((code_dir / f"reported-{x}").exists() for x in range(2)), what="two trials reporting")
    fillers = use_up_inodes(disk)
    (code_dir / "go").touch()   # the two end; the next launches cannot make their folders
    wait_until(lambda: "launching new trials is paused" in log.read_text(), what="the pause in experiment.log")
    notice = _check_status(experiment)["storeUnwritable"]
    assert notice.startswith("launching new trials is paused") and "No space left on device" in notice, notice
    wait_until(lambda: log.read_text().count("still cannot start") >= 2, what="two launches tried again")
    statuses = sorted(t.status for t in experiment.list_trial_jobs())
    assert statuses == ["SUCCEEDED", "SUCCEEDED", "WAITING"], "one trial waits; none is FAILED nor made anew"
    return experiment, fillers


def _assert_all_succeeded_once(experiment: Experiment) -> None:
    assert experiment.get_status() == "DONE", experiment.get_error()
    trials = experiment.list_trial_jobs()
    assert len(trials) == 6 and all(t.status == "SUCCEEDED" for t in trials), [t.status for t in trials]
    assert sorted(t.finalMetric for t in trials) == [0, 10, 20, 30, 40, 50]
    assert sorted(status for _, status in _attempts(experiment)) == ["SUCCEEDED"] * 6, \
        "one attempt a trial: the refused launches are no attempt, no retry"


def test_a_trial_folder_that_cannot_be_made_pauses_launching_fails_no_trial_and_goes_on_once_it_can(
        code_dir: Path, tmpfs: Callable[[str], Path]):
    experiment, fillers = _start_until_paused(code_dir, tmpfs("size=64m,nr_inodes=4000"))
    try:
        shutil.rmtree(fillers)
        assert experiment.wait(timeout=90)
    finally:
        experiment.stop()
    _assert_all_succeeded_once(experiment)
    text = experiment.paths.experiment_log.read_text()
    assert text.count("launching new trials is paused") == 1, "said once, not per try"
    assert text.count("launching new trials goes on") == 1
    assert "could not start" not in text and " FAILED" not in text


def test_a_trial_kept_waiting_by_a_full_disk_when_the_experiment_stops_runs_on_resume(
        code_dir: Path, tmpfs: Callable[[str], Path]):
    disk = tmpfs("size=64m,nr_inodes=4000")
    experiment, fillers = _start_until_paused(code_dir, disk)
    try:
        experiment.stop()
    finally:
        shutil.rmtree(fillers)
    assert sorted(t.status for t in experiment.list_trial_jobs()) == ["SUCCEEDED", "SUCCEEDED", "USER_CANCELED"]
    resumed = Experiment.resume(experiment.id, port=0, home=disk)
    _assert_all_succeeded_once(resumed)
