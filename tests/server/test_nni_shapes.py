"""NNI's v1 REST answers field by field, as NNI's own clients read them, for a real small
experiment: not one route compared with another, but each field's name and type as
``nni.experiment`` (``TrialJob``, ``TrialMetricData``, ``TrialResult``) and NNI's web UI
(``ts/webui/src/static/interface.ts``) take it from NNI's manager
(``ts/nni_manager/common/{manager,datastore}.ts``).

NNI's quirks checked here: times are integer milliseconds since the epoch (``execDuration``
integer seconds); ``hyperParameters`` items are JSON strings of
``{parameter_id, parameter_source, parameters, parameter_index}``; a metric's ``data`` is a
JSON string of the JSON text of the value (``json.loads(json.loads(data))``), and
``parameterId`` a string; export-data's ``value`` is the JSON text of the final result."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from expmgr import Experiment, ExperimentConfig
from expmgr.training import trial_files
from tests.helpers.common import wait_until, write_script
from tests.helpers.server import get

API = "/api/v1/nni"

# What the trial with parameter x reports: two intermediate results, then a dict final.
TRIAL = """
    import expmgr
    x = expmgr.get_next_parameter()["x"]
    expmgr.report_intermediate_result(x / 4)
    expmgr.report_intermediate_result({"default": x / 2, "step": 1})
    expmgr.report_final_result({"default": x, "loss": 1.5 - x})
