"""``expctl create`` as a detached daemon, and the commands that find and stop it:
``experiment list``, ``trial ls``, ``stop``. Real daemons, real signals."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from expmgr.store.registry import Registry, RegistryEntry
from expmgr.states import ExperimentState
from tests.helpers.cli_daemon import CONFIG, created_id, entry, expctl, project
from tests.helpers.common import REPO, refuses_connections, rest_call as call, wait_until


def test_daemon_returns_at_once_runs_to_the_end_alone_and_is_listed(project):
    cwd, home = project
    result = expctl(home, cwd, "create", "--config", "config.yml", "--port", "0")
    exp_id = created_id(result)
    assert f"http://127.0.0.1:{entry(home, exp_id).port}" in result.stdout
    assert f"expctl stop {exp_id}" in result.stdout
    wait_until(lambda: entry(home, exp_id).status == ExperimentState.DONE, timeout=60, what="DONE")
    assert expctl(home, cwd, "stop", exp_id).returncode == 0  # its server stayed after DONE
    wait_until(lambda: not psutil.pid_exists(entry(home, exp_id).pid or 0) or entry(home, exp_id).pid is None,
               what="the daemon to exit")
    listed = json.loads(expctl(home, cwd, "experiment", "list", "--all", "--json").stdout)
    assert [(row["id"], row["status"]) for row in listed] == [(exp_id, "DONE")]
    assert expctl(home, cwd, "experiment", "list").stdout.strip() == "(none)", "only running ones by default"
    trials = json.loads(expctl(home, cwd, "trial", "ls", exp_id[:3], "--json").stdout)
    assert sorted((row["status"], row["final"]) for row in trials) == [
        ("SUCCEEDED", 1), ("SUCCEEDED", 2), ("SUCCEEDED", 3), ("SUCCEEDED", 4)]
    best = json.loads(expctl(home, cwd, "trial", "ls", exp_id, "--sort", "default", "--head", "2", "--json").stdout)
    assert [row["final"] for row in best] == [4, 3], "best first, maximizing by default"
    no_metric = expctl(home, cwd, "trial", "ls", exp_id, "--sort", "loss")
    assert no_metric.returncode == 2 and "'loss'" in no_metric.stderr
    log_dir = home / exp_id / "logs"
    assert "is DONE" in (log_dir / "experiment.log").read_text()
    assert "experiment " + exp_id + " DONE" in (log_dir / "daemon.log").read_text()


def test_a_done_daemon_keeps_serving_read_only_with_nothing_else_left_until_stopped(project):
    """As NNI's: after DONE the REST API answers, writes are refused as in a view, only
    the server's process is left, the registry keeps its pid and port, and ``stop`` ends it."""
    from expmgr.server.rest import READ_ONLY
    cwd, home = project
    exp_id = created_id(expctl(home, cwd, "create", "--config", "config.yml", "--port", "0"))
    started = entry(home, exp_id)
    wait_until(lambda: entry(home, exp_id).status == ExperimentState.DONE, timeout=60, what="DONE")
    done = entry(home, exp_id)
    assert (done.pid, done.port) == (started.pid, started.port) and psutil.pid_exists(done.pid)
    assert call(done.port, "GET", "check-status")[1]["status"] == "DONE"
    status, trials = call(done.port, "GET", "trial-jobs")
    assert status == 200 and sorted(trial["status"] for trial in trials) == ["SUCCEEDED"] * 4
    status, exported = call(done.port, "GET", "export-data")
    assert status == 200 and len(exported) == 4
    assert call(done.port, "GET", "experiment")[1]["readOnly"] is True
    refusal = (409, {"error": READ_ONLY})
    # Only a raise of maxTrialNumber or maxExperimentDuration is taken after DONE (it runs more
    # trials: tests/experiment/test_more_trials_after_done.py); nothing else.
    status, answer = call(done.port, "PUT", "experiment?update_type=TRIAL_CONCURRENCY",
                          {"params": {"trialConcurrency": 9}})
    assert status == 400 and answer["error"].startswith("trialConcurrency: cannot be changed"), answer
    assert call(done.port, "DELETE", f"trial-jobs/{trials[0]['trialJobId']}") == refusal
    assert call(done.port, "POST", "experiment/import-data", []) == refusal
    daemon = psutil.Process(done.pid)
    wait_until(lambda: not daemon.children(recursive=True), what="no dispatcher, watchdog or trial under the daemon")
    listed = json.loads(expctl(home, cwd, "experiment", "list", "--json").stdout)
    assert [(row["id"], row["status"], row["port"]) for row in listed] == [(exp_id, "DONE", done.port)], \
        "listed by default while it serves, as DONE"
    assert expctl(home, cwd, "top", "--once").stdout.startswith(f"{exp_id}  ")
    assert "DONE" in expctl(home, cwd, "top", "--once").stdout
    assert expctl(home, cwd, "webui", "url", exp_id).stdout == f"http://127.0.0.1:{done.port}\n"
    unchangeable = expctl(home, cwd, "update", exp_id, "concurrency", "9")   # a raise of trialnum would run it again
    assert unchangeable.returncode == 2 and "trialConcurrency: cannot be changed" in unchangeable.stderr
    resumed = expctl(home, cwd, "resume", exp_id)
    assert resumed.returncode == 2 and "is served" in resumed.stderr
    stopped = expctl(home, cwd, "stop", exp_id)
    assert stopped.returncode == 0 and f"experiment {exp_id} DONE" in stopped.stdout
    daemon.wait(timeout=30)
    after = entry(home, exp_id)
    assert (after.status, after.pid) == (ExperimentState.DONE, None) and refuses_connections(done.port)
    assert expctl(home, cwd, "experiment", "list").stdout.strip() == "(none)"
    again = expctl(home, cwd, "stop", exp_id)
    assert again.returncode == 0 and "is not running (DONE)" in again.stdout
    assert "its server stays up" in (home / exp_id / "logs" / "daemon.log").read_text()


