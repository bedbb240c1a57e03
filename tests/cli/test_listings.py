"""What ``expctl``'s listings show, with real daemons (issue 12, item 7): ``trial ls
--json``'s shape, output into a pipe whose reader went away, ``stop`` with nothing to
stop, durations and STARTED after a resume, a killed experiment's trials, top's colours."""
from __future__ import annotations

import json
import os
import pty
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from expmgr.store.registry import Registry
from expmgr.states import ExperimentState
from tests.helpers.cli_daemon import CONFIG, created_id, entry, expctl, project  # noqa: F401 (a fixture)
from tests.helpers.common import REPO, wait_until
from tests.helpers.fill import experiment_on_hosts, experiment_with_runs


def expctl_into_closed_pipe(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``expctl ARGS | head -0`` without the race: the pipe's reader is closed before
    expctl starts, so its first write fails (EPIPE) whatever the size of its output."""
    reader, writer = os.pipe()
    os.close(reader)
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    try:
        return subprocess.run([sys.executable, "-m", "expmgr.cli", *args], cwd=cwd, env=env, stdout=writer,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(writer)


def run_to_the_end(project_dir: Path, home: Path, trial: str) -> str:
    (project_dir / "trial.py").write_text(trial)
    exp_id = created_id(expctl(home, project_dir, "create", "--config", "config.yml", "--port", "0",
                               "--exit-when-done"))
    wait_until(lambda: entry(home, exp_id).status.is_finished(), timeout=60, what="the end")
    wait_until(lambda: expctl(home, project_dir, "experiment", "list").stdout.strip() == "(none)",
               what="the daemon to exit")
    return exp_id


def test_trial_ls_json_gives_numbers_and_objects_not_strings(project):
    cwd, home = project
    exp_id = run_to_the_end(cwd, home, "import expmgr\nx = expmgr.get_next_parameter()['x']\n"
                                       "expmgr.report_final_result({'default': x / 2, 'loss': float('nan')})\n")
    assert entry(home, exp_id).status == ExperimentState.DONE
    rows = expctl(home, cwd, "trial", "ls", exp_id, "--json")
    trials = json.loads(rows.stdout)
    by_x = {row["parameters"]["x"]: row for row in trials}
    assert sorted(by_x) == [1, 2, 3, 4] and by_x[1]["parameters"] == {"x": 1}
    assert by_x[1]["final"] == {"default": 0.5, "loss": "NaN"} and by_x[4]["final"]["default"] == 2.0
    for row in trials:
        assert isinstance(row["seq"], int) and isinstance(row["attempts"], int)
        assert isinstance(row["seconds"], float) and row["seconds"] >= 0
        assert row["host"] == "127.0.0.1", "where the local service ran it"
    table = expctl(home, cwd, "trial", "ls", exp_id, "--table").stdout
    assert '{"x": 1}' in table and '"loss": NaN' in table, "the table still shows JSON text"
    assert "HOST" not in table.splitlines()[0], "one host: no column saying the same on every row"


def test_trial_ls_shows_the_host_of_each_trials_latest_attempt_when_trials_ran_on_several(tmp_path: Path):
    home = tmp_path / "home"
    exp_id = experiment_on_hosts(home, [["node-a"], ["node-a", "node-b"], [None]])
    trials = json.loads(expctl(home, tmp_path, "trial", "ls", exp_id, "--json").stdout)
    assert [(row["trial"], row["attempts"], row["host"]) for row in trials] == [
        ("h0", 1, "node-a"), ("h1", 2, "node-b"), ("h2", 1, None)]
    assert all(isinstance(row["seconds"], float) for row in trials), "numbers stay numbers"
    header, *lines = expctl(home, tmp_path, "trial", "ls", exp_id, "--table").stdout.splitlines()
    assert header.split()[:5] == ["TRIAL", "SEQ", "STATUS", "ATTEMPTS", "HOST"]
    assert [line.split()[4] for line in lines[:2]] == ["node-a", "node-b"]


def test_experiment_status_says_how_long_the_manager_was_away_between_runs(tmp_path: Path):
    home = tmp_path / "home"
    exp_id, _ = experiment_with_runs(home, [(0, 10), (15, 20), (100, 130)])
    status = expctl(home, tmp_path, "experiment", "status", exp_id, "--table").stdout
    assert status == f"{exp_id} DONE (manager away 85s, 2 times)\n", "the REST view's managerAwaySeconds"
    assert json.loads(expctl(home, tmp_path, "experiment", "status", exp_id).stdout) == {
        "errors": [], "status": "DONE"}, "nnictl's JSON unchanged"
    once, _ = experiment_with_runs(home, [(0, 10)], exp_id="run00001")
    assert expctl(home, tmp_path, "experiment", "status", once, "--table").stdout == f"{once} DONE\n"


@pytest.mark.parametrize("command", [("trial", "ls", "{id}"), ("trial", "ls", "{id}", "--json"),
                                     ("experiment", "list", "--all"), ("experiment", "show", "{id}"),
                                     ("top", "--once", "{id}"), ("log", "experiment", "{id}")])
def test_output_into_a_pipe_whose_reader_is_gone_ends_quietly_with_141(project, command):
    cwd, home = project
    exp_id = run_to_the_end(cwd, home, "import expmgr\nexpmgr.report_final_result(1)\n")
    result = expctl_into_closed_pipe(home, cwd, *(part.format(id=exp_id) for part in command))
    assert (result.returncode, result.stderr) == (141, ""), "no BrokenPipeError traceback"


def test_a_foreground_experiment_whose_output_reader_is_gone_runs_to_the_end_quietly(project):
    cwd, home = project
    (cwd / "trial.py").write_text("import expmgr\nexpmgr.report_final_result(1)\n")
    result = expctl_into_closed_pipe(home, cwd, "create", "--config", "config.yml", "--port", "0", "--foreground",
                                     "--exit-when-done")
    assert (result.returncode, result.stderr) == (141, ""), "no 'Logging error' traceback for each record"
    [experiment] = Registry(home).entries()
    assert experiment.status == ExperimentState.DONE, "the experiment is not stopped by its reader going away"
    assert "is DONE" in (home / experiment.id / "logs" / "experiment.log").read_text(), "its log has every record"


def test_stop_with_nothing_running_says_so_and_exits_0(project):
    cwd, home = project
    result = expctl(home, cwd, "stop")
    assert (result.returncode, result.stdout.strip()) == (0, "no experiment is running")
    assert expctl(home, cwd, "stop", "--all").returncode == 0
    unknown = expctl(home, cwd, "stop", "nosuchid")
    assert unknown.returncode == 2 and "no experiment 'nosuchid'" in unknown.stderr, "a named one must exist"


RELEASED_TRIAL = """\
import os, time
import expmgr
x = expmgr.get_next_parameter()['x']
while not os.path.exists('release'):
    time.sleep(0.05)
expmgr.report_final_result(x)
"""


def attempt_seconds(database: Path, trial_id: str, now: float) -> float:
    """How long the trial's attempts ran, from the store (an open one until ``now``)."""
    rows = sqlite3.connect(database).execute(
        "SELECT start_time, end_time FROM attempts WHERE trial_id = ?", (trial_id,)).fetchall()
    return sum((end or now) - start for start, end in rows)


def test_after_a_resume_durations_leave_out_the_downtime_and_started_is_the_first_start(project):
    cwd, home = project
    (cwd / "trial.py").write_text(RELEASED_TRIAL)
    (cwd / "config.yml").write_text(CONFIG.replace("maxTrialNumber: 4", "maxTrialNumber: 1"))
    exp_id = created_id(expctl(home, cwd, "create", "--config", "config.yml", "--port", "0"))
    database = home / exp_id / "db" / "experiment.sqlite"
    [trial] = wait_until(lambda: [t for t in json.loads(expctl(home, cwd, "trial", "ls", exp_id, "--json").stdout)
                                  if t["status"] == "RUNNING"], what="a running trial")
    first_start = sqlite3.connect(database).execute("SELECT start_time FROM experiment").fetchone()[0]
    # execDuration is whole seconds (NNI's): the first run lasts more than one, so it is not 0.
    wait_until(lambda: time.time() > first_start + 1.5, what="a first run of over a second")
    assert expctl(home, cwd, "stop", exp_id).returncode == 0
    stopped = time.time()
    wait_until(lambda: time.time() > stopped + 2, what="some downtime")   # what the durations must leave out

    resumed = expctl(home, cwd, "resume", exp_id, "--port", "0")
    assert resumed.returncode == 0, resumed.stderr
    wait_until(lambda: "RUNNING" in expctl(home, cwd, "trial", "ls", exp_id, "--table").stdout, what="attempt 2 running")
    before_top = time.time()
    shown = re.search(rf"{trial['trial']}  running +([\d.]+)s  attempt 2", expctl(home, cwd, "top", "--once").stdout)
    after_top = time.time()
    assert shown, "top lists the running trial"
    ran = float(shown.group(1))
    assert attempt_seconds(database, trial["trial"], before_top) - 0.1 <= ran
    assert ran <= attempt_seconds(database, trial["trial"], after_top) + 0.1, "top: the attempts' time, no downtime"
    profile_url = f"http://127.0.0.1:{entry(home, exp_id).port}/api/v1/nni/experiment"
    served = json.loads(urllib.request.urlopen(profile_url, timeout=10).read())   # what the web UI shows
    assert served["startTime"] == int(first_start * 1000)
    assert 0 < served["execDuration"] <= time.time() - first_start - 2, "REST: the time run, no downtime"

    (cwd / "release").touch()
    wait_until(lambda: entry(home, exp_id).status == ExperimentState.DONE, timeout=60, what="DONE")
    [row] = json.loads(expctl(home, cwd, "trial", "ls", exp_id, "--json").stdout)
    ran = attempt_seconds(database, trial["trial"], time.time())
    start, end = sqlite3.connect(database).execute(
        "SELECT start_time, end_time FROM trials WHERE trial_id = ?", (trial["trial"],)).fetchone()
    assert end - start > ran + 1.5, "the downtime is in end - start"
    assert abs(row["seconds"] - ran) <= 0.06, "trial ls: the attempts' time, no downtime"

    profile = json.loads(expctl(home, cwd, "experiment", "show", exp_id).stdout)
    runs = sqlite3.connect(database).execute("SELECT started, ended FROM runs").fetchall()
    assert len(runs) == 2 and profile["execDuration"] == int(sum(ended - started for started, ended in runs))
    assert [(gap["from"], gap["to"]) for gap in profile["managerAway"]] == [(runs[0][1], runs[1][0])], \
        "away from the stop to the resume"
    assert re.fullmatch(rf"{exp_id} DONE \(manager away \d+s, 1 time\)\n",
                        expctl(home, cwd, "experiment", "status", exp_id, "--table").stdout)
    assert profile["startTime"] == int(first_start * 1000)
    listed = json.loads(expctl(home, cwd, "experiment", "list", "--all", "--json").stdout)
    assert [row["started"] for row in listed] == [
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(first_start))], "the first start, as the web UI"
    assert entry(home, exp_id).start_time > first_start + 2, "(the registry keeps the last start)"


