"""NNI 3.0's own client, ``nni.experiment.Experiment.connect(port)``, against expmgr daemons
(``expctl create``): every call it makes, while the experiment runs and after it is DONE.

NNI cannot be imported here: the client runs in a Python with a real NNI 3.0 (the
``nni_python`` fixture of test_trial_path.py: EXPMGR_TEST_NNI_PYTHON, or a venv made once
in the user's cache; skipped when neither can be had), as a script that prints what each
call returned as JSON for the test to check."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from expmgr.states import ExperimentState
from expmgr.store.registry import Registry, RegistryEntry
from tests.helpers.common import REPO, wait_until
from tests.helpers.nni import nni_python  # noqa: F401 - the fixture
from tests.helpers.server import get

API = "/api/v1/nni"

CONFIG = """\
experimentName: nni-client
searchSpace:
  x: {_type: choice, _value: [1, 2, 3, 4, 5, 6]}
trialCommand: python3 trial.py
trialConcurrency: 2
maxTrialNumber: 4
trialGracePeriod: 2s
tuner:
  name: GridSearch
"""

# Two intermediate results, then x=1 and x=2 end at once; the others wait for the file
# "release" (or their end) before their final result.
TRIAL = """\
import os, time
import nni
x = nni.get_next_parameter()["x"]
nni.report_intermediate_result(x * 10)
nni.report_intermediate_result(x * 10 + 1)
deadline = time.monotonic() + 120
while x > {last_quick} and not os.path.exists({release!r}) and time.monotonic() < deadline:
    time.sleep(0.02)
nni.report_final_result({{"default": x, "loss": 1.0 / x}})
"""

NEW_SPACE = {"x": {"_type": "choice", "_value": [1, 2, 3, 4, 5, 6, 7]}}

# Run by NNI's Python: argv = port, phase ("running" or "done"), the trial to kill.
CLIENT = """\
import json, sys, time
from nni.experiment import Experiment

port, phase, kill_id = int(sys.argv[1]), sys.argv[2], sys.argv[3]
NEW_SPACE = json.loads(sys.argv[4])


def job(trial_job):
    return {"id": trial_job.trialJobId, "status": trial_job.status, "seq": trial_job.sequenceId,
            "startTime": trial_job.startTime, "endTime": trial_job.endTime, "logPath": trial_job.logPath,
            "parameters": [h.parameters for h in trial_job.hyperParameters],
            "final": [m.data for m in trial_job.finalMetricData]}


def metrics(by_trial):
    return {trial_id: [[m.type, m.sequence, m.data, m.parameterId] for m in records]
            for trial_id, records in by_trial.items()}


experiment = Experiment.connect(port)
seen = {"id": experiment.id, "pid": None if experiment._proc is None else experiment._proc.pid,
        "status": experiment.get_status(), "jobs": [job(j) for j in experiment.list_trial_jobs()],
        "exported": sorted([r.trialJobId, r.parameter, r.value] for r in experiment.export_data()),
        "statistics": experiment.get_job_statistics(), "metrics": metrics(experiment.get_job_metrics())}
if phase == "running":
    seen["one"] = job(experiment.get_trial_job(kill_id))
    seen["metrics_of_one"] = metrics(experiment.get_job_metrics(kill_id))
    seen["profile"] = experiment.get_experiment_profile()
    seen["metadata"] = experiment.get_all_experiments_metadata()
    experiment.update_trial_concurrency(3)
    experiment.update_max_experiment_duration("1h")
    experiment.update_search_space(NEW_SPACE)
    experiment.update_max_trial_number(5)
    seen["updated"] = experiment.get_experiment_profile()["params"]
    experiment.kill_trial_job(kill_id)
    deadline = time.monotonic() + 60
    while experiment.get_trial_job(kill_id).status == "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.05)
    seen["killed"] = job(experiment.get_trial_job(kill_id))
