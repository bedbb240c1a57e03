"""More trials after DONE, as NNI's manager gives them: raising maxTrialNumber or
maxExperimentDuration of a finished (DONE) experiment whose server still answers sends it
back to RUNNING, with a fresh tuner given every stored result, through every door (Python
API, NNI's REST update, expctl in both spellings). Other changes, values not above what was
used, an ERROR experiment and a view stay refused, each saying why. Real trials, a real
server, a real store."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from expmgr import Experiment, ExperimentConfig
from expmgr.experiment import ExperimentError
from expmgr.store import open_store
from expmgr.store.registry import Registry
from tests.helpers.common import REPO, rest_call as call, wait_until, write_script
from tests.helpers.experiments import CRASHING_TUNER

BUDGET_FIELDS = ["maxTrialNumber", "maxExperimentDuration"]
ALL_FIELDS = ["trialConcurrency", "maxTrialNumber", "maxExperimentDuration", "searchSpace"]


def config(code_dir: Path, home: Path, **changes: object) -> ExperimentConfig:
    settings: dict = dict(
        search_space={"x": {"_type": "choice", "_value": [1, 2, 3, 4, 5, 6, 7, 8]}},
        trial_command="python3 trial.py", trial_code_directory=code_dir, trial_concurrency=2,
        max_trial_number=3, tuner={"name": "GridSearch"}, experiment_working_directory=home)
    settings.update(changes)
    return ExperimentConfig(**settings)


@pytest.fixture
def done(code_dir: Path, tmp_path: Path):
    """An experiment that ran its 3 trials (GridSearch over 8 points) and ended DONE, served."""
    write_script(code_dir, "trial.py", """
        import expmgr
        expmgr.report_final_result(expmgr.get_next_parameter()["x"] * 2)
    """)
    experiment = Experiment(config(code_dir, tmp_path / "home"))
    assert experiment.run(port=0) is True
    yield experiment
    experiment.stop()


def updatable(port: int) -> list[str]:
    status, profile = call(port, "GET", "experiment")
    assert status == 200
    return [entry["field"] for entry in profile["updatableFields"]]


def expctl(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "expmgr.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_python_api_raises_max_trial_number_after_done_and_run_waits_for_the_new_trials(done: Experiment):
    home = done.config.experiment_working_directory
    first_end = Registry(home).get(done.id).end_time
    assert updatable(done.port) == BUDGET_FIELDS, "after DONE, only the budget is offered"
    with pytest.raises(ExperimentError, match=r"maxTrialNumber: 3 is not above the 3 trials"):
        done.update_max_trial_number(3)
    with pytest.raises(ExperimentError, match=r"trialConcurrency: cannot be changed: experiment \w+ is DONE"):
        done.update_trial_concurrency(4)
    assert done.get_status() == "DONE"
    asked = time.time()
    done.update_max_trial_number(5)
    assert done.get_status() == "RUNNING", "RUNNING as soon as the update is answered"
    assert Registry(home).get(done.id).status.value == "RUNNING"
    assert updatable(done.port) == ALL_FIELDS
    assert done.run(port=0) is True, "run() again waits for the new search's end"
    assert done.get_status() == "DONE"
    trials = done.list_trial_jobs()
    assert [t.status for t in trials] == ["SUCCEEDED"] * 5
    # The fresh tuner was given the stored results: the grid goes on, no point is run twice.
    assert sorted(t.parameters["x"] for t in trials) == [1, 2, 3, 4, 5]
    entry = Registry(home).get(done.id)
    assert entry.status.value == "DONE" and entry.end_time is not None and entry.end_time >= asked >= first_end
    profile = done.get_experiment_profile()
    assert profile["endTime"] >= asked * 1000 and profile["params"]["maxTrialNumber"] == 5
    # The time it waited, DONE, between the two searches is not its run time.
    runs = runs_of(done)
    assert len(runs) == 2 and runs[0][1] <= asked <= runs[1][0]
    assert store_seconds(done) == pytest.approx(sum(end - start for start, end in runs))
    # Nor is it time its manager was away: the same one served it all along.
    assert profile["managerAway"] == [] and profile["managerAwaySeconds"] == 0


def runs_of(experiment: Experiment) -> list[tuple[float, float]]:
    """(started, ended) of each run of its manager, from its store."""
    assert experiment.paths is not None
    connection = sqlite3.connect(f"file:{experiment.paths.database}?mode=ro", uri=True)
    try:
        return connection.execute("SELECT started, ended FROM runs ORDER BY id").fetchall()
    finally:
        connection.close()


def store_seconds(experiment: Experiment) -> float:
    with open_store(experiment.paths, readonly=True) as store:
        return store.seconds_run()


def test_nni_rest_update_runs_more_trials_and_refuses_values_not_above_what_was_used(done: Experiment):
    port = done.port
    status, answer = call(port, "PUT", "experiment?update_type=MAX_TRIAL_NUM", {"params": {"maxTrialNumber": 2}})
    assert status == 400 and answer["error"].startswith("maxTrialNumber: 2 is not above the 3 trials"), answer
    status, answer = call(port, "PUT", "experiment?update_type=TRIAL_CONCURRENCY", {"params": {"trialConcurrency": 3}})
    assert status == 400 and answer["error"].startswith("trialConcurrency: cannot be changed"), answer
    seconds = store_seconds(done)
    status, answer = call(port, "PUT", "experiment?update_type=MAX_EXEC_DURATION",
                          {"params": {"maxExperimentDuration": seconds / 2}})
    assert status == 400 and answer["error"].startswith("maxExperimentDuration:") and "not above" in answer["error"]
    # A duration alone does not help while maxTrialNumber is used up: it is named.
    status, answer = call(port, "PUT", "experiment?update_type=MAX_EXEC_DURATION",
                          {"params": {"maxExperimentDuration": "2h"}})
    assert status == 409 and answer["error"].startswith("maxTrialNumber (3) is used up too"), answer
    assert call(port, "GET", "check-status")[1]["status"] == "DONE", "refusals change nothing"
    # NNI's client sends the whole profile; the raise sends it back to RUNNING.
    profile = call(port, "GET", "experiment")[1]
    profile["params"]["maxTrialNumber"] = 4
    assert call(port, "PUT", "experiment?update_type=MAX_TRIAL_NUM", profile) == (200, {})
    assert call(port, "GET", "check-status")[1]["status"] == "RUNNING"
    assert done.wait(timeout=120) and done.get_status() == "DONE"
    assert len(done.list_trial_jobs()) == 4
    # Raised again after the second DONE: it goes on again.
    assert call(port, "PUT", "experiment?update_type=MAX_TRIAL_NUM", {"params": {"maxTrialNumber": 6}}) == (200, {})
    assert done.wait(timeout=120) and done.get_status() == "DONE"
    assert sorted(t.parameters["x"] for t in done.list_trial_jobs()) == [1, 2, 3, 4, 5, 6]


def test_concurrent_raises_after_done_run_it_once_and_end_done(done: Experiment):
    answers: list = []
    barrier = threading.Barrier(4)

    def raise_budget(number: int) -> None:
        barrier.wait()
        answers.append(call(done.port, "PUT", "experiment?update_type=MAX_TRIAL_NUM",
                            {"params": {"maxTrialNumber": number}}))
    threads = [threading.Thread(target=raise_budget, args=(number,)) for number in (5, 5, 6, 6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(answers) == [(200, {})] * 4, answers
    assert done.wait(timeout=120) and done.get_status() == "DONE"
    trials = done.list_trial_jobs()
    assert len(trials) == done.get_experiment_profile()["params"]["maxTrialNumber"]
    assert len({t.parameters["x"] for t in trials}) == len(trials)
    assert len(runs_of(done)) == 2, "one search for all four raises"


def test_expctl_update_both_spellings_reach_the_only_served_done_experiment(done: Experiment):
    home = done.config.experiment_working_directory
    result = expctl(home, "update", "trialnum", "--value", "3")
    assert result.returncode == 2 and "maxTrialNumber: 3 is not above the 3 trials" in result.stderr, result.stderr
    result = expctl(home, "update", "trialnum", "--value", "4")   # nnictl's spelling, no id
    assert result.returncode == 0 and "it runs again" in result.stdout, result.stderr
    assert done.wait(timeout=120) and len(done.list_trial_jobs()) == 4
    result = expctl(home, "update", done.id, "duration", "3h")    # expctl's spelling
    assert result.returncode == 2 and "maxTrialNumber (4) is used up too" in result.stderr, result.stderr
    assert done.get_status() == "DONE"


def test_an_error_experiment_and_a_view_stay_read_only_and_say_why(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", "import expmgr\nexpmgr.report_final_result(1.0)\n")
    tuner_dir = tmp_path / "tuner"
    tuner_dir.mkdir()
    write_script(tuner_dir, "exploding.py", CRASHING_TUNER)
    experiment = Experiment(config(code_dir, tmp_path / "home", max_trial_number=10, trial_concurrency=1,
                                   tuner={"class_name": "exploding.ExplodingTuner", "code_directory": tuner_dir}))
    assert experiment.run(port=0) is False
    assert updatable(experiment.port) == []
    status, answer = call(experiment.port, "PUT", "experiment?update_type=MAX_TRIAL_NUM",
                          {"params": {"maxTrialNumber": 20}})
    assert status == 409 and answer["error"].startswith(f"experiment {experiment.id} is ERROR: only a DONE "
                                                        "experiment can be given more trials"), answer
    assert f"expctl resume {experiment.id}" in answer["error"]
    with pytest.raises(ExperimentError, match=r"is ERROR: only a DONE experiment can be given more trials.*"
                                              r"expctl resume"):
        experiment.update_max_trial_number(20)
    experiment.stop()
    with pytest.raises(ExperimentError, match=r"its server closed; resume it"):
        experiment.update_max_trial_number(20)
    viewer = Experiment.view(experiment.id, port=0, non_blocking=True, home=tmp_path / "home")
    try:
        assert updatable(viewer.port) == []
        status, answer = call(viewer.port, "PUT", "experiment?update_type=MAX_TRIAL_NUM",
                              {"params": {"maxTrialNumber": 20}})
        assert status == 409 and "read-only" in answer["error"]
    finally:
        viewer.stop()


def test_expctl_create_foreground_runs_the_new_trials_after_done(code_dir: Path, tmp_path: Path):
    write_script(code_dir, "trial.py", "import expmgr\nexpmgr.report_final_result(1.0)\n")
    (code_dir / "config.yml").write_text(
        "searchSpace: {x: {_type: choice, _value: [1, 2, 3, 4, 5]}}\ntrialCommand: python3 trial.py\n"
        "trialConcurrency: 1\nmaxTrialNumber: 2\ntuner: {name: GridSearch}\n")
    home = tmp_path / "home"
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    process = subprocess.Popen([sys.executable, "-m", "expmgr.cli", "create", "--config", "config.yml", "--port", "0",
                                "--foreground"], cwd=code_dir, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    try:
        def entry_in(state: str):  # noqa: ANN202
            entries = Registry(home).entries() if (home / "registry.sqlite").exists() else []
            return entries and entries[0].status.value == state and entries[0]
        entry = wait_until(lambda: entry_in("DONE"), timeout=60, what="DONE")
        result = expctl(home, "update", entry.id, "trialnum", "4")
        assert result.returncode == 0, result.stderr
        wait_until(lambda: entry_in("DONE") and len(call(entry.port, "GET", "trial-jobs")[1]) == 4, timeout=120,
                   what="DONE again with 4 trials")
        assert process.poll() is None, "it still serves"
        assert expctl(home, "stop", entry.id).returncode == 0
        process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_more_trials_asked_while_another_process_holds_the_store_are_refused_and_it_stays_done(done: Experiment):
    holder = sqlite3.connect(done.paths.database, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(ExperimentError) as refused:
            done.update_max_trial_number(5)
        status, answer = call(done.port, "PUT", "experiment?update_type=MAX_TRIAL_NUM",
                              {"params": {"maxTrialNumber": 5}})
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    said = (f"{done.paths.database} cannot be written now (database is locked); "
            f"experiment {done.id} stays DONE: try again")
    assert said in str(refused.value)
    assert status == 503 and said in str(answer), answer
    assert done.get_status() == "DONE"