def test_a_killed_experiments_running_trials_are_listed_as_gone_and_its_store_is_left_alone(project):
    cwd, home = project
    (cwd / "trial.py").write_text(RELEASED_TRIAL)
    exp_id = created_id(expctl(home, cwd, "create", "--config", "config.yml", "--port", "0"))
    wait_until(lambda: expctl(home, cwd, "trial", "ls", exp_id, "--table").stdout.count("RUNNING") == 2,
               what="two running trials")
    pid = entry(home, exp_id).pid
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
               what="the daemon to die")
    database = home / exp_id / "db" / "experiment.sqlite"
    stored = sqlite3.connect(database).execute("SELECT trial_id, status FROM trials ORDER BY trial_id").fetchall()
    assert [status for _, status in stored] == ["RUNNING", "RUNNING"]

    trials = json.loads(expctl(home, cwd, "trial", "ls", exp_id, "--json").stdout)
    assert sorted((row["trial"], row["status"], row["seconds"]) for row in trials) == [
        (trial_id, "RUNNING (gone)", None) for trial_id, _ in stored], "how long they ran is not known"
    assert "RUNNING (gone)" in expctl(home, cwd, "trial", "ls", exp_id, "--table").stdout
    top = expctl(home, cwd, "top", "--once", exp_id).stdout
    assert f"{exp_id}    GONE" in top and "running (gone) 2" in top
    assert top.count("running (gone)      ?s") == 2, top
    assert json.loads(expctl(home, cwd, "experiment", "show", exp_id).stdout)["status"] == "GONE"
    assert sqlite3.connect(database).execute("SELECT trial_id, status FROM trials ORDER BY trial_id").fetchall() \
        == stored, "a listing writes nothing"