process = experiment._proc
experiment.stop()
seen["port_after_stop"] = experiment.port
seen["process_ended"] = process is not None and not process.is_running()
print(json.dumps(seen))
"""


@pytest.fixture
def project(tmp_path: Path):
    """(folder with config.yml and trial.py, home); every daemon started is killed after."""
    (tmp_path / "config.yml").write_text(CONFIG)
    home = tmp_path / "home"
    yield tmp_path, home
    for entry in Registry(home).entries():
        if entry.pid and psutil.pid_exists(entry.pid):
            os.kill(entry.pid, signal.SIGKILL)


def create_daemon(cwd: Path, home: Path, last_quick: int) -> RegistryEntry:
    """``expctl create`` of config.yml with trials x > ``last_quick`` waiting for cwd/release."""
    (cwd / "trial.py").write_text(TRIAL.format(last_quick=last_quick, release=str(cwd / "release")))
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    created = subprocess.run([sys.executable, "-m", "expmgr.cli", "create", "--config", "config.yml", "--port", "0"],
                             cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert created.returncode == 0, created.stderr
    exp_id = created.stdout.split()[1]
    entry = Registry(home).get(exp_id)
    assert entry is not None and entry.port
    return entry


def run_client(python: str, tmp_path: Path, port: int, phase: str, kill_id: str = "") -> dict[str, Any]:
    script = tmp_path / "nni_client.py"
    script.write_text(CLIENT)
    # A home of its own: NNI's modules may write their manifest (~/nni-experiments) on import.
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    done = subprocess.run([python, str(script), str(port), phase, kill_id, json.dumps(NEW_SPACE)],
                          env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    # stop() kills the process when the server refuses to stop (and says so, on stdout or
    # stderr depending on NNI's logging set-up): it must not need to.
    said = done.stdout + done.stderr
    assert "Cannot gracefully stop" not in said and "failed" not in said, said[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def x_of(job: dict[str, Any]) -> int:
    return job["parameters"][0]["x"]


def the_daemon_ended(pid: int) -> None:
    wait_until(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
               what="the daemon to exit")


def test_nnis_client_reads_updates_kills_and_stops_a_running_experiment(project, nni_python):  # noqa: F811
    cwd, home = project
    entry = create_daemon(cwd, home, last_quick=2)
    port = entry.port

    def settled() -> dict[str, Any] | None:
        jobs = get(port, f"{API}/trial-jobs")
        by_x = {json.loads(j["hyperParameters"][0])["parameters"]["x"]: j for j in jobs}
        metrics = get(port, f"{API}/metric-data")
        reported = {m["trialJobId"] for m in metrics if m["type"] == "PERIODICAL" and m["sequence"] == 1}
        ready = ([by_x.get(x, {}).get("status") for x in (1, 2, 3, 4)] == ["SUCCEEDED", "SUCCEEDED", "RUNNING", "RUNNING"]
                 and {by_x[3]["trialJobId"], by_x[4]["trialJobId"]} <= reported)
        return by_x if ready else None
    by_x = wait_until(settled, timeout=60, what="x=1, 2 SUCCEEDED and x=3, 4 RUNNING with their results")
    killed_id = by_x[3]["trialJobId"]

    seen = run_client(nni_python, cwd, port, "running", killed_id)

    assert seen["id"] == entry.id and seen["pid"] == entry.pid, "connect() keeps the experiment's process"
    assert seen["status"] == "NO_MORE_TRIAL", "maxTrialNumber trials submitted, two still running"
    jobs = {x_of(job): job for job in seen["jobs"]}
    assert sorted(jobs) == [1, 2, 3, 4]
    assert [jobs[x]["status"] for x in (1, 2, 3, 4)] == ["SUCCEEDED", "SUCCEEDED", "RUNNING", "RUNNING"]
    assert all(type(job["startTime"]) is int and job["logPath"].startswith("file://") for job in jobs.values())
    assert [jobs[x]["final"] for x in (1, 2)] == [[{"default": 1, "loss": 1.0}], [{"default": 2, "loss": 0.5}]]
    assert jobs[1]["endTime"] >= jobs[1]["startTime"] and jobs[3]["endTime"] == -1, "NNI's default: not ended"
    assert seen["one"] == jobs[3]
    assert seen["exported"] == sorted([[jobs[x]["id"], {"x": x}, {"default": x, "loss": 1.0 / x}] for x in (1, 2)])
    assert sorted(map(tuple, (row.values() for row in seen["statistics"]))) == [("RUNNING", 2), ("SUCCEEDED", 2)]
    expected_metrics = {jobs[x]["id"]: [["PERIODICAL", 0, x * 10, str(jobs[x]["seq"])],
                                        ["PERIODICAL", 1, x * 10 + 1, str(jobs[x]["seq"])]]
                        + ([["FINAL", 2, {"default": x, "loss": 1.0 / x}, str(jobs[x]["seq"])]] if x < 3 else [])
                        for x in (1, 2, 3, 4)}
    assert seen["metrics"] == expected_metrics
    assert seen["metrics_of_one"] == {killed_id: expected_metrics[killed_id]}
    profile = seen["profile"]
    assert profile["id"] == entry.id and profile["params"]["experimentName"] == "nni-client"
    assert profile["params"]["trialConcurrency"] == 2 and profile["params"]["maxTrialNumber"] == 4
    [metadata] = seen["metadata"]
    assert metadata == {"id": entry.id, "port": port, "startTime": int(entry.start_time * 1000), "endTime": "N/A",
                        "status": "NO_MORE_TRIAL", "platform": "local", "experimentName": "nni-client", "tag": [],
                        "pid": entry.pid, "webuiUrl": [f"http://127.0.0.1:{port}"], "logDir": str(home),
                        "prefixUrl": None}
    updated = seen["updated"]
    assert (updated["trialConcurrency"], updated["maxTrialNumber"], updated["searchSpace"]) == (3, 5, NEW_SPACE)
    assert updated["maxExperimentDuration"] == 3600, "expmgr keeps durations in seconds (NNI: as given)"
    assert seen["killed"]["status"] == "USER_CANCELED" and seen["killed"]["id"] == killed_id

    # stop() asked the server to stop and waited for its process to end.
    assert seen["process_ended"] and seen["port_after_stop"] is None
    the_daemon_ended(entry.pid)
    assert Registry(home).get(entry.id).status == ExperimentState.STOPPED


def test_nnis_client_reads_a_done_experiment_and_stops_its_server(project, nni_python):  # noqa: F811
    cwd, home = project
    entry = create_daemon(cwd, home, last_quick=6)  # every trial ends at once
    wait_until(lambda: Registry(home).get(entry.id).status == ExperimentState.DONE, timeout=60, what="DONE")
    done = Registry(home).get(entry.id)
    assert done.pid is not None and psutil.pid_exists(done.pid), "the server stays after DONE"

    seen = run_client(nni_python, cwd, entry.port, "done")

    assert seen["id"] == entry.id and seen["pid"] == done.pid
    assert seen["status"] == "DONE"
    jobs = {x_of(job): job for job in seen["jobs"]}
    assert sorted(jobs) == [1, 2, 3, 4] and {job["status"] for job in jobs.values()} == {"SUCCEEDED"}
    assert seen["exported"] == sorted([[jobs[x]["id"], {"x": x}, {"default": x, "loss": 1.0 / x}]
                                       for x in (1, 2, 3, 4)])
    assert seen["statistics"] == [{"trialJobStatus": "SUCCEEDED", "trialJobNumber": 4}]
    assert seen["process_ended"] and seen["port_after_stop"] is None
    the_daemon_ended(done.pid)
    assert Registry(home).get(entry.id).status.is_finished()
