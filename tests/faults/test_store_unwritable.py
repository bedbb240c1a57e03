"""Nothing is lost when the store cannot be written: while another connection holds
``BEGIN EXCLUSIVE`` on the experiment's SQLite file (or its folder is read-only),
trials keep reporting, launching pauses and says so, and once the store takes writes
again every report is stored and the experiment goes on to DONE."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import sqlite3
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from expmgr import Experiment, ExperimentConfig
from expmgr.store.registry import Registry, RegistryEntry
from expmgr.states import ExperimentState
from tests.helpers.common import REPO, wait_until, write_script
from tests.helpers.disks import fill as _fill
from tests.helpers.server import SocketClient

REPORTS = 5  # per trial: 4 intermediate, 1 final
HOLD_SECONDS = 3.0
"""How long the store stays blocked at least: several of the runner's retries (0.1 s, doubling)
fail meanwhile, and no trial may be launched in that time."""

TRIAL = f"""
    import os, time, expmgr
    x = expmgr.get_next_parameter()["x"]
    code = os.getcwd()
    while x < 4 and not os.path.exists(os.path.join(code, "go")):  # the first four report under the lock
        time.sleep(0.05)
    for step in range({REPORTS - 1}):
        expmgr.report_intermediate_result(x + step / 10)
        time.sleep(0.05)
    expmgr.report_final_result(x * 10)
    open(os.path.join(code, f"done-{{x}}"), "w").close()
