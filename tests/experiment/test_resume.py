"""Resuming stopped and crashed experiments from their store."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from expmgr import Experiment
from expmgr.experiment import ExperimentError
from expmgr.store.registry import Registry
from expmgr.states import ExperimentState
from tests.helpers.common import REPO, wait_until, write_script
from tests.helpers.experiments import grid_config

SLOW_TRIAL = """
    import time, expmgr
    x = expmgr.get_next_parameter()["x"]
    expmgr.report_intermediate_result(x)
    time.sleep(0.4)
    expmgr.report_final_result(x * 10)
"""


WAITS_FOR_RESUME_TRIAL = """
    import os, time, expmgr
    x = expmgr.get_next_parameter()["x"]
    expmgr.report_intermediate_result(x)
    while x >= 2 and not os.path.exists("resumed"):
        time.sleep(0.05)
    expmgr.report_final_result(x * 10)
"""
"""Trials after the first two run until the file "resumed" appears: a stop or a kill catches
some running however slow, or fast, the machine is."""


def test_resume_after_stop_reruns_the_cancelled_trials_and_completes_the_budget(tmp_path: Path, code_dir: Path):
    # Trials after the first two run until the resume (the file "resumed"), so the stop
    # catches some running however slow the machine is.
    write_script(code_dir, "trial.py", WAITS_FOR_RESUME_TRIAL)
    first = Experiment(grid_config(tmp_path, code_dir))
    first.start(port=0)
    wait_until(lambda: sum(t.status == "SUCCEEDED" for t in first.list_trial_jobs()) >= 2, what="two trials done")
    wait_until(lambda: sum(t.status == "RUNNING" for t in first.list_trial_jobs()) >= 1, what="a trial running")
    first.stop()
    (code_dir / "resumed").touch()
    before = {t.trialJobId: t for t in first.list_trial_jobs()}
    cancelled = {i for i, t in before.items() if t.status == "USER_CANCELED"}
    assert cancelled, "the stop must have caught some trials running"

    resumed = Experiment.resume(first.id, port=0, home=tmp_path / "home")
    assert resumed.get_status() == "DONE"
    trials = resumed.list_trial_jobs()
    assert len(trials) == 6 and len({t.trialJobId for t in trials}) == 6
    assert sorted(t.parameters["x"] for t in trials) == list(range(6)), "the grid is not repeated"
    assert all(t.status == "SUCCEEDED" for t in trials)
    for trial in trials:
        if trial.trialJobId in cancelled:
            assert trial.attempts == before[trial.trialJobId].attempts + 1
        elif trial.trialJobId in before:
            assert trial.attempts == 1 and trial.finalMetric == before[trial.trialJobId].finalMetric
    assert sorted(r.value for r in resumed.export_data()) == [0, 10, 20, 30, 40, 50]
    runs = sqlite3.connect(resumed.paths.database).execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    assert runs == 2


def test_resume_refuses_a_running_or_unknown_experiment(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", "import time\ntime.sleep(120)\n")
    experiment = Experiment(grid_config(tmp_path, code_dir))
    experiment.start(port=0)
    with pytest.raises(ExperimentError, match="is running"):
        Experiment.resume(experiment.id, port=0, home=tmp_path / "home")
    with pytest.raises(ExperimentError, match="no experiment 'nosuchid'"):
        Experiment.resume("nosuchid", port=0, home=tmp_path / "home")
    experiment.stop()


def test_max_experiment_duration_counts_the_time_before_the_resume(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", "import time\ntime.sleep(120)\n")
    first = Experiment(grid_config(tmp_path, code_dir, max_experiment_duration="4s"))
    first.start(port=0)
    wait_until(lambda: sum(t.status == "RUNNING" for t in first.list_trial_jobs()) == 2, what="two running")
    first.wait(timeout=2)
    first.stop()
    resumed = Experiment.resume(first.id, port=0, home=tmp_path / "home")
    assert resumed.get_status() == "DONE"
    rows = sqlite3.connect(resumed.paths.database).execute("SELECT started, ended FROM runs").fetchall()
    assert len(rows) == 2
    assert rows[1][1] - rows[1][0] < 4, "the second run only had what the first left of the 4 s"


def test_expctl_resume_after_the_daemon_was_sigkilled_completes_exactly_the_budget(tmp_path: Path, code_dir: Path):
    # Trials after the first two run until the resume (the file "resumed"), so the kill
    # catches the experiment running however fast the machine is.
    write_script(code_dir, "trial.py", WAITS_FOR_RESUME_TRIAL)
    (tmp_path / "config.yml").write_text(
        f"searchSpace: {json.dumps({'x': {'_type': 'choice', '_value': list(range(6))}})}\n"
        f"trialCommand: python3 trial.py\ntrialCodeDirectory: {code_dir}\ntrialConcurrency: 2\n"
        "maxTrialNumber: 6\ntrialGracePeriod: 1s\ntuner: {name: GridSearch}\n")
    home = tmp_path / "home"
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}

    def expctl(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "expmgr.cli", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
    created = expctl("create", "--config", "config.yml", "--port", "0")
    assert created.returncode == 0, created.stderr
    exp_id = created.stdout.split()[1]
    database = home / exp_id / "db" / "experiment.sqlite"

    def finished() -> int:
        return sqlite3.connect(database).execute(
            "SELECT COUNT(*) FROM trials WHERE status = 'SUCCEEDED'").fetchone()[0]
    wait_until(lambda: finished() >= 2, what="two trials done")
    entry = Registry(home).get(exp_id)
    metrics_before = sqlite3.connect(database).execute("SELECT trial_id, attempt, sequence FROM metrics").fetchall()
    os.kill(entry.pid, signal.SIGKILL)
    wait_until(lambda: not psutil.pid_exists(entry.pid) or psutil.Process(entry.pid).status() == "zombie",
               what="the daemon gone")
    assert expctl("experiment", "list", "--all").stdout.count("GONE") == 1
    (code_dir / "resumed").touch()

    resumed = expctl("resume", exp_id[:5], "--port", "0", "--foreground", "--exit-when-done")
    assert resumed.returncode == 0, resumed.stderr
    assert f"experiment {exp_id} DONE" in resumed.stdout
    rows = sqlite3.connect(database).execute("SELECT trial_id, status FROM trials").fetchall()
    assert len(rows) == 6 and len({trial_id for trial_id, _ in rows}) == 6
    assert {status for _, status in rows} == {"SUCCEEDED"}
    metrics_after = set(sqlite3.connect(database).execute("SELECT trial_id, attempt, sequence FROM metrics"))
    assert set(metrics_before) <= metrics_after, "every metric stored before the kill is kept"
    assert Registry(home).get(exp_id).status == ExperimentState.DONE
    refused = expctl("resume", "nosuch")
    assert refused.returncode == 2 and "no experiment 'nosuch'" in refused.stderr


def test_view_serves_a_finished_experiment_read_only(tmp_path: Path, code_dir: Path):
    import urllib.error
    import urllib.request
    write_script(code_dir, "trial.py", "import expmgr\nexpmgr.report_final_result(expmgr.get_next_parameter()['x'])\n")
    finished = Experiment(grid_config(tmp_path, code_dir, max_trial_number=3))
    assert finished.run(port=0)
    env = {**os.environ, "EXPMGR_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    viewer = subprocess.Popen([sys.executable, "-m", "expmgr.cli", "view", finished.id[:4], "--port", "0"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = viewer.stdout.readline()
        assert f"INFO (nni.{finished.id}) viewing experiment {finished.id} (read-only)" in line
        base = line.strip().rsplit(" ", 1)[1]
        with urllib.request.urlopen(f"{base}/api/v1/nni/trial-jobs", timeout=10) as response:
            jobs = json.loads(response.read())
        assert sorted(json.loads(job["hyperParameters"][0])["parameters"]["x"] for job in jobs) == [0, 1, 2]
        with urllib.request.urlopen(f"{base}/api/v1/nni/check-status", timeout=10) as response:
            assert json.loads(response.read())["status"] == "DONE"
        request = urllib.request.Request(f"{base}/api/v1/expmgr/trials/{jobs[0]['trialJobId']}/metrics",
                                         data=b"{}", method="POST", headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 409 and b"read-only" in refused.value.read()
        viewer.send_signal(signal.SIGINT)
        assert viewer.wait(timeout=30) == 0
    finally:
        if viewer.poll() is None:
            viewer.kill()
        viewer.communicate()
    before = sqlite3.connect(finished.paths.database).execute("SELECT COUNT(*) FROM events").fetchone()[0]
    view = Experiment.view(finished.id, port=0, non_blocking=True, home=tmp_path / "home")
    assert [t.status for t in view.list_trial_jobs()] == ["SUCCEEDED"] * 3
    view.stop()
    after = sqlite3.connect(finished.paths.database).execute("SELECT COUNT(*) FROM events").fetchone()[0]
    assert after == before, "viewing writes nothing"


def test_resume_does_not_rerun_a_trial_the_user_killed(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", SLOW_TRIAL.replace("time.sleep(0.4)", "time.sleep(3 if x < 2 else 0.1)"))
    first = Experiment(grid_config(tmp_path, code_dir, max_trial_number=4))
    first.start(port=0)
    wait_until(lambda: sum(t.status == "RUNNING" for t in first.list_trial_jobs()) == 2, what="two running")
    victim, survivor = sorted(first.list_trial_jobs(), key=lambda t: t.parameters["x"])
    first.kill_trial_job(victim.trialJobId)
    wait_until(lambda: {t.trialJobId: t.status for t in first.list_trial_jobs()}[victim.trialJobId]
               == "USER_CANCELED", what="the kill")
    first.stop()
    resumed = Experiment.resume(first.id, port=0, home=tmp_path / "home")
    statuses = {t.trialJobId: (t.status, t.attempts) for t in resumed.list_trial_jobs()}
    assert statuses[victim.trialJobId] == ("USER_CANCELED", 1), "killed on purpose: not run again"
    assert statuses[survivor.trialJobId] == ("SUCCEEDED", 2), "stopped with the experiment: run again"
    assert len(statuses) == 4


def test_resume_ends_a_trial_process_that_outlived_its_manager(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", "import expmgr\nexpmgr.report_final_result(expmgr.get_next_parameter()['x'])\n")
    first = Experiment(grid_config(tmp_path, code_dir, max_trial_number=2))
    assert first.run(port=0)
    first.stop()  # its server stayed after DONE
    # Fault injection: make the first trial look as if its manager died while it ran, with
    # a real process still alive in its own session (as if the watchdog had failed).
    survivor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    try:
        trial_id = first.list_trial_jobs()[0].trialJobId
        database = sqlite3.connect(first.paths.database)
        database.execute("UPDATE trials SET status = 'RUNNING', end_time = NULL WHERE trial_id = ?", (trial_id,))
        database.execute("UPDATE attempts SET status = 'RUNNING', end_time = NULL, pid = ?, pid_started = ? "
                         "WHERE trial_id = ?", (survivor.pid, psutil.Process(survivor.pid).create_time(), trial_id))
        database.execute("DELETE FROM metrics WHERE trial_id = ?", (trial_id,))
        database.commit()
        database.close()
        assert survivor.poll() is None
        resumed = Experiment.resume(first.id, port=0, home=tmp_path / "home")
        # Killed and reaped by the resume (here it is also this test's child, hence no status).
        assert not psutil.pid_exists(survivor.pid) or psutil.Process(survivor.pid).status() == "zombie"
        trial = next(t for t in resumed.list_trial_jobs() if t.trialJobId == trial_id)
        assert (trial.status, trial.attempts) == ("SUCCEEDED", 2)
        assert len(resumed.list_trial_jobs()) == 2
    finally:
        if survivor.poll() is None:
            survivor.kill()
            survivor.wait()


def test_resume_after_a_dispatcher_crash_reruns_the_trials_the_crash_cancelled(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", """
        import time, expmgr
        x = expmgr.get_next_parameter()["x"]
        if expmgr.get_attempt() == 1:
            time.sleep(120)  # until the crash cancels it
        expmgr.report_final_result(x * 10)
    """)
    first = Experiment(grid_config(tmp_path, code_dir, search_space={"x": {"_type": "choice", "_value": [1, 2]}},
                                   max_trial_number=2))
    first.start(port=0)
    wait_until(lambda: [t.status for t in first.list_trial_jobs()].count("RUNNING") == 2, what="two running")
    [dispatcher] = [p for p in psutil.Process().children(recursive=True)
                    if "expmgr.dispatcher" in " ".join(p.cmdline())]
    dispatcher.kill()
    assert first.wait(timeout=60)
    assert first.get_status() == "ERROR"
    assert [t.status for t in first.list_trial_jobs()] == ["SYS_CANCELED", "SYS_CANCELED"]
    with pytest.raises(ExperimentError, match="is served"):  # its server stays after ERROR, as NNI's
        Experiment.resume(first.id, port=0, home=tmp_path / "home")
    first.stop()

    resumed = Experiment.resume(first.id, port=0, home=tmp_path / "home")
    assert resumed.get_status() == "DONE", resumed.get_error()
    trials = resumed.list_trial_jobs()
    assert [(t.status, t.attempts) for t in trials] == [("SUCCEEDED", 2), ("SUCCEEDED", 2)]
    assert sorted(r.value for r in resumed.export_data()) == [10, 20]


def test_a_line_another_trial_appends_to_a_trials_metrics_file_is_not_its_result(tmp_path: Path, code_dir: Path):
    """metrics.jsonl lines carry a MAC under the attempt's token: a line written by
    another process (here another trial, knowing the format but not the token) is
    skipped and named, and the trial's own result stands."""
    write_script(code_dir, "trial.py", """
        import os, time, expmgr
        x = expmgr.get_next_parameter()["x"]
        mine = os.environ["EXPMGR_TRIAL_DIR"]
        trials = os.path.dirname(mine)
        code = os.getcwd()
        if x == 0:  # the forger
            while not [d for d in os.listdir(trials) if d != os.path.basename(mine)]:
                time.sleep(0.02)
            [victim] = [d for d in os.listdir(trials) if d != os.path.basename(mine)]
            with open(os.path.join(trials, victim, "metrics.jsonl"), "a") as file:
                forged = '{"attempt": 1, "sequence": 99, "type": "FINAL", "value": 1000, "mac": "' + "0" * 64 + '"}'
                file.write(forged + "\\n")
            open(os.path.join(code, "forged"), "w").close()
        else:
            while not os.path.exists(os.path.join(code, "forged")):
                time.sleep(0.02)
        expmgr.report_final_result(x)
    """)
    experiment = Experiment(grid_config(tmp_path, code_dir, search_space={"x": {"_type": "choice", "_value": [0, 1]}},
                                        max_trial_number=2))
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=60)
    finally:
        experiment.stop()
    assert experiment.get_status() == "DONE", experiment.get_error()
    victim = next(t for t in experiment.list_trial_jobs() if t.parameters["x"] == 1)
    assert victim.finalMetric == 1, "the forged line is not the victim's result"
    trial_log = (experiment.paths.trial_dir(victim.trialJobId) / "trial.log").read_text()
    assert "metrics.jsonl:1: report skipped: not signed with attempt 1's token" in trial_log


