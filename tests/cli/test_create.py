"""``expctl create``: bad configs are refused with file, line and field, exit 2 and
nothing on disk; a good one runs to the end in the foreground."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.helpers.cli_create import BASE, expctl, start_create
from tests.helpers.common import REPO, wait_until

GOOD_SPACE = '{"x": {"_type": "uniform", "_value": [0, 1]}}'


def _running_trials(home: Path) -> int:
    """How many trials the (single) experiment under ``home`` has RUNNING, from its store."""
    databases = list(home.glob("*/db/experiment.sqlite"))
    if not databases:
        return 0
    try:
        return sqlite3.connect(databases[0]).execute(
            "SELECT COUNT(*) FROM trials WHERE status = 'RUNNING'").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


# (name, config text, expected line, fragments the message must hold)
BAD_CONFIGS = [
    ("unknown key", BASE + "trialConcurency: 2\n", 7, ["trialConcurency", "trialConcurrency"]),
    ("wrong type", BASE.replace("trialConcurrency: 1", "trialConcurrency: two"), 3, ["trialConcurrency", "'two'"]),
    ("negative concurrency", BASE.replace("trialConcurrency: 1", "trialConcurrency: -1"), 3,
     ["trialConcurrency", "positive integer", "-1"]),
    ("bad duration unit", BASE + "maxExperimentDuration: 10x\n", 7, ["maxExperimentDuration", "10x"]),
    ("bad log level", BASE + "logLevel: loud\n", 7, ["logLevel", "loud"]),
    ("unknown tuner", BASE.replace("name: Random", "name: Randomm"), 6, ["tuner.name", "Random"]),
    ("unknown key in tuner", BASE + "  clasArgs: {}\n", 7, ["clasArgs", "classArgs"]),
    ("bad optimize mode", BASE + "  classArgs: {optimize_mode: up}\n", 7, ["optimize_mode", "up"]),
    ("bad yaml", BASE + "maxTrialNumber: [1, 2\n", 8, []),
    ("unsupported platform", BASE + "trainingService:\n  platform: kubeflow\n", 8, ["platform", "kubeflow"]),
    ("missing searchSpaceFile", BASE.replace("space.json", "nowhere.json"), 1, ["searchSpaceFile", "nowhere.json"]),
    ("missing trialCommand", BASE.replace("trialCommand: python3 trial.py\n", ""), None, ["trialCommand"]),
]

BAD_SPACES = [
    ("unknown _type", '{"x": {"_type": "uniformm", "_value": [0, 1]}}', ["x", "uniformm", "uniform"]),
    ("empty choice", '{"x": {"_type": "choice", "_value": []}}', ["x", "choice"]),
    ("randint reversed", '{"x": {"_type": "randint", "_value": [5, 1]}}', ["x", "randint"]),
    ("uniform arity", '{"x": {"_type": "uniform", "_value": [0]}}', ["x", "uniform"]),
    ("quniform q", '{"x": {"_type": "quniform", "_value": [0, 1, 0]}}', ["x", "q"]),
    ("loguniform low", '{"x": {"_type": "loguniform", "_value": [0, 1]}}', ["x", "loguniform"]),
    ("normal sigma", '{"x": {"_type": "normal", "_value": [0, -1]}}', ["x", "sigma"]),
    ("nested choice", '{"m": {"_type": "choice", "_value": [{"_name": "a", "y": {"_type": "uniform", "_value": [2, 1]}}]}}',
     ["m", "y"]),
]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "trial.py").write_text("import expmgr\nexpmgr.report_final_result(1.0)\n")
    (tmp_path / "space.json").write_text(GOOD_SPACE)
    return tmp_path


@pytest.mark.parametrize("name,text,line,fragments", BAD_CONFIGS, ids=[case[0] for case in BAD_CONFIGS])
def test_bad_config_is_refused_with_file_line_and_field(project: Path, name, text, line, fragments):
    (project / "config.yml").write_text(text)
    home = project / "home"
    result = expctl("create", "--config", "config.yml", "--foreground", home=home, cwd=project)
    assert result.returncode == 2, result.stderr
    message = result.stderr.strip().splitlines()[-1] if "yaml" not in name else result.stderr
    assert "config.yml" in message
    if line is not None:
        assert f"config.yml:{line}:" in message
    for fragment in fragments:
        assert fragment in message
    assert not home.exists(), "a bad config must leave nothing on disk"


@pytest.mark.parametrize("name,space,fragments", BAD_SPACES, ids=[case[0] for case in BAD_SPACES])
def test_bad_search_space_entry_is_refused_naming_the_file_and_parameter(project: Path, name, space, fragments):
    (project / "space.json").write_text(space)
    (project / "config.yml").write_text(BASE)
    home = project / "home"
    result = expctl("create", "--config", "config.yml", "--foreground", home=home, cwd=project)
    assert result.returncode == 2, result.stderr
    assert "space.json:" in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr
    assert not home.exists()


def test_create_foreground_serves_after_done_until_sigterm_as_nni(project: Path):
    from expmgr.store.registry import Registry
    from tests.helpers.common import refuses_connections, rest_call
    (project / "config.yml").write_text(BASE)
    home = project / "home"
    # Its stdout in a file the test can read while it runs: the registry says DONE a moment
    # before the outcome is printed, and a SIGTERM in between would cut that short.
    output = open(project / "stdout", "w+")
    process = start_create(project, home, foreground_only=True, stdout=output)
    try:
        def done_entry():
            entries = Registry(home).entries() if (home / "registry.sqlite").exists() else []
            return entries and entries[0].status.value == "DONE" and entries[0]
        entry = wait_until(done_entry, timeout=60, what="DONE")
        wait_until(lambda: "its server stays up" in (project / "stdout").read_text(), what="the outcome printed")
        assert entry.pid == process.pid and process.poll() is None, "it stays after DONE"
        assert rest_call(entry.port, "GET", "check-status") == (200, {"status": "DONE", "errors": []})
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
        stdout = (project / "stdout").read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
        output.close()
    assert process.returncode == 0, stderr
    assert f"experiment {entry.id} DONE" in stdout and "its server stays up, read-only" in stdout
    assert Registry(home).get(entry.id).pid is None and refuses_connections(entry.port)


def test_bad_port_flag_is_a_usage_error(project: Path):
    (project / "config.yml").write_text(BASE)
    result = expctl("create", "--config", "config.yml", "--port", "99999", "--foreground",
                    home=project / "home", cwd=project)
    assert result.returncode == 2
    assert "--port" in result.stderr and "99999" in result.stderr


def test_create_foreground_runs_the_experiment_to_the_end(project: Path):
    """With --exit-when-done (scripts, the README's quickstart) it exits 0 at DONE."""
    (project / "config.yml").write_text(BASE)
    home = project / "home"
    result = expctl("create", "--config", "config.yml", "--port", "0", "--foreground", "--exit-when-done",
                    home=home, cwd=project)
    assert result.returncode == 0, result.stderr
    assert "its server stays up" not in result.stdout
    assert "DONE" in result.stdout and "best trial" in result.stdout
    assert "progress: 1/2 trials ended (1 succeeded), 0 running, best 1 (trial " in result.stdout
    assert "progress: 2/2 trials ended (2 succeeded), 0 running, best 1 (trial " in result.stdout
    experiments = [p for p in home.iterdir() if p.is_dir()]
    assert len(experiments) == 1
    assert (experiments[0] / "db" / "experiment.sqlite").is_file()
    assert (experiments[0] / "logs" / "experiment.log").read_text().count("SUCCEEDED") == 2


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_to_foreground_create_stops_the_experiment_cleanly(project: Path, signum: int):
    (project / "trial.py").write_text("import time\ntime.sleep(120)\n")
    (project / "config.yml").write_text(BASE.replace("trialConcurrency: 1", "trialConcurrency: 2")
                                        + "trialGracePeriod: 2s\n")
    home = project / "home"
    process = start_create(project, home)
    try:
        wait_until(lambda: _running_trials(home) == 2, what="two running trials")
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stderr
    assert "STOPPED" in stdout
    database = next(home.glob("*/db/experiment.sqlite"))
    rows = sqlite3.connect(database).execute("SELECT status FROM trials").fetchall()
    assert rows == [("USER_CANCELED",), ("USER_CANCELED",)]
    assert sqlite3.connect(home / "registry.sqlite").execute(
        "SELECT status FROM experiments").fetchall() == [("STOPPED",)]


def test_ctrl_c_at_the_terminal_stops_the_experiment_not_its_dispatcher(project: Path):
    """A terminal's Ctrl+C reaches the whole foreground process group."""
    (project / "trial.py").write_text("import time\ntime.sleep(120)\n")
    (project / "config.yml").write_text(BASE)
    home = project / "home"
    process = start_create(project, home, start_new_session=True)
    try:
        wait_until(lambda: _running_trials(home) == 1, what="a running trial")
        os.killpg(process.pid, signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stderr
    assert "STOPPED" in stdout and "Traceback" not in stderr
    assert "KeyboardInterrupt" not in next(home.glob("*/logs/dispatcher.log")).read_text()


def test_trials_and_their_children_do_not_outlive_a_sigkilled_experiment(project: Path):
    import psutil
    (project / "trial.py").write_text(
        "import os, subprocess, time, expmgr\n"
        "child = subprocess.Popen(['sleep', '120'])\n"
        "with open(os.path.join(os.environ['PIDS_DIR'], expmgr.get_trial_id()), 'w') as f:\n"
        "    f.write(f'{os.getpid()} {child.pid}')\n"
        "time.sleep(120)\n")
    (project / "config.yml").write_text(BASE.replace("trialConcurrency: 1", "trialConcurrency: 2")
                                        .replace("maxTrialNumber: 2", "maxTrialNumber: 4"))
    pids_dir = project / "pids"
    pids_dir.mkdir()
    home = project / "home"
    process = start_create(project, home, extra_env={"PIDS_DIR": str(pids_dir)},
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        files = wait_until(lambda: len(list(pids_dir.iterdir())) == 2 and list(pids_dir.iterdir()),
                           what="two trials with a child each")
        pids = wait_until(lambda: all(f.read_text() for f in files)
                          and [int(p) for f in files for p in f.read_text().split()], what="their pids")
        assert all(psutil.pid_exists(pid) for pid in pids)
        process.kill()
        process.wait(timeout=30)

        def alive() -> list[int]:
            return [pid for pid in pids if psutil.pid_exists(pid)
                    and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
        wait_until(lambda: not alive(), timeout=5, what="every trial process and child to end")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_second_ctrl_c_kills_trials_without_waiting_out_the_grace_period(project: Path):
    ignoring = project / "trial-ignores-sigterm"
    (project / "trial.py").write_text(
        "import pathlib, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"pathlib.Path({str(ignoring)!r}).touch()\ntime.sleep(300)\n")
    (project / "config.yml").write_text(BASE + "trialGracePeriod: 5m\n")
    home = project / "home"
    process = start_create(project, home, start_new_session=True)

    def experiment_status() -> str | None:
        databases = list(home.glob("*/db/experiment.sqlite"))
        try:
            return databases and sqlite3.connect(databases[0]).execute("SELECT status FROM experiment").fetchone()[0]
        except sqlite3.OperationalError:
            return None
    try:
        # RUNNING in the store comes before the trial's code ignores SIGTERM: the file says it does.
        wait_until(lambda: _running_trials(home) == 1 and ignoring.exists(), what="a running trial ignoring SIGTERM")
        os.killpg(process.pid, signal.SIGINT)
        wait_until(lambda: experiment_status() == "STOPPING", what="STOPPING")
        os.killpg(process.pid, signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)  # far less than the 5 minutes of grace
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "STOPPED" in stdout
    database = next(home.glob("*/db/experiment.sqlite"))
    assert sqlite3.connect(database).execute("SELECT status FROM trials").fetchall() == [("USER_CANCELED",)]


# expctl, with a Ctrl+C that it sends itself (a real SIGINT) right after one step of its start
# returned: the moments between the first trial's start and the wait for the search's end.
INTERRUPTED_AFTER = """\
import importlib, os, signal, sys
module_name, _, attribute = sys.argv[1].partition(":")
owner = importlib.import_module(module_name)
*classes, name = attribute.split(".")
for class_name in classes:
    owner = getattr(owner, class_name)
step = getattr(owner, name)
def step_then_ctrl_c(*args, **kwargs):
    result = step(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGINT)
    return result
setattr(owner, name, step_then_ctrl_c)
from expmgr.cli.__main__ import main
sys.exit(main(sys.argv[2:]))
"""

STARTED_STEPS = [
    "expmgr.experiment.manager:Manager.start",         # inside Experiment.start: trials may be running
    "expmgr.experiment.experiment:Experiment.start",   # Experiment.start returned: the CLI has not waited yet
]


@pytest.mark.parametrize("step", STARTED_STEPS)
def test_ctrl_c_as_the_first_trial_starts_stops_the_experiment_cleanly(project: Path, step: str):
    trial_pids = project / "trial-pids"
    (project / "trial.py").write_text(
        f"import os, time\nwith open({str(trial_pids)!r}, 'a') as f: f.write(f'{{os.getpid()}}\\n')\n"
        "time.sleep(300)\n")
    (project / "config.yml").write_text(BASE)
    home = project / "home"
    result = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_AFTER, step, "create", "--config", "config.yml", "--port", "0",
         "--foreground", "--exit-when-done"],
        cwd=project, env={**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 130, result.stderr
    assert "Traceback" not in result.stderr and "STOPPED" in result.stdout
    database = sqlite3.connect(next(home.glob("*/db/experiment.sqlite")))
    assert database.execute("SELECT status FROM experiment").fetchone() == ("STOPPED",)
    assert {status for status, in database.execute("SELECT status FROM trials")} <= {"USER_CANCELED"}
    started = [int(pid) for pid in trial_pids.read_text().split()] if trial_pids.exists() else []
    assert not [pid for pid in started if psutil.pid_exists(pid)
                and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]


def test_ctrl_c_before_the_experiment_started_leaves_nothing_of_it(project: Path):
    (project / "config.yml").write_text(BASE)
    home = project / "home"
    result = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_AFTER, "expmgr.experiment.experiment:server_sockets", "create",
         "--config", "config.yml", "--port", "0", "--foreground", "--exit-when-done"],
        cwd=project, env={**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 130, result.stderr
    assert "Traceback" not in result.stderr and "interrupted before experiment" in result.stderr
    assert not [path for path in home.glob("*") if path.is_dir()]  # no experiment folder


def test_port_in_use_is_refused_with_exit_2_naming_the_flag_and_nothing_on_disk(project: Path):
    import socket
    (project / "config.yml").write_text(BASE)
    home = project / "home"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = expctl("create", "--config", "config.yml", "--port", str(port), "--foreground", "--exit-when-done",
                        home=home, cwd=project)
    assert result.returncode == 2
    assert f"--port {port}" in result.stderr and "cannot listen" in result.stderr
    assert not home.exists()