def run_on_a_terminal(home: Path, cwd: Path, *args: str, **env: str) -> str:
    """expctl's stdout when it is a terminal (a pseudo-terminal)."""
    master, slave = pty.openpty()
    environment = {key: value for key, value in os.environ.items() if key != "NO_COLOR"}
    environment.update(EXPMGR_HOME=str(home), PYTHONPATH=str(REPO), **env)
    try:
        subprocess.run([sys.executable, "-m", "expmgr.cli", *args], cwd=cwd, env=environment, stdout=slave,
                       stderr=subprocess.PIPE, timeout=120, check=True)
    finally:
        os.close(slave)
    output = b""
    try:
        while chunk := os.read(master, 65536):
            output += chunk
    except OSError:  # EIO: the terminal's other side is closed and everything was read
        pass
    os.close(master)
    return output.decode()


def test_top_colours_states_on_a_terminal_only_and_not_with_a_non_empty_no_color(project):
    cwd, home = project
    exp_id = run_to_the_end(cwd, home, "import expmgr, sys\nx = expmgr.get_next_parameter()['x']\n"
                                       "sys.exit(3) if x == 4 else expmgr.report_final_result(x)\n")
    coloured = run_on_a_terminal(home, cwd, "top", "--once", exp_id)
    assert "\x1b[32mDONE\x1b[0m" in coloured
    assert "\x1b[32msucceeded\x1b[0m 3" in coloured and "\x1b[31mfailed\x1b[0m 1" in coloured
    assert "\x1b[" not in run_on_a_terminal(home, cwd, "top", "--once", exp_id, NO_COLOR="1")
    assert "\x1b[32mDONE\x1b[0m" in run_on_a_terminal(home, cwd, "top", "--once", exp_id, NO_COLOR=""), \
        "NO_COLOR set but empty does not turn colour off (no-color.org), as in the logs"
    piped = expctl(home, cwd, "top", "--once", exp_id).stdout
    assert "\x1b[" not in piped and "succeeded 3, failed 1" in piped