def context_switches(pid: int) -> int:
    """How many times the threads of process ``pid`` gave up the CPU so far, summed: each
    wake-up of a sleeping thread (a timer, a poll) adds one."""
    total = 0
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        try:
            lines = status.read_text().splitlines()
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile
        total += sum(int(line.split()[1]) for line in lines
                     if line.split(":")[0] in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"))
    return total


def test_a_done_daemon_sleeps_until_asked_something(project):
    """While it only serves after DONE, nothing in the daemon wakes up: no loop looking at
    signals or at the clock (one waking every 0.2 s makes about 10 switches in 2 s). It
    still answers, and stops on SIGTERM at once."""
    cwd, home = project
    exp_id = created_id(expctl(home, cwd, "create", "--config", "config.yml", "--port", "0"))
    wait_until(lambda: entry(home, exp_id).status == ExperimentState.DONE, timeout=60, what="DONE")
    done = entry(home, exp_id)
    daemon = psutil.Process(done.pid)
    wait_until(lambda: not daemon.children(recursive=True), what="no dispatcher, watchdog or trial under the daemon")
    time.sleep(1)  # its last writes after DONE (registry, logs) are done
    before = context_switches(done.pid)
    time.sleep(2)
    woken = context_switches(done.pid) - before
    assert woken <= 2, f"the daemon's threads woke {woken} times in 2 s of serving nobody"
    assert call(done.port, "GET", "check-status")[1]["status"] == "DONE"
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=30)
    assert entry(home, exp_id).pid is None, "closed as expctl stop closes it"