def test_a_report_written_while_the_manager_was_frozen_then_killed_is_stored_by_the_resume(
        tmp_path: Path, code_dir: Path):
    """The line is signed with the attempt's token; the resume derives the same token
    (from the experiment's secret), so it takes the line as that attempt's."""
    write_script(code_dir, "trial.py", """
        import os, time, expmgr
        expmgr.get_next_parameter()
        if expmgr.get_attempt() == 1:
            expmgr.report_intermediate_result(1)
            open("answered", "w").close()  # the manager's answer came: it may be frozen now
            while not os.path.exists("go"):
                time.sleep(0.02)
            expmgr.report_intermediate_result(101)  # written, but the manager is frozen
            time.sleep(120)
        expmgr.report_final_result(2)
    """)
    (tmp_path / "config.yml").write_text(
        "searchSpace: {x: {_type: choice, _value: [0]}}\ntrialCommand: python3 trial.py\n"
        f"trialCodeDirectory: {code_dir}\ntrialConcurrency: 1\nmaxTrialNumber: 1\ntuner: {{name: GridSearch}}\n")
    home = tmp_path / "home"
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "expmgr.cli"]
    manager = subprocess.Popen([*command, "create", "--config", "config.yml", "--port", "0", "--foreground",
                                "--exit-when-done"],
                               cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        database = wait_until(lambda: next(home.glob("*/db/experiment.sqlite"), None), what="the database")
        query = "SELECT attempt, sequence, value_json FROM metrics ORDER BY attempt, sequence"

        def stored() -> list:
            try:
                return sqlite3.connect(database).execute(query).fetchall()
            except sqlite3.OperationalError:  # the schema is not there yet
                return []
        wait_until(stored, what="the first report stored")
        # Stored is not yet answered: frozen in between, the trial would wait for the answer.
        wait_until(lambda: (code_dir / "answered").exists(), what="the first report answered")
        manager.send_signal(signal.SIGSTOP)
        (code_dir / "go").touch()
        metrics_file = next(home.glob("*/trials/*/metrics.jsonl"))
        wait_until(lambda: len(metrics_file.read_text().splitlines()) == 2, what="the second line written")
        manager.kill()
        manager.wait(timeout=30)
    finally:
        if manager.poll() is None:
            manager.kill()
            manager.wait()
    exp_id = database.parent.parent.name
    resumed = subprocess.run([*command, "resume", exp_id, "--port", "0", "--foreground",
                              "--exit-when-done"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert sqlite3.connect(database).execute(query).fetchall() == [(1, 0, "1"), (1, 1, "101"), (2, 0, "2")]
    assert "report skipped" not in (database.parent.parent / "logs" / "experiment.log").read_text()
