"""A real experiment end to end: real trial processes, a real dispatcher, a real
tornado server on 127.0.0.1 and a real SQLite store in a temp dir."""
from __future__ import annotations

import json
import sqlite3
import urllib.request
from pathlib import Path

import psutil
import pytest

import expmgr
from expmgr import Experiment, ExperimentConfig
from expmgr.states import ExperimentState, TrialState
from tests.helpers.common import trial_token, wait_until, write_script
from tests.helpers.experiments import CRASHING_TUNER

GATED_TRIAL = """
    import os, sys, time
    import expmgr
    params = expmgr.get_next_parameter()
    for step in range(3):
        expmgr.report_intermediate_result(params["x"] * 10 + step)
    # Hold the trial open until the test releases it, so REST is seen mid-run.
    gate = os.path.join(os.environ["GATE_DIR"], "release")
    deadline = time.monotonic() + 60
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.01)
    if params["x"] == 3:
        print("this trial fails on purpose", file=sys.stderr)
        sys.exit(1)
    expmgr.report_final_result({"default": params["x"] * 1.5, "extra": params["x"]})
"""


def get_json(port: int, route: str) -> object:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/nni/{route}", timeout=10) as response:
        assert response.status == 200
        return json.loads(response.read())


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = peak = 0
    for _, change in events:
        running += change
        peak = max(peak, running)
    return peak


@pytest.fixture
def gated_experiment(tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch):
    write_script(code_dir, "trial.py", GATED_TRIAL)
    gate_dir = tmp_path / "gate"
    gate_dir.mkdir()
    monkeypatch.setenv("GATE_DIR", str(gate_dir))
    config = ExperimentConfig(
        experiment_name="gated",
        search_space={"x": {"_type": "choice", "_value": [1, 2, 3, 4, 5, 6, 7]}},
        trial_command="python3 trial.py", trial_code_directory=code_dir,
        trial_concurrency=2, max_trial_number=7,
        tuner={"name": "GridSearch"},
        experiment_working_directory=tmp_path / "home",
    )
    experiment = Experiment(config)
    yield experiment, gate_dir / "release"
    experiment.stop()


def test_experiment_runs_max_trials_within_concurrency_and_stores_every_metric(gated_experiment):
    experiment, release = gated_experiment
    experiment.start(port=0)
    port = experiment.port

    # While it runs: REST answers in NNI's shapes.
    running = wait_until(lambda: [t for t in get_json(port, "trial-jobs") if t["status"] == "RUNNING"]
                         if len(get_json(port, "trial-jobs")) >= 2 else None, what="two running trials")
    assert get_json(port, "check-status") == {"status": "RUNNING", "errors": []}
    profile = get_json(port, "experiment")
    assert profile["id"] == experiment.id
    assert profile["params"]["trialConcurrency"] == 2 and profile["params"]["maxTrialNumber"] == 7
    job = running[0]
    assert set(job) >= {"trialJobId", "sequenceId", "status", "hyperParameters", "logPath", "startTime"}
    assert "x" in json.loads(job["hyperParameters"][0])["parameters"]
    assert get_json(port, f"trial-jobs/{job['trialJobId']}")["trialJobId"] == job["trialJobId"]
    wait_until(lambda: len(get_json(port, f"metric-data/{job['trialJobId']}")) == 3, what="3 intermediate metrics")
    metric = get_json(port, f"metric-data/{job['trialJobId']}")[0]
    assert metric["type"] == "PERIODICAL" and isinstance(json.loads(json.loads(metric["data"])), (int, float))
    assert {"trialJobStatus": "RUNNING", "trialJobNumber": 2} in get_json(port, "job-statistics")
    assert len(get_json(port, "trial-jobs")) == 2, "never more than trialConcurrency trials started"

    release.touch()
    assert experiment.wait(timeout=120)
    assert experiment.get_status() == "DONE"

    trials = experiment.list_trial_jobs()
    assert len(trials) == 7
    assert sorted(t.parameters["x"] for t in trials) == [1, 2, 3, 4, 5, 6, 7]
    statuses = {t.parameters["x"]: t.status for t in trials}
    assert statuses.pop(3) == "FAILED"
    assert set(statuses.values()) == {"SUCCEEDED"}

    database = sqlite3.connect(experiment.paths.database)
    intervals = database.execute("SELECT start_time, end_time FROM attempts").fetchall()
    assert len(intervals) == 7 and all(end is not None for _, end in intervals)
    assert max_overlap(intervals) == 2
    metrics = database.execute("SELECT trial_id, type, value_json FROM metrics").fetchall()
    assert sum(1 for _, kind, _ in metrics if kind == "PERIODICAL") == 7 * 3
    assert sum(1 for _, kind, _ in metrics if kind == "FINAL") == 6

    exported = {r.trialJobId: r for r in experiment.export_data()}
    assert len(exported) == 6
    for trial in trials:
        if trial.status == "SUCCEEDED":
            assert exported[trial.trialJobId].value == {"default": trial.parameters["x"] * 1.5,
                                                        "extra": trial.parameters["x"]}
    failed = next(t for t in trials if t.status == "FAILED")
    assert "fails on purpose" in (experiment.paths.trial_dir(failed.trialJobId) / "stderr").read_text()
    assert experiment.best_trial().parameter["x"] == 7