def test_a_daemon_created_with_exit_when_done_ends_with_its_search(project):
    cwd, home = project
    # The trials wait for the test to have the daemon's pid: four trivial ones may end before it reads it.
    gate = cwd / "gate"
    (cwd / "trial.py").write_text(f"import pathlib, time\nimport expmgr\nx = expmgr.get_next_parameter()['x']\n"
                                  f"while not pathlib.Path({str(gate)!r}).exists():\n    time.sleep(0.01)\n"
                                  "expmgr.report_final_result(x)\n")
    exp_id = created_id(expctl(home, cwd, "create", "--config", "config.yml", "--port", "0", "--exit-when-done"))
    pid = entry(home, exp_id).pid
    assert pid is not None
    gate.touch()
    wait_until(lambda: entry(home, exp_id).status == ExperimentState.DONE and entry(home, exp_id).pid is None,
               timeout=60, what="DONE and closed")
    wait_until(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
               what="the daemon to exit")


def test_daemon_create_refuses_bad_input_before_anything_starts(project):
    cwd, home = project
    (cwd / "bad.yml").write_text(CONFIG.replace("trialConcurrency: 2", "trialConcurrency: 0"))
    result = expctl(home, cwd, "create", "--config", "bad.yml", "--port", "0")
    assert result.returncode == 2 and "bad.yml:4:" in result.stderr and "trialConcurrency" in result.stderr
    import socket
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = expctl(home, cwd, "create", "--config", "config.yml", "--port", str(port))
    assert result.returncode == 2 and f"--port {port}" in result.stderr
    assert not home.exists()


def test_stop_ends_a_daemon_gracefully_and_says_so_when_it_is_not_running(project):
    cwd, home = project
    (cwd / "trial.py").write_text("import time\ntime.sleep(120)\n")
    exp_id = created_id(expctl(home, cwd, "create", "--config", "config.yml", "--port", "0"))
    wait_until(lambda: "RUNNING" in expctl(home, cwd, "trial", "ls", exp_id, "--table").stdout, what="a running trial")
    result = expctl(home, cwd, "stop", exp_id[:4])
    assert result.returncode == 0, result.stderr
    assert f"experiment {exp_id} STOPPED" in result.stdout
    trials = json.loads(expctl(home, cwd, "trial", "ls", exp_id, "--json").stdout)
    assert [row["status"] for row in trials] == ["USER_CANCELED", "USER_CANCELED"]
    again = expctl(home, cwd, "stop", exp_id)
    assert again.returncode == 0 and "is not running (STOPPED)" in again.stdout