"""


def _config(tmp_path: Path, code_dir: Path) -> ExperimentConfig:
    return ExperimentConfig(search_space={"x": {"_type": "choice", "_value": list(range(6))}},
                            trial_command="python3 trial.py", trial_code_directory=code_dir, trial_concurrency=4,
                            max_trial_number=6, tuner={"name": "GridSearch"}, trial_grace_period=1,
                            experiment_working_directory=tmp_path / "home")


def _check_status(experiment: Experiment) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{experiment.port}/api/v1/nni/check-status", timeout=5) as answer:
        return json.load(answer)


def _count_metrics(experiment: Experiment) -> dict[int, int]:
    conn = sqlite3.connect(f"file:{experiment.paths.database}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT t.parameters_json, COUNT(m.id) FROM trials t LEFT JOIN metrics m "
                            "ON m.trial_id = t.trial_id GROUP BY t.trial_id").fetchall()
    finally:
        conn.close()
    return {json.loads(parameters)["x"]: count for parameters, count in rows}


def _run_with_store_blocked(tmp_path: Path, code_dir: Path, block, unblock) -> Experiment:
    """Start 4 trials, block the store, let them report 5 times each and exit, check
    that launching is paused (experiment.log, check-status, the web UI's websocket),
    unblock after HOLD_SECONDS, and wait for the end."""
    write_script(code_dir, "trial.py", TRIAL)
    experiment = Experiment(_config(tmp_path, code_dir))
    experiment.start(port=0)
    clients: list[SocketClient] = []
    try:
        watching = SocketClient(experiment.port)
        clients.append(watching)
        wait_until(lambda: [t.status for t in experiment.list_trial_jobs()].count("RUNNING") == 4,
                   what="four trials running")
        held_since = time.monotonic()
        block(experiment)
        try:
            (code_dir / "go").touch()
            wait_until(lambda: all((code_dir / f"done-{x}").exists() for x in range(4)), timeout=60,
                       what="the four trials to report and end")
            log = experiment.paths.experiment_log
            wait_until(lambda: "launching new trials is paused" in log.read_text(), what="the pause in experiment.log")
            assert str(experiment.paths.database) in log.read_text()
            notice = _check_status(experiment)["storeUnwritable"]
            assert notice.startswith("launching new trials is paused") and str(experiment.paths.database) in notice
            wait_until(lambda: {"type": "store", "unwritable": notice} in watching.messages,
                       what="the web UI told that launching is paused")
            late = SocketClient(experiment.port)  # a page opened meanwhile learns it on connecting
            clients.append(late)
            wait_until(lambda: late.of_type("hello"), what="hello")
            assert late.of_type("hello")[0]["storeUnwritable"] == notice
            time.sleep(max(0.0, HOLD_SECONDS - (time.monotonic() - held_since)))
            assert len(experiment.list_trial_jobs()) == 4, "no trial is launched while the store is unwritable"
        finally:
            unblock(experiment)
        wait_until(lambda: {"type": "store", "unwritable": None} in watching.messages,
                   what="the web UI told that launching goes on")
        assert experiment.wait(timeout=90)
    finally:
        for client in clients:
            client.close()
        experiment.stop()
    assert "can be written again; launching new trials goes on" in experiment.paths.experiment_log.read_text()
    return experiment


def _assert_every_report_stored(experiment: Experiment) -> None:
    assert experiment.get_status() == "DONE", experiment.get_error()
    trials = experiment.list_trial_jobs()
    assert len(trials) == 6 and all(t.status == "SUCCEEDED" for t in trials)
    assert _count_metrics(experiment) == {x: REPORTS for x in range(6)}, "every report each trial made is stored"
    assert sorted(t.finalMetric for t in trials) == [0, 10, 20, 30, 40, 50]
    blocked = [t for t in trials if t.parameters["x"] < 4]
    for trial in blocked:  # told, not failed: the 503 is a warning at the trial
        stderr = (experiment.paths.trial_dir(trial.trialJobId) / "stderr").read_text()
        assert "could not store a metric report yet; it is kept in metrics.jsonl" in stderr


def test_store_held_exclusively_while_trials_report_loses_no_report_and_pauses_launching(
        tmp_path: Path, code_dir: Path):
    holder: dict[str, sqlite3.Connection] = {}

    def block(experiment: Experiment) -> None:
        conn = sqlite3.connect(experiment.paths.database, isolation_level=None, timeout=10)
        conn.execute("BEGIN EXCLUSIVE")
        holder["conn"] = conn

    def unblock(experiment: Experiment) -> None:
        conn = holder.pop("conn", None)
        if conn is not None:
            conn.execute("ROLLBACK")
            conn.close()

    experiment = _run_with_store_blocked(tmp_path, code_dir, block, unblock)
    _assert_every_report_stored(experiment)


DISK_TRIAL = f"""
    import os, sys, time, expmgr
    x = expmgr.get_next_parameter()["x"]
    code = os.getcwd()
    # Output and a first report before the disk fills: the small files then have their
    # page on the tmpfs and later appends fit in it, as the store's next writes do not.
    print("started", flush=True)
    print("started", file=sys.stderr, flush=True)
    expmgr.report_intermediate_result(x)
    open(os.path.join(code, f"reported-{{x}}"), "w").close()
    while x < 4 and not os.path.exists(os.path.join(code, "go")):
        time.sleep(0.05)
    for step in range(1, {REPORTS - 1}):
        expmgr.report_intermediate_result(x + step / 10)
    expmgr.report_final_result(x * 10)
    open(os.path.join(code, f"done-{{x}}"), "w").close()
"""


def test_a_full_disk_pauses_launching_and_loses_no_report_until_space_is_freed(
        tmp_path: Path, code_dir: Path, small_disk: Path):
    """The experiment's folder on a disk that fills up while trials report: SQLite says
    "database or disk is full", launching pauses (check-status says why), and once space is
    freed every report is stored and the experiment ends DONE. (A folder made read-only
    cannot be shown here: the store's files are open already, and chmod does not reach open
    files; a read-only remount is refused while they are open.)"""
    write_script(code_dir, "trial.py", DISK_TRIAL)
    config = _config(tmp_path, code_dir)
    config.experiment_working_directory = small_disk
    experiment = Experiment(config)
    experiment.start(port=0)
    try:
        wait_until(lambda: all((code_dir / f"reported-{x}").exists() for x in range(4)), what="four trials reporting")
        filler = _fill(small_disk)
        try:
            (code_dir / "go").touch()
            wait_until(lambda: all((code_dir / f"done-{x}").exists() for x in range(4)), timeout=60,
                       what="the four trials to report and end")
            paused = wait_until(lambda: _check_status(experiment).get("storeUnwritable"), what="launching paused")
            assert "full" in paused, paused
            time.sleep(2)  # the retries go on failing meanwhile; nothing is launched
            assert len(experiment.list_trial_jobs()) == 4, "no trial is launched while the disk is full"
        finally:
            filler.unlink()
        assert experiment.wait(timeout=90)
    finally:
        experiment.stop()
    assert "can be written again; launching new trials goes on" in experiment.paths.experiment_log.read_text()
    _assert_every_report_stored(experiment)


LONG_TRIAL = """
    import time, expmgr
    expmgr.get_next_parameter()
    expmgr.report_intermediate_result(1)
    time.sleep(120)
"""


def _stop_in_background(experiment: Experiment) -> threading.Thread:
    """``experiment.stop()`` blocks until the end: called from a thread of its own."""
    thread = threading.Thread(target=experiment.stop, daemon=True)
    thread.start()
    return thread


def _hold_exclusive(database: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(database, isolation_level=None, timeout=10)
    conn.execute("BEGIN EXCLUSIVE")
    return conn


def test_a_stop_while_the_store_is_locked_stops_the_trials_and_records_the_end_once_it_is_released(
        tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", LONG_TRIAL)
    experiment = Experiment(_config(tmp_path, code_dir))
    experiment.start(port=0)
    try:
        wait_until(lambda: [t.status for t in experiment.list_trial_jobs()].count("RUNNING") == 4,
                   what="four trials running")
        lock = _hold_exclusive(experiment.paths.database)
        try:
            stopping = _stop_in_background(experiment)
            wait_until(lambda: "launching new trials is paused" in experiment.paths.experiment_log.read_text(),
                       what="the store's refusal noticed")
            time.sleep(1)  # the stop waits on the store, it does not fail
            assert not experiment.wait(0)
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        assert experiment.wait(timeout=30)
        stopping.join(timeout=30)
    finally:
        experiment.stop()
    assert experiment.get_status() == "STOPPED"
    assert [t.status for t in experiment.list_trial_jobs()] == ["USER_CANCELED"] * 4


def test_a_store_locked_past_the_final_patience_still_lets_the_experiment_end_with_a_clear_error(
        tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch):
    from expmgr.engine import writes
    monkeypatch.setattr(writes, "FINAL_WRITE_PATIENCE", 1.0)  # not 60 s: a short test
    write_script(code_dir, "trial.py", LONG_TRIAL)
    experiment = Experiment(_config(tmp_path, code_dir))
    experiment.start(port=0)
    lock = None
    try:
        wait_until(lambda: [t.status for t in experiment.list_trial_jobs()].count("RUNNING") == 4,
                   what="four trials running")
        lock = _hold_exclusive(experiment.paths.database)
        _stop_in_background(experiment).join(timeout=30)
        assert experiment.wait(timeout=1), "an unwritable store must not keep the experiment from ending"
    finally:
        if lock is not None:
            lock.execute("ROLLBACK")
            lock.close()
        experiment.stop()
    log = experiment.paths.experiment_log.read_text()
    assert f"the experiment ended STOPPED, but {experiment.paths.database} could not be written" in log
    assert "database is locked" in log and "Traceback" not in log
    # the autouse fixture checks that no trial process is left behind


def test_a_locked_registry_neither_stalls_nor_ends_the_experiment(tmp_path: Path, code_dir: Path):
    """The registry only summarizes each experiment; the experiment's own store is its
    record. Held by another process, the registry is written off the loop: the experiment
    goes on to DONE meanwhile, warns that the registry was not told, and the registry
    catches up once it is free."""
    write_script(code_dir, "trial.py", """
        import os, time, expmgr
        expmgr.get_next_parameter()
        while not os.path.exists(os.path.join(os.getcwd(), "go")):
            time.sleep(0.05)
        expmgr.report_final_result(1)
    """)
    config = _config(tmp_path, code_dir)
    config.max_trial_number, config.trial_concurrency = 1, 1
    experiment = Experiment(config)
    experiment.start(port=0)
    registry = tmp_path / "home" / "registry.sqlite"
    lock = _hold_exclusive(registry)
    try:
        (code_dir / "go").touch()
        wait_until(lambda: experiment.get_status() == "DONE", what="DONE in the store while the registry is held")
        # Before the first registry write gave up (it waits 10 s for the lock): the loop did not wait for it.
        assert "the registry was not told" not in experiment.paths.experiment_log.read_text()
        wait_until(lambda: f"the registry was not told that experiment {experiment.id} is"
                   in experiment.paths.experiment_log.read_text(), what="the warning")
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    assert experiment.wait(timeout=90)
    experiment.stop()
    entry = Registry(tmp_path / "home").get(experiment.id)
    assert entry.status == ExperimentState.DONE, "the last state reached the registry once it was free"


PRINTING_DISK_TRIAL = DISK_TRIAL.replace("""
    for step in range(1,""", """
    for line in range(200):   # 20 KB, more than the page its stdout has on the full disk
        print(f"trial {x} line {line} " + "." * 80)
    open(os.path.join(code, f"printed-{x}"), "w").close()
    for step in range(1,""")


def test_a_full_disk_is_said_once_and_loses_no_log_record_nor_printed_line(
        tmp_path: Path, code_dir: Path, small_disk: Path, capfd: pytest.CaptureFixture[str]):
    """Trials print while the disk is full: their output is held, not lost, and neither is a
    record of experiment.log; the experiment says so once, with no "Logging error" traceback."""
    write_script(code_dir, "trial.py", PRINTING_DISK_TRIAL)
    config = _config(tmp_path, code_dir)
    config.experiment_working_directory = small_disk
    experiment = Experiment(config)
    experiment.start(port=0)
    try:
        wait_until(lambda: all((code_dir / f"reported-{x}").exists() for x in range(4)), what="four trials reporting")
        filler = _fill(small_disk)
        try:
            (code_dir / "go").touch()
            wait_until(lambda: all((code_dir / f"printed-{x}").exists() for x in range(4)),
                       what="the four trials to print while the disk is full")
            wait_until(lambda: _check_status(experiment).get("storeUnwritable"), what="launching paused")
        finally:
            filler.unlink()
        assert experiment.wait(timeout=90)
    finally:
        experiment.stop()
    err = capfd.readouterr().err
    assert "Logging error" not in err and "Traceback" not in err
    assert err.count(f"cannot write {experiment.paths.experiment_log}") <= 1
    log = experiment.paths.experiment_log.read_text()
    # Said (on stdout and in experiment.log, held until it could be written) once for each
    # file, and once again when it could be written.
    for x in range(4):
        trial_id = next(t.trialJobId for t in experiment.list_trial_jobs() if t.parameters["x"] == x)
        stdout = experiment.paths.trial_dir(trial_id) / "stdout"
        assert log.count(f"trial output: cannot write {stdout}: No space left on device") == 1, log
        assert log.count(f"trial output: {stdout} can be written again; no output was lost") == 1
    trials = experiment.list_trial_jobs()
    assert experiment.get_status() == "DONE" and len(trials) == 6
    for trial in trials:
        assert f"trial {trial.trialJobId} SUCCEEDED" in log
        x = trial.parameters["x"]
        printed = (experiment.paths.trial_dir(trial.trialJobId) / "stdout").read_text().splitlines()
        assert printed[-200:] == [f"trial {x} line {line} " + "." * 80 for line in range(200)]
    assert "records could not be written" not in log


def test_a_registry_on_a_full_disk_says_the_disk_is_full_not_to_move_it_aside(small_disk: Path):
    """SQLite says "disk I/O error" or "database or disk is full" there: the registry is not
    damaged, and moving it aside would lose the list of experiments for nothing."""
    home = small_disk / "home"
    Registry(home).add(RegistryEntry(id="ab12cd34", name=None, dir=str(home / "ab12cd34"), port=None, pid=None,
                                     status=ExperimentState.DONE, start_time=time.time()))
    filler = _fill(small_disk)
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    try:
        for command in (("experiment", "list", "--all"), ("trial", "ls", "ab12cd34")):
            result = subprocess.run([sys.executable, "-m", "expmgr.cli", *command], env=env, capture_output=True,
                                    text=True, timeout=120)
            assert result.returncode == 1 and "Traceback" not in result.stderr, (command, result.stderr)
            assert f"{home / 'registry.sqlite'}: cannot be used now (" in result.stderr, result.stderr
            assert f"the disk holding {home} is full; free some space there" in result.stderr, result.stderr
            assert "not a valid expmgr registry" not in result.stderr and "move it aside and" not in result.stderr
    finally:
        filler.unlink()
    assert [entry.id for entry in Registry(home).entries()] == ["ab12cd34"], "readable again once there is room"