"""
XS = [1, 2, 3]


def intermediate(x: int) -> list[Any]:
    return [x / 4, {"default": x / 2, "step": 1}]


def final(x: int) -> dict[str, Any]:
    return {"default": x, "loss": 1.5 - x}


# NNI's names (ts/nni_manager/common/manager.ts ExperimentStatus, trainingService.ts TrialJobStatus).
EXPERIMENT_STATES = {"INITIALIZED", "RUNNING", "ERROR", "STOPPING", "STOPPED", "DONE", "NO_MORE_TRIAL",
                     "TUNER_NO_MORE_TRIAL", "VIEWED"}
TRIAL_STATES = {"UNKNOWN", "WAITING", "RUNNING", "SUCCEEDED", "FAILED", "USER_CANCELED", "SYS_CANCELED",
                "EARLY_STOPPED"}
METRIC_KEYS = {"timestamp", "trialJobId", "parameterId", "type", "sequence", "data"}
HYPER_PARAMETER_KEYS = {"parameter_id", "parameter_source", "parameters", "parameter_index"}
# The keys nni.experiment's TrialJob(**answer) accepts: any other key is a TypeError there.
NNI_CLIENT_TRIAL_JOB_KEYS = {"trialJobId", "status", "logPath", "startTime", "sequenceId", "endTime",
                             "stderrPath", "hyperParameters", "finalMetricData"}


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory):
    """(view port, experiment, start and end time in ms) of a DONE experiment of three trials."""
    tmp_path = tmp_path_factory.mktemp("shapes")
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    write_script(code_dir, "trial.py", TRIAL)
    home = tmp_path / "home"
    experiment = Experiment(ExperimentConfig(
        experiment_name="shapes", search_space={"x": {"_type": "choice", "_value": XS}},
        trial_command="python3 trial.py", trial_code_directory=code_dir, trial_concurrency=2,
        max_trial_number=len(XS), tuner={"name": "GridSearch"}, experiment_working_directory=home))
    before = time.time() * 1000
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=120) and experiment.get_status() == "DONE"
    finally:
        experiment.stop()
    after = time.time() * 1000
    view = Experiment.view(experiment.id, port=0, non_blocking=True, home=home)
    try:
        yield view.port, experiment, (before, after)
    finally:
        view.stop()


def is_ms(value: Any, window: tuple[float, float]) -> bool:
    """An integer number of milliseconds since the epoch within ``window`` (the test's run)."""
    return type(value) is int and window[0] - 1000 <= value <= window[1] + 1000


def x_of(trial_job: dict[str, Any]) -> int:
    return json.loads(trial_job["hyperParameters"][0])["parameters"]["x"]


def check_metric_record(metric: dict[str, Any], window: tuple[float, float]) -> Any:
    """The record's value as NNI's TrialMetricData reads it, after checking every field."""
    assert set(metric) == METRIC_KEYS, metric
    assert is_ms(metric["timestamp"], window)
    assert type(metric["trialJobId"]) is str and metric["trialJobId"]
    assert type(metric["parameterId"]) is str and metric["parameterId"].isdigit()
    assert metric["type"] in ("PERIODICAL", "FINAL")
    assert type(metric["sequence"]) is int and metric["sequence"] >= 0
    assert type(metric["data"]) is str, f"data must be a JSON string, got {metric['data']!r}"
    text = json.loads(metric["data"])
    assert type(text) is str, f"data must be a JSON string of JSON text, got {metric['data']!r}"
    return json.loads(text)


def test_check_status(finished):
    port, _, _ = finished
    status = get(port, f"{API}/check-status")
    assert status["status"] in EXPERIMENT_STATES and status["status"] == "DONE"
    assert status["errors"] == []


def test_experiment_profile(finished):
    port, experiment, window = finished
    profile = get(port, f"{API}/experiment")
    assert profile["id"] == experiment.id
    assert type(profile["revision"]) is int
    assert type(profile["execDuration"]) is int and 0 <= profile["execDuration"] <= (window[1] - window[0]) / 1000 + 1
    assert type(profile["logDir"]) is str and Path(profile["logDir"]).is_dir()
    assert profile["nextSequenceId"] == len(XS)
    assert is_ms(profile["startTime"], window) and is_ms(profile["endTime"], window)
    assert profile["startTime"] <= profile["endTime"]
    params = profile["params"]  # NNI's v2 config, camelCase, as the web UI reads it
    assert params["experimentName"] == "shapes"
    assert params["searchSpace"] == {"x": {"_type": "choice", "_value": XS}}
    assert params["trialCommand"] == "python3 trial.py" and type(params["trialCodeDirectory"]) is str
    assert params["trialConcurrency"] == 2 and params["maxTrialNumber"] == len(XS)
    assert params["tuner"]["name"] == "GridSearch" and type(params["tuner"].get("classArgs", {})) is dict
    assert params["trainingService"]["platform"] == "local"


def test_trial_jobs(finished):
    port, _, window = finished
    trial_jobs = get(port, f"{API}/trial-jobs")
    assert sorted(x_of(t) for t in trial_jobs) == XS
    for trial_job in trial_jobs:
        assert type(trial_job["trialJobId"]) is str and trial_job["trialJobId"]
        assert type(trial_job["sequenceId"]) is int
        assert trial_job["status"] in TRIAL_STATES and trial_job["status"] == "SUCCEEDED"
        assert type(trial_job["hyperParameters"]) is list and len(trial_job["hyperParameters"]) == 1
        hyper_parameters = trial_job["hyperParameters"][0]
        assert type(hyper_parameters) is str, "each hyperParameters item is a JSON string"
        decoded = json.loads(hyper_parameters)
        assert set(decoded) == HYPER_PARAMETER_KEYS, "nni.experiment's TrialHyperParameters(**item)"
        assert decoded["parameter_id"] == trial_job["sequenceId"] and type(decoded["parameter_source"]) is str
        assert type(decoded["parameter_index"]) is int
        assert type(trial_job["logPath"]) is str and trial_job["logPath"].startswith("file://")
        assert type(trial_job["stderrPath"]) is str
        assert is_ms(trial_job["startTime"], window) and is_ms(trial_job["endTime"], window)
        assert trial_job["startTime"] <= trial_job["endTime"]
        [record] = trial_job["finalMetricData"]
        assert check_metric_record(record, window) == final(x_of(trial_job))
        assert record["type"] == "FINAL" and record["trialJobId"] == trial_job["trialJobId"]
        assert record["parameterId"] == str(trial_job["sequenceId"])
        assert get(port, f"{API}/trial-jobs/{trial_job['trialJobId']}") == trial_job


def test_trial_jobs_have_only_nnis_keys(finished):
    """NNI's routes answer NNI's TrialJobInfo alone; what expmgr's web UI reads besides
    (submitTime, attempts, canKill, finalNumber) is in expmgr's routes."""
    port, _, _ = finished
    for trial_job in get(port, f"{API}/trial-jobs"):
        assert set(trial_job) <= NNI_CLIENT_TRIAL_JOB_KEYS, set(trial_job) - NNI_CLIENT_TRIAL_JOB_KEYS
        single = get(port, f"{API}/trial-jobs/{trial_job['trialJobId']}")
        assert single == trial_job
        ours = get(port, f"/api/v1/expmgr/trials/{trial_job['trialJobId']}")
        assert {key: ours[key] for key in trial_job} == trial_job
        assert type(ours["submitTime"]) is int and ours["attempts"] == 1 and ours["canKill"] is False
        assert ours["finalNumber"] == x_of(trial_job)
        assert [(a["attempt"], a["status"], a["exitCode"]) for a in ours["attemptDetails"]] == [(1, "SUCCEEDED", 0)]


def test_metric_data(finished):
    port, _, window = finished
    ids = {t["trialJobId"]: (x_of(t), t["sequenceId"]) for t in get(port, f"{API}/trial-jobs")}
    everything = get(port, f"{API}/metric-data")
    for trial_id, (x, sequence_id) in ids.items():
        records = [m for m in everything if m["trialJobId"] == trial_id]
        assert get(port, f"{API}/metric-data/{trial_id}") == records
        assert [check_metric_record(m, window) for m in records] == [*intermediate(x), final(x)]
        assert [(m["type"], m["sequence"]) for m in records] == [("PERIODICAL", 0), ("PERIODICAL", 1), ("FINAL", 2)]
        assert {m["parameterId"] for m in records} == {str(sequence_id)}


def test_metric_data_latest(finished):
    port, _, window = finished
    ids = {t["trialJobId"]: x_of(t) for t in get(port, f"{API}/trial-jobs")}
    latest = get(port, f"{API}/metric-data-latest")
    values = {(m["trialJobId"], m["type"]): check_metric_record(m, window) for m in latest}
    assert len(values) == len(latest) == 2 * len(XS)
    assert values == {key: value for trial_id, x in ids.items()
                      for key, value in [((trial_id, "PERIODICAL"), intermediate(x)[-1]),
                                         ((trial_id, "FINAL"), final(x))]}


def test_job_statistics(finished):
    port, _, _ = finished
    statistics = get(port, f"{API}/job-statistics")
    assert statistics == [{"trialJobStatus": "SUCCEEDED", "trialJobNumber": len(XS)}]
    assert all(type(row["trialJobNumber"]) is int for row in statistics)


def test_export_data(finished):
    port, _, _ = finished
    exported = get(port, f"{API}/export-data")
    ids = {t["trialJobId"]: x_of(t) for t in get(port, f"{API}/trial-jobs")}
    assert len(exported) == len(XS)
    for record in exported:
        assert set(record) == {"parameter", "value", "trialJobId"}
        assert record["parameter"] == {"x": ids[record["trialJobId"]]}
        assert type(record["value"]) is str, "nni.experiment's TrialResult json.loads the value"
        assert json.loads(record["value"]) == final(ids[record["trialJobId"]])


def test_a_running_trial_and_its_latest_intermediate_result(stepped):
    """While trials run: no endTime and no finalMetricData yet, and the intermediate result
    in metric-data-latest as NNI's JSON string."""
    stepped.step(1, 0)
    now = time.time() * 1000
    window = (now - 120_000, now + 120_000)

    def latest_of_x1() -> list[dict[str, Any]]:
        trial_id = stepped.running()[1]
        return [m for m in get(stepped.port, f"{API}/metric-data-latest") if m["trialJobId"] == trial_id]
    [record] = wait_until(latest_of_x1, what="the intermediate result of x=1")
    assert record["type"] == "PERIODICAL" and check_metric_record(record, window) == 10
    running = [t for t in get(stepped.port, f"{API}/trial-jobs") if t["status"] == "RUNNING"]
    assert len(running) == 2
    for trial_job in running:
        assert is_ms(trial_job["startTime"], window)
        assert "endTime" not in trial_job and not trial_job.get("finalMetricData")
    assert get(stepped.port, f"{API}/check-status")["status"] == "RUNNING"
    assert "endTime" not in get(stepped.port, f"{API}/experiment")


def test_a_trial_not_started_has_its_submission_time_as_nnis_start_time(tmp_path: Path):
    """NNI's startTime of a trial that has not run yet is the time it was submitted (NNI's
    client requires one: TrialJob(startTime, ...)); expmgr's view has none until it starts."""
    from expmgr.layout import ExperimentPaths
    from expmgr.server import views
    from expmgr.states import ExperimentState, TrialState
    from expmgr.store import ExperimentProfile, ExperimentStore, TrialRecord
    store = ExperimentStore.create(tmp_path / "experiment.sqlite", ExperimentProfile(
        id="waiting1", name=None, config={}, status=ExperimentState.RUNNING, error=None,
        start_time=time.time(), end_time=None, port=None, log_dir=str(tmp_path), platform="local", minimizes=False))
    try:
        store.add_trial(TrialRecord("w", 0, {"x": 1}, TrialState.WAITING, 1_700_000_000.25))
        store.add_trial(TrialRecord("r", 1, {"x": 2}, TrialState.WAITING, 1_700_000_001.0))
        store.start_attempt("r", 1, 1_700_000_002.5)
        files = trial_files(ExperimentPaths(tmp_path), "local")
        nni = {view["trialJobId"]: view for view in views.nni_trial_jobs_view(store, files)}
        ours = {view["trialJobId"]: view for view in views.trial_jobs_view(store, files)}
    finally:
        store.close()
    assert (nni["w"]["status"], nni["w"]["startTime"]) == ("WAITING", 1_700_000_000_250)
    assert (nni["r"]["status"], nni["r"]["startTime"]) == ("RUNNING", 1_700_000_002_500)
    assert all(set(view) <= NNI_CLIENT_TRIAL_JOB_KEYS for view in nni.values())
    assert "startTime" not in ours["w"] and ours["w"]["submitTime"] == 1_700_000_000_250
    assert ours["r"]["startTime"] == 1_700_000_002_500


def test_trial_jobs_and_metric_data_filter_as_nnis_do(finished):
    """NNI's ``trial-jobs?status=`` and ``metric-data[/<id>]?type=``."""
    port, _, _ = finished
    assert get(port, f"{API}/trial-jobs?status=SUCCEEDED") == get(port, f"{API}/trial-jobs")
    assert get(port, f"{API}/trial-jobs?status=RUNNING") == []
    everything = get(port, f"{API}/metric-data")
    finals = get(port, f"{API}/metric-data?type=FINAL")
    assert finals == [m for m in everything if m["type"] == "FINAL"] and len(finals) == len(XS)
    trial_id = finals[0]["trialJobId"]
    assert get(port, f"{API}/metric-data/{trial_id}?type=PERIODICAL") == [
        m for m in everything if m["trialJobId"] == trial_id and m["type"] == "PERIODICAL"]