def test_stop_cancel_kills_trials_without_the_grace_period(project):
    cwd, home = project
    (cwd / "trial.py").write_text("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                                  "time.sleep(300)\n")
    (cwd / "config.yml").write_text(CONFIG.replace("trialGracePeriod: 2s", "trialGracePeriod: 10m"))
    exp_id = created_id(expctl(home, cwd, "create", "--config", "config.yml", "--port", "0"))
    wait_until(lambda: expctl(home, cwd, "trial", "ls", exp_id, "--table").stdout.count("RUNNING") == 2,
               what="two running trials")
    started = time.monotonic()
    result = expctl(home, cwd, "stop", "--cancel", "--timeout", "60")
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 60, "far less than the 10 minutes of grace"
    assert entry(home, exp_id).status == ExperimentState.STOPPED


def test_stop_fails_when_the_experiment_dies_while_it_stops(project):
    """A stop that ends in a dead process (its end never recorded: GONE) is not a stop: exit 1."""
    cwd, home = project
    (cwd / "trial.py").write_text("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                                  "time.sleep(300)\n")
    (cwd / "config.yml").write_text(CONFIG.replace("trialGracePeriod: 2s", "trialGracePeriod: 10m"))
    exp_id = created_id(expctl(home, cwd, "create", "--config", "config.yml", "--port", "0"))
    wait_until(lambda: expctl(home, cwd, "trial", "ls", exp_id, "--table").stdout.count("RUNNING") == 2,
               what="two running trials")
    pid = entry(home, exp_id).pid
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    stopping = subprocess.Popen([sys.executable, "-m", "expmgr.cli", "stop", exp_id, "--timeout", "60"], cwd=cwd,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: entry(home, exp_id).status == ExperimentState.STOPPING, what="STOPPING")
        os.kill(pid, signal.SIGKILL)   # as Ray's failure-signal handler aborted it (issue 26)
        out, err = stopping.communicate(timeout=90)
    finally:
        if stopping.poll() is None:
            stopping.kill()
            stopping.wait()
    assert stopping.returncode == 1, out + err
    assert f"experiment {exp_id} died while it stopped (GONE" in err and f"expctl resume {exp_id}" in err, err


def test_unknown_and_ambiguous_ids_are_refused_with_exit_2(project):
    cwd, home = project
    registry = Registry(home)
    for exp_id in ("abc11111", "abc22222"):
        registry.add(RegistryEntry(exp_id, None, str(home / exp_id), 1, None, ExperimentState.DONE, time.time()))
    unknown = expctl(home, cwd, "trial", "ls", "zzz")
    assert unknown.returncode == 2 and "no experiment 'zzz'" in unknown.stderr
    ambiguous = expctl(home, cwd, "stop", "abc")
    assert ambiguous.returncode == 2 and "ambiguous" in ambiguous.stderr and "abc11111" in ambiguous.stderr
    nothing = expctl(home, cwd, "stop")
    assert nothing.returncode == 0 and "no experiment is running" in nothing.stdout, "as nnictl stop"


def test_a_daemon_killed_outright_is_listed_as_gone(project):
    cwd, home = project
    (cwd / "trial.py").write_text("import time\ntime.sleep(120)\n")
    exp_id = created_id(expctl(home, cwd, "create", "--config", "config.yml", "--port", "0"))
    wait_until(lambda: entry(home, exp_id).status == ExperimentState.RUNNING, what="RUNNING")
    pid = entry(home, exp_id).pid
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
               what="the daemon to die")
    listed = json.loads(expctl(home, cwd, "experiment", "list", "--all", "--json").stdout)
    assert [(row["id"], row["status"]) for row in listed] == [(exp_id, "GONE")]
    result = expctl(home, cwd, "stop", exp_id)
    assert "is not running (GONE)" in result.stdout


def test_log_prints_and_follows_a_trials_streams_and_the_experiment_log(project):
    cwd, home = project
    (cwd / "trial.py").write_text(
        "import logging, sys, time\n"
        "import expmgr\n"
        "for i in range(6):\n"
        "    print('line', i, flush=True)\n"
        "    logging.getLogger('nni.model').info('record %d', i)\n"
        "    time.sleep(0.2)\n"
        "print('to stderr', file=sys.stderr)\n")
    (cwd / "config.yml").write_text(CONFIG.replace("maxTrialNumber: 4", "maxTrialNumber: 1")
                                    .replace("trialConcurrency: 2", "trialConcurrency: 1"))
    exp_id = created_id(expctl(home, cwd, "create", "--config", "config.yml", "--port", "0"))
    trial_id = wait_until(lambda: json.loads(expctl(home, cwd, "trial", "ls", exp_id, "--json").stdout or "[]"),
                          what="the trial")[0]["trial"]
    followed = expctl(home, cwd, "log", "stdout", exp_id, trial_id[:3], "-f")
    assert followed.returncode == 0, followed.stderr
    assert followed.stdout.splitlines() == [f"line {i}" for i in range(6)], "followed to the trial's end"
    assert expctl(home, cwd, "log", "stdout", exp_id, trial_id, "--tail", "2").stdout == "line 4\nline 5\n"
    assert expctl(home, cwd, "log", "stderr", exp_id, trial_id).stdout == "to stderr\n"
    trial_log = expctl(home, cwd, "log", "trial", exp_id, trial_id, "-f").stdout
    assert [line.split(") ", 1)[1] for line in trial_log.splitlines()] == [f"record {i}" for i in range(6)]
    experiment_log = expctl(home, cwd, "log", "experiment", exp_id, "-f")
    assert f"experiment {exp_id} is DONE" in experiment_log.stdout, "followed to the experiment's end"
    unknown = expctl(home, cwd, "log", "trial", exp_id, "zzzzz")
    assert unknown.returncode == 2 and "no trial 'zzzzz'" in unknown.stderr
    usage = expctl(home, cwd, "log", "experiment", exp_id, "extra")
    assert usage.returncode == 2 and "expected [ID]" in usage.stderr


def test_daemon_of_an_experiment_kept_outside_expmgr_home_is_found(project):
    cwd, home = project
    elsewhere = cwd / "elsewhere"
    (cwd / "config.yml").write_text(CONFIG + f"experimentWorkingDirectory: {elsewhere}\n")
    exp_id = created_id(expctl(home, cwd, "create", "--config", "config.yml", "--port", "0"))
    wait_until(lambda: Registry(elsewhere).get(exp_id).status == ExperimentState.DONE, what="DONE")
    assert not (home / "registry.sqlite").exists()
    os.kill(Registry(elsewhere).get(exp_id).pid, signal.SIGTERM)  # its server stays after DONE; the fixture
    wait_until(lambda: Registry(elsewhere).get(exp_id).pid is None, what="its server to close")  # looks in home


# expctl, whose wait for the daemon's server begins only once the daemon exited: as when a
# short search with --exit-when-done ends before the first look.
LATE_LOOK = """\
import sys
from expmgr.cli import launch
wait_until_started = launch._wait_until_started
def look_late(exp_id, daemon, *args):
    daemon.wait(timeout=60)
    return wait_until_started(exp_id, daemon, *args)
launch._wait_until_started = look_late
from expmgr.cli.__main__ import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_daemon_whose_search_ended_before_the_first_look_is_reported_created_and_ended(project):
    cwd, home = project
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", LATE_LOOK, "create", "--config", "config.yml", "--port", "0",
                             "--exit-when-done"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    exp_id = created_id(result).rstrip(";")
    assert f"experiment {exp_id} created; it has ended already: DONE" in result.stdout
    assert entry(home, exp_id).status == ExperimentState.DONE and entry(home, exp_id).pid is None


def test_daemon_whose_experiment_fails_at_once_is_reported(project):
    cwd, home = project
    # A custom tuner is only imported by the dispatcher, so this fails after the start.
    (cwd / "config.yml").write_text(CONFIG.replace("name: GridSearch", "className: no_such_module.Tuner"))
    result = expctl(home, cwd, "create", "--config", "config.yml", "--port", "0")
    if result.returncode == 0:  # it answered REST before its tuner failed: the store says why
        exp_id = created_id(result)
        wait_until(lambda: entry(home, exp_id).status == ExperimentState.ERROR, what="ERROR")
    else:
        assert result.returncode == 1 and "did not start" in result.stderr and "logs are in" in result.stderr


def test_experiment_show_status_export_and_delete(project):
    cwd, home = project
    exp_id = created_id(expctl(home, cwd, "create", "--config", "config.yml", "--port", "0"))
    wait_until(lambda: entry(home, exp_id).status == ExperimentState.DONE, timeout=60, what="DONE")
    assert expctl(home, cwd, "experiment", "status", exp_id[:4], "--table").stdout == f"{exp_id} DONE\n"
    assert json.loads(expctl(home, cwd, "experiment", "status", exp_id[:4]).stdout) == {"errors": [], "status": "DONE"}
    profile = json.loads(expctl(home, cwd, "experiment", "show", exp_id).stdout)
    assert profile["id"] == exp_id and profile["params"]["maxTrialNumber"] == 4
    exported = json.loads(expctl(home, cwd, "experiment", "export", exp_id, "--format", "json").stdout)
    assert sorted((record["parameter"]["x"], record["value"]) for record in exported) == [
        (1, "1"), (2, "2"), (3, "3"), (4, "4")], "NNI's export: value a JSON string"
    result = expctl(home, cwd, "experiment", "export", exp_id, "--format", "csv", "--output", "out.csv")
    assert result.returncode == 0
    lines = (cwd / "out.csv").read_text().splitlines()
    assert lines[0] == "trialJobId,x,reward" and len(lines) == 5
    served = expctl(home, cwd, "experiment", "delete", exp_id, "--yes")
    assert served.returncode == 2 and f"is served; stop it first (expctl stop {exp_id})" in served.stderr
    assert expctl(home, cwd, "stop", exp_id).returncode == 0
    refused = expctl(home, cwd, "experiment", "delete", exp_id)  # stdin ends before a y/N answer
    assert refused.returncode == 2 and "--yes" in refused.stderr and (home / exp_id).exists()
    deleted = expctl(home, cwd, "experiment", "delete", exp_id, "--yes")
    assert deleted.returncode == 0 and not (home / exp_id).exists()
    assert expctl(home, cwd, "experiment", "list", "--all").stdout.strip() == "(none)"


def test_sixteen_concurrent_creates_make_sixteen_experiments_and_an_intact_registry(project):
    from concurrent.futures import ThreadPoolExecutor
    cwd, home = project
    (cwd / "config.yml").write_text(CONFIG.replace("maxTrialNumber: 4", "maxTrialNumber: 1")
                                    .replace("trialConcurrency: 2", "trialConcurrency: 1"))
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda _: expctl(home, cwd, "create", "--config", "config.yml", "--port", "0",
                                                 "--exit-when-done"), range(16)))
    assert [r.returncode for r in results] == [0] * 16, [r.stderr for r in results if r.returncode]
    ids = {created_id(r) for r in results}
    assert len(ids) == 16
    wait_until(lambda: all(entry(home, exp_id).status == ExperimentState.DONE for exp_id in ids),
               timeout=120, what="all sixteen DONE")
    listed = json.loads(expctl(home, cwd, "experiment", "list", "--all", "--json").stdout)
    assert sorted(row["id"] for row in listed) == sorted(ids)
    assert {len(list((home / exp_id / "trials").iterdir())) for exp_id in ids} == {1}
    wait_until(lambda: all(entry(home, exp_id).pid is None for exp_id in ids), what="--exit-when-done: all closed")


def test_update_and_trial_kill_change_a_running_daemon(project):
    cwd, home = project
    (cwd / "trial.py").write_text("import time\ntime.sleep(120)\n")
    (cwd / "config.yml").write_text(CONFIG.replace("trialConcurrency: 2", "trialConcurrency: 1"))
    exp_id = created_id(expctl(home, cwd, "create", "--config", "config.yml", "--port", "0"))

    def statuses() -> list[str]:
        return [row["status"] for row in json.loads(expctl(home, cwd, "trial", "ls", exp_id, "--json").stdout)]
    wait_until(lambda: statuses().count("RUNNING") == 1, what="one running trial")
    updated = expctl(home, cwd, "update", exp_id, "concurrency", "2")
    assert updated.returncode == 0, updated.stderr
    wait_until(lambda: statuses().count("RUNNING") == 2, what="two running trials")
    bad = expctl(home, cwd, "update", exp_id, "concurrency", "-3")
    assert bad.returncode == 2 and "trialConcurrency: expected a positive integer, got -3" in bad.stderr
    (cwd / "space.json").write_text('{"x": {"_type": "uniform", "_value": [2, 1]}}')
    bad_space = expctl(home, cwd, "update", exp_id, "searchspace", "space.json")
    assert bad_space.returncode == 2 and "space.json" in bad_space.stderr and "low < high" in bad_space.stderr
    (cwd / "space.json").write_text('{"x": {"_type": "choice", "_value": [7, 8]}}')
    assert expctl(home, cwd, "update", exp_id, "searchspace", "space.json").returncode == 0
    assert json.loads(expctl(home, cwd, "experiment", "show", exp_id).stdout)["params"]["searchSpace"] == {
        "x": {"_type": "choice", "_value": [7, 8]}}
    trial = json.loads(expctl(home, cwd, "trial", "ls", exp_id, "--json").stdout)[0]["trial"]
    killed = expctl(home, cwd, "trial", "kill", exp_id, trial)
    assert killed.returncode == 0, killed.stderr
    wait_until(lambda: statuses()[0] == "USER_CANCELED", what="the killed trial to end")
    again = expctl(home, cwd, "trial", "kill", exp_id, trial)
    assert again.returncode == 2 and "is not running (USER_CANCELED)" in again.stderr
    assert expctl(home, cwd, "stop", exp_id).returncode == 0
    finished = expctl(home, cwd, "update", exp_id, "trialnum", "9")
    assert finished.returncode == 2 and "is not running (STOPPED)" in finished.stderr


def test_top_webui_url_import_and_debug_on_a_running_daemon(project):
    cwd, home = project
    (cwd / "trial.py").write_text("import time\ntime.sleep(120)\n")
    exp_id = created_id(expctl(home, cwd, "create", "--config", "config.yml", "--port", "0", "--debug"))
    wait_until(lambda: "RUNNING" in expctl(home, cwd, "trial", "ls", exp_id, "--table").stdout, what="a running trial")
    port = entry(home, exp_id).port
    assert expctl(home, cwd, "webui", "url").stdout == f"http://127.0.0.1:{port}\n"
    view = wait_until(lambda: (out := expctl(home, cwd, "top", "--once").stdout).count(" attempt 1 ") == 2 and out,
                      what="two running trials in top")
    assert view.startswith(f"{exp_id}  ") and "trials 2/4: running 2" in view
    assert json.loads(expctl(home, cwd, "experiment", "show", exp_id).stdout)["params"]["logLevel"] == "debug"
    (cwd / "results.json").write_text(json.dumps([{"parameter": {"x": 3}, "value": 0.5}]))
    imported = expctl(home, cwd, "experiment", "import", exp_id, "results.json")
    assert imported.returncode == 0 and "1 results imported" in imported.stdout
    (cwd / "bad.json").write_text(json.dumps([{"parameter": {"x": 3}, "value": "high"}]))
    bad = expctl(home, cwd, "experiment", "import", exp_id, "bad.json")
    assert bad.returncode == 2 and "bad.json" in bad.stderr and "[0].value" in bad.stderr
    assert expctl(home, cwd, "stop", exp_id, "--cancel").returncode == 0
    assert expctl(home, cwd, "top", "--once").stdout == "no experiment is running\n"
    gone = expctl(home, cwd, "webui", "url", exp_id)
    assert gone.returncode == 2 and f"expctl view {exp_id}" in gone.stderr


def test_experiment_connect_queries_changes_and_stops_a_daemon(project):
    from expmgr import Experiment
    from expmgr.experiment import ExperimentError
    cwd, home = project
    (cwd / "trial.py").write_text("import time\ntime.sleep(120)\n")
    (cwd / "config.yml").write_text(CONFIG.replace("trialConcurrency: 2", "trialConcurrency: 1"))
    exp_id = created_id(expctl(home, cwd, "create", "--config", "config.yml", "--port", "0"))
    with pytest.raises(ExperimentError, match="no running experiment on port 1 "):
        Experiment.connect(1, home=home)
    wait_until(lambda: entry(home, exp_id).status == ExperimentState.RUNNING, what="RUNNING")
    experiment = Experiment.connect(entry(home, exp_id).port, home=home)
    assert experiment.id == exp_id and experiment.get_status() == "RUNNING"
    experiment.update_trial_concurrency(2)
    wait_until(lambda: [t.status for t in experiment.list_trial_jobs()].count("RUNNING") == 2, what="two running")
    with pytest.raises(ExperimentError, match="trialConcurrency: expected a positive integer"):
        experiment.update_trial_concurrency(0)
    victim = experiment.list_trial_jobs()[0].trialJobId
    experiment.kill_trial_job(victim)
    wait_until(lambda: experiment.list_trial_jobs()[0].status == "USER_CANCELED", what="the kill")
    with pytest.raises(ExperimentError, match=rf"^experiment {exp_id} runs in another process \(port \d+\): "
                                               r"SubmitTrial\(parameters=\{'x': 1\}\) only works in the process "
                                               r"that runs it$"):
        experiment.submit_trial({"x": 1})   # a strategy's call: no REST route carries it
    experiment.stop()
    assert experiment.get_status() == "STOPPED" and experiment.wait(timeout=0)


def test_stop_by_port_and_stop_all(project):
    cwd, home = project
    (cwd / "trial.py").write_text("import time\ntime.sleep(120)\n")
    first, second = (created_id(expctl(home, cwd, "create", "--config", "config.yml", "--port", "0"))
                     for _ in range(2))
    assert expctl(home, cwd, "stop", "--port", "1").returncode == 2
    by_port = expctl(home, cwd, "stop", "--port", str(entry(home, first).port))
    assert by_port.returncode == 0 and f"experiment {first} STOPPED" in by_port.stdout
    assert entry(home, second).status != ExperimentState.STOPPED
    everything = expctl(home, cwd, "stop", "--all")
    assert everything.returncode == 0 and f"experiment {second} STOPPED" in everything.stdout
    assert expctl(home, cwd, "stop", "--all").stdout == "no experiment is running\n"
    both = expctl(home, cwd, "stop", first, "--all")
    assert both.returncode == 2 and "one of" in both.stderr


def test_every_log_of_a_daemon_is_rotated_at_log_max_size(project):
    """daemon.log, experiment.log and trial.log stay under logMaxSize, whole lines each, with
    logFilesKept files in all (dispatcher.log: tests/test_log.py, its process logs little here)."""
    cwd, home = project
    (cwd / "config.yml").write_text(CONFIG.replace("maxTrialNumber: 4", "maxTrialNumber: 40").replace(
        "_value: [1, 2, 3, 4]", "_value: " + str(list(range(40)))) + "logLevel: debug\nlogMaxSize: 4000\nlogFilesKept: 3\n")
    (cwd / "trial.py").write_text(
        "import logging\nimport expmgr\nx = expmgr.get_next_parameter()['x']\n"
        "for i in range(300):\n    logging.getLogger('nni.model').info('epoch %d of trial %d', i, x)\n"
        "expmgr.report_final_result(x)\n")
    exp_id = created_id(expctl(home, cwd, "create", "--config", "config.yml", "--port", "0", "--exit-when-done"))
    wait_until(lambda: entry(home, exp_id).status == ExperimentState.DONE and entry(home, exp_id).pid is None,
               timeout=120, what="DONE and closed")
    from expmgr.rotation import dropped_bytes, rotated_files
    logs = home / exp_id / "logs"
    trial_log = next((home / exp_id / "trials").iterdir()) / "trial.log"
    for path in (logs / "daemon.log", logs / "experiment.log", trial_log):
        kept = [path, *rotated_files(path)]
        assert [p.name for p in kept] == [path.name, path.name + ".1", path.name + ".2"], path
        assert dropped_bytes(path) > 0 or path.name == "daemon.log", path  # it has INFO and above only
        for file in kept:
            data = file.read_bytes()
            assert len(data) <= 4000 and data.endswith(b"\n"), file
    assert f"experiment {exp_id} DONE" in (logs / "daemon.log").read_text()
    assert "is DONE" in (logs / "experiment.log").read_text()
    assert "epoch 299 of trial" in trial_log.read_text()