def test_run_blocks_until_done_and_returns_true(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", """
        import expmgr
        p = expmgr.get_next_parameter()
        expmgr.report_final_result(-(p["x"] - 2.0) ** 2)
    """)
    config = ExperimentConfig(
        search_space={"x": {"_type": "uniform", "_value": [0, 4]}}, trial_command="python3 trial.py",
        trial_code_directory=code_dir, trial_concurrency=3, max_trial_number=5,
        tuner={"name": "Random", "class_args": {"seed": 3}}, experiment_working_directory=tmp_path / "home")
    experiment = Experiment(config)
    assert experiment.run(port=0) is True
    assert experiment.get_status() == ExperimentState.DONE.value
    assert [t.status for t in experiment.list_trial_jobs()] == [TrialState.SUCCEEDED.value] * 5
    assert len(experiment.export_data()) == 5
    assert experiment.get_job_statistics() == [{"trialJobStatus": "SUCCEEDED", "trialJobNumber": 5}]
    profile = experiment.get_experiment_profile()
    assert (profile["id"], profile["status"], profile["nextSequenceId"]) == (experiment.id, "DONE", 5)
    assert profile["params"]["maxTrialNumber"] == 5 and profile["endTime"] >= profile["startTime"]
    assert (experiment.paths.root / "config.yml").is_file()


def test_crashing_tuner_puts_experiment_in_error_with_its_traceback(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", "import expmgr\nexpmgr.report_final_result(1.0)\n")
    tuner_dir = tmp_path / "tuner"
    tuner_dir.mkdir()
    write_script(tuner_dir, "exploding.py", CRASHING_TUNER)
    config = ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1, 2, 3]}}, trial_command="python3 trial.py",
        trial_code_directory=code_dir, trial_concurrency=1, max_trial_number=10,
        tuner={"class_name": "exploding.ExplodingTuner", "code_directory": tuner_dir},
        experiment_working_directory=tmp_path / "home")
    experiment = Experiment(config)
    assert experiment.run(port=0) is False
    assert experiment.get_status() == "ERROR"
    error = experiment.get_error()
    assert "RuntimeError: tuner exploded on purpose" in error
    assert "exploding.py" in error and "generate_parameters" in error
    assert "tuner exploded on purpose" in experiment.paths.dispatcher_log.read_text()
    assert len(experiment.list_trial_jobs()) == 2
    assert not psutil.Process().children(recursive=True)


def test_trial_reports_are_checked_for_token_and_fields(gated_experiment):
    experiment, release = gated_experiment
    experiment.start(port=0)
    trials = wait_until(lambda: [t for t in get_json(experiment.port, "trial-jobs") if t["status"] == "RUNNING"]
                        if len(get_json(experiment.port, "trial-jobs")) == 2 else None, what="two running trials")
    mine, other = trials[0]["trialJobId"], trials[1]["trialJobId"]
    token = wait_until(lambda: trial_token(mine), what="the trial's token")

    def post(trial_id: str, body: object) -> tuple[int, str]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{experiment.port}/api/v1/expmgr/trials/{trial_id}/metrics",
            data=json.dumps(body).encode(), method="POST",
            headers={"X-Expmgr-Trial-Token": token, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    good = {"attempt": 1, "sequence": 99, "type": "FINAL", "value": 1.0}
    assert post(other, good)[0] == 403, "a trial can report only for itself"
    status, body = post(mine, {**good, "type": "BOGUS"})
    assert status == 400 and "type:" in body
    status, body = post(mine, {**good, "value": "high"})
    assert status == 400 and "value:" in body
    status, body = post(mine, {**good, "sequence": -1})
    assert status == 400 and "sequence:" in body
    assert post(mine, {**good, "type": "PERIODICAL"})[0] == 200
    assert post(mine, {**good, "type": "PERIODICAL", "value": 2.0})[0] == 200, "a repeated report is accepted once"
    release.touch()
    assert experiment.wait(timeout=120)
    rows = sqlite3.connect(experiment.paths.database).execute(
        "SELECT trial_id, value_json FROM metrics WHERE sequence = 99").fetchall()
    assert rows == [(mine, "1.0")]


def _config(tmp_path: Path, code_dir: Path, **overrides) -> ExperimentConfig:
    fields = dict(search_space={"x": {"_type": "choice", "_value": [1, 2]}}, trial_command="python3 trial.py",
                  trial_code_directory=code_dir, trial_concurrency=2, max_trial_number=2,
                  tuner={"name": "GridSearch"}, experiment_working_directory=tmp_path / "home")
    fields.update(overrides)
    return ExperimentConfig(**fields)


def test_failed_attempt_is_retried_while_max_trial_retries_allows(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", """
        import os, sys
        import expmgr
        attempt = int(os.environ["EXPMGR_TRIAL_ATTEMPT"])
        expmgr.report_intermediate_result(attempt)
        if attempt < 3:
            sys.exit(7)
        expmgr.report_final_result(1.0)
    """)
    experiment = Experiment(_config(tmp_path, code_dir, max_trial_retries=2))
    assert experiment.run(port=0)
    trials = experiment.list_trial_jobs()
    assert [(t.status, t.attempts) for t in trials] == [("SUCCEEDED", 3), ("SUCCEEDED", 3)]
    rows = sqlite3.connect(experiment.paths.database).execute(
        "SELECT attempt, status, exit_code FROM attempts WHERE trial_id = ? ORDER BY attempt",
        (trials[0].trialJobId,)).fetchall()
    assert rows == [(1, "FAILED", 7), (2, "FAILED", 7), (3, "SUCCEEDED", 0)]


def test_trial_killed_by_a_signal_is_crashed(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    experiment = Experiment(_config(tmp_path, code_dir))
    assert experiment.run(port=0)
    assert [t.status for t in experiment.list_trial_jobs()] == ["CRASHED", "CRASHED"]


def test_trial_past_max_trial_duration_is_early_stopped(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", "import time\ntime.sleep(120)\n")
    experiment = Experiment(_config(tmp_path, code_dir, max_trial_duration="1s", trial_grace_period=1))
    assert experiment.run(port=0)
    trials = experiment.list_trial_jobs()
    assert [t.status for t in trials] == ["EARLY_STOPPED", "EARLY_STOPPED"]
    assert all(t.endTime - t.startTime < 60_000 for t in trials)


def test_experiment_past_max_experiment_duration_ends_done(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", "import time\ntime.sleep(120)\n")
    experiment = Experiment(_config(tmp_path, code_dir, max_experiment_duration="1h", trial_grace_period=1))
    experiment.start(port=0)
    try:
        # Shortened only once both trials run: a loaded machine may take longer than the
        # duration to launch them, and then no trial would be running to be cancelled.
        wait_until(lambda: [t.status for t in experiment.list_trial_jobs()] == ["RUNNING", "RUNNING"],
                   what="two running trials")
        experiment.update_max_experiment_duration(1)
        assert experiment.wait(timeout=60)
    finally:
        experiment.stop()
    assert experiment.get_status() == "DONE"
    assert [t.status for t in experiment.list_trial_jobs()] == ["SYS_CANCELED", "SYS_CANCELED"]


def test_stop_cancels_running_trials_and_ends_stopped(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", "import time\ntime.sleep(120)\n")
    experiment = Experiment(_config(tmp_path, code_dir))
    experiment.start(port=0)
    wait_until(lambda: len([t for t in experiment.list_trial_jobs() if t.status == "RUNNING"]) == 2,
               what="two running trials")
    experiment.stop()
    assert experiment.get_status() == "STOPPED"
    assert [t.status for t in experiment.list_trial_jobs()] == ["USER_CANCELED", "USER_CANCELED"]


def test_port_in_use_is_an_error_and_creates_nothing(tmp_path: Path, code_dir: Path):
    import socket
    from expmgr.experiment import ExperimentError
    write_script(code_dir, "trial.py", "")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        experiment = Experiment(_config(tmp_path, code_dir))
        with pytest.raises(ExperimentError, match="cannot listen on 127.0.0.1"):
            experiment.start(port=taken.getsockname()[1])
    assert not (tmp_path / "home").exists()


def test_trial_command_that_is_not_found_fails_with_the_shell_message(tmp_path: Path, code_dir: Path):
    experiment = Experiment(_config(tmp_path, code_dir, trial_command="no-such-program --flag",
                                    max_trial_number=1, trial_concurrency=1))
    assert experiment.run(port=0)
    trial = experiment.list_trial_jobs()[0]
    assert trial.status == "FAILED"
    assert "not found" in (experiment.paths.trial_dir(trial.trialJobId) / "stderr").read_text()


def test_trial_command_with_shell_syntax_runs_under_the_shell(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", "import os, expmgr\nexpmgr.report_final_result(float(os.environ['SCALE']))\n")
    experiment = Experiment(_config(tmp_path, code_dir, trial_command="SCALE=3 python3 trial.py && echo done",
                                    max_trial_number=1, trial_concurrency=1))
    assert experiment.run(port=0)
    trial = experiment.list_trial_jobs()[0]
    assert (trial.status, trial.finalMetric) == ("SUCCEEDED", 3.0)
    assert (experiment.paths.trial_dir(trial.trialJobId) / "stdout").read_text() == "done\n"


def test_trial_silent_past_trial_idle_timeout_is_crashed_and_retried(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", """
        import os, sys, time
        import expmgr
        if os.environ["EXPMGR_TRIAL_ATTEMPT"] == "1":
            for _ in range(3):          # output keeps it alive for a while...
                print("working", flush=True)
                time.sleep(0.4)
            time.sleep(120)             # ...then it hangs in silence
        expmgr.report_final_result(1.0)
    """)
    experiment = Experiment(_config(tmp_path, code_dir, max_trial_number=1, trial_concurrency=1,
                                    trial_idle_timeout="1s", trial_grace_period=1, max_trial_retries=1))
    assert experiment.run(port=0)
    trial = experiment.list_trial_jobs()[0]
    assert (trial.status, trial.attempts) == ("SUCCEEDED", 2)
    first = sqlite3.connect(experiment.paths.database).execute(
        "SELECT status, start_time, end_time FROM attempts WHERE attempt = 1").fetchone()
    assert first[0] == "CRASHED"
    assert first[2] - first[1] >= 1.6, "output must count as activity (silent alone, it would end at 1s)"


def test_script_that_starts_an_experiment_and_returns_leaves_no_trial_running(tmp_path: Path, code_dir: Path):
    import subprocess
    import sys
    write_script(code_dir, "trial.py", "import time\ntime.sleep(120)\n")
    script = write_script(tmp_path, "main.py", f"""
        import sys
        import time
        from expmgr import Experiment, ExperimentConfig
        config = ExperimentConfig(
            search_space={{"x": {{"_type": "choice", "_value": [1, 2]}}}}, trial_command="python3 trial.py",
            trial_code_directory={str(code_dir)!r}, trial_concurrency=2, max_trial_number=2,
            tuner={{"name": "GridSearch"}}, experiment_working_directory={str(tmp_path / "home")!r},
            trial_grace_period=1)
        experiment = Experiment(config)
        experiment.start(port=0)
        while len([t for t in experiment.list_trial_jobs() if t.status == "RUNNING"]) < 2:
            time.sleep(0.05)
        # One write: the manager's log lines go to the same stdout, and with PYTHONUNBUFFERED a
        # print of two values is four writes, between which one of those lines may land.
        sys.stdout.write(f"EXPERIMENT {{experiment.id}}\\n")
    """)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    exp_id = result.stdout.split("EXPERIMENT ")[1].split()[0]
    statuses = sqlite3.connect(tmp_path / "home" / exp_id / "db" / "experiment.sqlite").execute(
        "SELECT status FROM trials").fetchall()
    assert statuses == [("USER_CANCELED",), ("USER_CANCELED",)]
    # the autouse fixture checks that no trial process is left


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_run_stopped_by_a_signal_as_its_manager_starts_returns_false_and_leaves_no_trial(
        tmp_path: Path, code_dir: Path, signum: str):
    import subprocess
    import sys
    trial_pids = tmp_path / "trial-pids"
    write_script(code_dir, "trial.py", f"import os, time\nwith open({str(trial_pids)!r}, 'a') as f: "
                                       "f.write(f'{os.getpid()}\\n')\ntime.sleep(120)\n")
    # The signal is sent (a real one, to this process) right after the manager's thread
    # started, inside start(): the first trials may already run.
    script = write_script(tmp_path, "main.py", f"""
        import os, signal
        from expmgr import Experiment, ExperimentConfig
        from expmgr.experiment.manager import Manager
        start = Manager.start
        def start_then_signal(manager):
            start(manager)
            os.kill(os.getpid(), signal.{signum})
        Manager.start = start_then_signal
        config = ExperimentConfig(
            search_space={{"x": {{"_type": "choice", "_value": [1, 2]}}}}, trial_command="python3 trial.py",
            trial_code_directory={str(code_dir)!r}, trial_concurrency=2, max_trial_number=2,
            tuner={{"name": "GridSearch"}}, experiment_working_directory={str(tmp_path / "home")!r})
        experiment = Experiment(config)
        print("RUN", experiment.run(port=0), experiment.get_status(), flush=True)
    """)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "RUN False STOPPED" in result.stdout and "Traceback" not in result.stderr
    started = [int(pid) for pid in trial_pids.read_text().split()] if trial_pids.exists() else []
    assert not [pid for pid in started if psutil.pid_exists(pid)
                and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]


def test_trials_get_their_own_gpus_and_wait_for_a_free_one(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", """
        import os, time
        import expmgr
        time.sleep(0.3)
        expmgr.report_final_result(float(len(os.environ["CUDA_VISIBLE_DEVICES"].split(","))))
        print(os.environ["CUDA_VISIBLE_DEVICES"])
    """)
    experiment = Experiment(_config(
        tmp_path, code_dir, search_space={"x": {"_type": "choice", "_value": [1, 2, 3, 4, 5, 6]}},
        max_trial_number=6, trial_concurrency=4, trial_gpu_number=1,
        training_service={"platform": "local", "gpu_indices": [0, 1], "max_trial_number_per_gpu": 1}))
    assert experiment.run(port=0)
    database = sqlite3.connect(experiment.paths.database)
    intervals = database.execute("SELECT start_time, end_time FROM attempts").fetchall()
    assert max_overlap(intervals) == 2, "two GPUs, one trial each: at most two trials at once"
    devices = [(experiment.paths.trial_dir(t.trialJobId) / "stdout").read_text().strip()
               for t in experiment.list_trial_jobs()]
    assert sorted(set(devices)) == ["0", "1"]


def test_trial_gpu_number_zero_hides_the_gpus(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", "import os\nprint(repr(os.environ.get('CUDA_VISIBLE_DEVICES')))\n")
    experiment = Experiment(_config(tmp_path, code_dir, max_trial_number=1, trial_concurrency=1,
                                    trial_gpu_number=0))
    assert experiment.run(port=0)
    trial = experiment.list_trial_jobs()[0]
    assert (experiment.paths.trial_dir(trial.trialJobId) / "stdout").read_text().strip() == "''"


RECORDING_TUNER = """
    import json, os
    from expmgr.algorithms.tuner import Tuner

    class RecordingTuner(Tuner):
        def __init__(self, record_file):
            self.record_file = record_file

        def _record(self, *event):
            with open(self.record_file, "a") as f:
                f.write(json.dumps(event) + "\\n")

        def update_search_space(self, search_space):
            pass

        def generate_parameters(self, parameter_id, **kwargs):
            self._record("generate", parameter_id)
            return {"x": parameter_id}

        def receive_trial_result(self, parameter_id, parameters, value, **kwargs):
            self._record("result", parameter_id, value)

        def trial_end(self, parameter_id, success, **kwargs):
            self._record("end", parameter_id, success)
"""


def _recording_config(tmp_path: Path, code_dir: Path, **overrides) -> tuple[ExperimentConfig, Path]:
    tuner_dir = tmp_path / "tuner"
    tuner_dir.mkdir()
    write_script(tuner_dir, "recording.py", RECORDING_TUNER)
    record = tmp_path / "tuner-events.jsonl"
    return _config(tmp_path, code_dir, tuner={"class_name": "recording.RecordingTuner", "code_directory": tuner_dir,
                                              "class_args": {"record_file": str(record)}}, **overrides), record


def test_tuner_sees_each_result_before_it_is_asked_for_the_next_trial(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", "import expmgr\nexpmgr.report_final_result(expmgr.get_next_parameter()['x'])\n")
    config, record = _recording_config(tmp_path, code_dir, max_trial_number=3, trial_concurrency=1)
    assert Experiment(config).run(port=0)
    events = [tuple(json.loads(line)) for line in record.read_text().splitlines()]
    assert events == [("generate", 0), ("result", 0, 0), ("end", 0, True),
                      ("generate", 1), ("result", 1, 1), ("end", 1, True),
                      ("generate", 2), ("result", 2, 2), ("end", 2, True)]


def test_retried_trial_is_told_to_the_tuner_once_with_its_last_attempts_result(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", """
        import os, sys
        import expmgr
        attempt = int(os.environ["EXPMGR_TRIAL_ATTEMPT"])
        expmgr.report_final_result(attempt * 10)
        sys.exit(0 if attempt == 2 else 1)
    """)
    config, record = _recording_config(tmp_path, code_dir, max_trial_number=1, trial_concurrency=1,
                                       max_trial_retries=1)
    experiment = Experiment(config)
    assert experiment.run(port=0)
    events = [tuple(json.loads(line)) for line in record.read_text().splitlines()]
    assert events == [("generate", 0), ("result", 0, 20), ("end", 0, True)]
    assert [r.value for r in experiment.export_data()] == [20]


def test_registry_tracks_the_running_experiment(gated_experiment):
    import os
    from expmgr.store.registry import Registry
    experiment, release = gated_experiment
    experiment.start(port=0)
    registry = Registry(experiment.paths.root.parent)
    entry = wait_until(lambda: (e := registry.get(experiment.id)) and e.status == ExperimentState.RUNNING and e,
                       what="RUNNING in the registry")
    assert (entry.pid, entry.port) == (os.getpid(), experiment.port)
    release.touch()
    assert experiment.wait(timeout=120)
    entry = registry.get(experiment.id)
    assert (entry.status, entry.pid, entry.port) == (ExperimentState.DONE, os.getpid(), experiment.port), \
        "its server stays after DONE: the registry still names its process"
    assert entry.end_time is not None
    experiment.stop()
    entry = registry.get(experiment.id)
    assert (entry.status, entry.pid) == (ExperimentState.DONE, None), "stopped: the pid is cleared"


def _log_files_open(experiment: Experiment) -> list[str]:
    import os
    links = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass  # the descriptor listdir itself used, closed since
    return [link for link in links if link.startswith(str(experiment.paths.log_dir))]


def test_experiment_stopped_from_another_thread_leaves_the_starting_thread_and_closes_its_log(
        tmp_path: Path, code_dir: Path):
    import threading
    write_script(code_dir, "trial.py", "import time\ntime.sleep(120)\n")
    experiment = Experiment(_config(tmp_path, code_dir, max_trial_number=1, trial_concurrency=1,
                                    trial_grace_period=1))
    experiment.start(port=0)
    assert expmgr.current_experiment() is experiment
    assert _log_files_open(experiment)
    stopper = threading.Thread(target=experiment.stop)  # stopped from another thread...
    stopper.start()
    stopper.join(60)
    assert experiment.wait(timeout=60)
    assert expmgr.current_experiment() is None, "...it still leaves the thread that started it"
    assert _log_files_open(experiment) == []


def test_wait_seeing_the_end_leaves_the_starting_thread_and_the_log_stays_open_until_stop(
        tmp_path: Path, code_dir: Path):
    """Its server stays after the search, and so does its log: experiment.logger after
    run() or wait() still writes there (and the server's own records); stop() closes it."""
    import logging
    config = ExperimentConfig(trial_command="python3 -c pass", trial_code_directory=code_dir, trial_concurrency=1,
                              max_trial_number=1, experiment_working_directory=tmp_path / "home")
    experiment = Experiment(config, strategy=lambda experiment: None)  # the search ends at once
    experiment.start(port=0)
    assert expmgr.current_experiment() is experiment
    assert experiment.wait(timeout=60)
    assert expmgr.current_experiment() is None, "the end seen: it left the thread that started it"
    assert _log_files_open(experiment), "...while its log stays open with its server"
    experiment.logger.info("AFTER-WAIT through the experiment's logger")
    logging.getLogger("nni.search").info("AFTER-WAIT bare, in a thread where it is not current")
    experiment.stop()
    assert _log_files_open(experiment) == []
    experiment.logger.info("AFTER-STOP through the experiment's logger")
    log = experiment.paths.experiment_log.read_text()
    assert "AFTER-WAIT through the experiment's logger" in log
    assert "AFTER-WAIT bare" not in log and "AFTER-STOP" not in log


def test_running_experiment_takes_updates_and_refuses_bad_ones(tmp_path: Path, code_dir: Path):
    from expmgr.experiment import ExperimentError
    write_script(code_dir, "trial.py", "import time\ntime.sleep(120)\n")
    experiment = Experiment(_config(tmp_path, code_dir, search_space={"x": {"_type": "choice", "_value": [1, 2, 3, 4]}},
                                    max_trial_number=4, trial_concurrency=1, trial_grace_period=1))
    experiment.start(port=0)

    def running() -> list:
        return [t for t in experiment.list_trial_jobs() if t.status == "RUNNING"]
    wait_until(lambda: len(running()) == 1, what="one running trial")
    experiment.update_trial_concurrency(3)
    wait_until(lambda: len(running()) == 3, what="three running trials after the update")
    experiment.update_max_trial_number(3)
    experiment.update_max_experiment_duration("1h")
    profile = experiment.get_experiment_profile()["params"]
    assert (profile["trialConcurrency"], profile["maxTrialNumber"], profile["maxExperimentDuration"]) == (3, 3, 3600)
    with pytest.raises(ExperimentError, match="trialConcurrency: expected a positive integer, got 0"):
        experiment.update_trial_concurrency(0)
    with pytest.raises(ExperimentError, match="maxExperimentDuration"):
        experiment.update_max_experiment_duration("soon")
    victim = running()[0].trialJobId
    experiment.kill_trial_job(victim)
    wait_until(lambda: {t.trialJobId: t.status for t in experiment.list_trial_jobs()}[victim] == "USER_CANCELED",
               what="the killed trial to end")
    with pytest.raises(ExperimentError, match="not running"):
        experiment.kill_trial_job(victim)
    assert len(experiment.list_trial_jobs()) == 3, "maxTrialNumber 3: no fourth trial"
    experiment.stop()
    with pytest.raises(ExperimentError):
        experiment.update_trial_concurrency(2)


def test_dispatcher_killed_mid_experiment_ends_it_in_error_and_leaves_no_trial(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", "import time\ntime.sleep(120)\n")
    experiment = Experiment(_config(tmp_path, code_dir, trial_grace_period=1))
    experiment.start(port=0)
    wait_until(lambda: [t.status for t in experiment.list_trial_jobs()].count("RUNNING") == 2, what="two running")
    [dispatcher] = [p for p in psutil.Process().children(recursive=True)
                    if "expmgr.dispatcher" in " ".join(p.cmdline())]
    dispatcher.kill()
    assert experiment.wait(timeout=60)
    assert experiment.get_status() == "ERROR"
    assert "the dispatcher was killed by signal 9" in experiment.get_error()
    assert [t.status for t in experiment.list_trial_jobs()] == ["SYS_CANCELED", "SYS_CANCELED"]
    # the autouse fixture checks that no trial process is left