HOSTILE = "evil\x1b]0;owned\x07\x1b[2J\r\x9b31m\x7f\x00"
"""Terminal escapes: retitle (OSC), clear the screen, a carriage return, C1 CSI, DEL, NUL."""


def test_names_and_hosts_with_terminal_escapes_are_printed_escaped_everywhere(tmp_path: Path):
    home = tmp_path / "home"
    exp_id = experiment_on_hosts(home, [[f"node-{HOSTILE}"], ["node-b"]])
    registry = sqlite3.connect(home / "registry.sqlite")
    try:
        with registry:
            registry.execute("UPDATE experiments SET name = ?", (f"name-{HOSTILE}",))
    finally:
        registry.close()
    for command in [("experiment", "list", "--all"), ("trial", "ls", exp_id, "--table"), ("top", "--once", exp_id),
                    ("experiment", "show", exp_id), ("trial", "ls", exp_id, "--json"), ("trial", "ls", exp_id)]:
        result = expctl(home, tmp_path, *command)
        assert result.returncode == 0, result.stderr
        raw = [c for c in result.stdout if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) <= 0x9f]
        assert raw == [], (command, result.stdout)
        if "--json" not in command and "show" not in command and command != ("trial", "ls", exp_id):  # JSON
            assert r"evil\x1b]0;owned\x07\x1b[2J\x0d\x9b31m\x7f\x00" in result.stdout, (command, result.stdout)
