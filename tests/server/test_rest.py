"""The REST routes the web UI needs, against real servers: a running experiment of real
trial processes, and finished ones served read-only by ``Experiment.view``."""
from __future__ import annotations

import json
import sqlite3
import urllib.request
from pathlib import Path

import pytest

from expmgr import Experiment
from expmgr.server import static
from expmgr.server.rest import READ_ONLY
from expmgr.store import SCHEMA_VERSION, ExperimentStore, metric_number
from expmgr.states import ExperimentState
from tests.helpers.common import wait_until, write_script
from tests.helpers.experiments import grid_config
from tests.helpers.fill import experiment_on_hosts, fill_experiment
from tests.helpers.server import call, get, get_text
from tests.helpers.store import downgrade_to_schema_2, schema_of

API = "/api/v1/nni"


def parameter_x(view: dict) -> int:
    return json.loads(view["hyperParameters"][0])["parameters"]["x"]


def test_trial_jobs_are_paged_in_sequence_order(filled_view):
    port = filled_view.port
    everything = get(port, f"{API}/trial-jobs")
    assert [t["sequenceId"] for t in everything] == list(range(30))
    page = get(port, f"{API}/trial-jobs?offset=10&limit=5")
    assert page == everything[10:15]
    assert page[0]["finalMetricData"] == everything[10]["finalMetricData"]
    assert get(port, f"{API}/trial-jobs?offset=28") == everything[28:]
    assert get(port, f"{API}/trial-jobs?offset=40&limit=3") == []


@pytest.mark.parametrize("route, message", [
    (f"{API}/trial-jobs?offset=x", "offset: expected a non-negative integer, got 'x'"),
    (f"{API}/trial-jobs?offset=-1", "offset: expected a non-negative integer, got '-1'"),
    (f"{API}/trial-jobs?limit=0", "limit: expected a positive integer, got '0'"),
    (f"{API}/trial-jobs?limit=1.5", "limit: expected a positive integer, got '1.5'"),
    (f"{API}/metric-data-range/a/3", "minSeqId: expected an integer, got 'a'"),
    (f"{API}/metric-data-range/1/%20", "maxSeqId: expected an integer, got ' '"),
    (f"{API}/trial-file/f0001/parameter.json", "name: expected one of stdout, stderr, trial.log, got 'parameter.json'"),
    ("/api/v1/expmgr/changes?limit=none", "limit: expected a positive integer, got 'none'"),
    ("/api/v1/expmgr/tail?file=stdout&trial=f0001&offset=end", "offset: expected an integer, got 'end'"),
    ("/api/v1/expmgr/tail?file=config.yml", "file: expected one of stdout, stderr, trial.log, experiment.log"),
    ("/api/v1/expmgr/tail?offset=0", "file: missing"),
    ("/api/v1/expmgr/tail?file=stderr", "trial: stderr is a trial's file; name the trial"),
    # Beyond a 64-bit integer (SQLite's, a file offset's), and beyond int()'s 4,300 digits.
    (f"{API}/metric-data-range/0/{2 ** 63}", f"maxSeqId: expected an integer, got '{2 ** 63}'"),
    (f"{API}/metric-data-range/-{2 ** 63 + 1}/0", f"minSeqId: expected an integer, got '-{2 ** 63 + 1}'"),
    (f"{API}/trial-jobs?limit={2 ** 64}", f"limit: expected a positive integer, got '{2 ** 64}'"),
    (f"{API}/trial-jobs?offset={2 ** 63}", f"offset: expected a non-negative integer, got '{2 ** 63}'"),
    (f"/api/v1/expmgr/changes?limit={2 ** 63}", f"limit: expected a positive integer, got '{2 ** 63}'"),
    ("/api/v1/expmgr/changes?limit=" + "9" * 5000, "limit: expected a positive integer, got '9999"),
    ("/api/v1/expmgr/tail?file=stdout&trial=f0001&offset=" + "1" * 5000, "offset: expected an integer, got '1111"),
    (f"/api/v1/expmgr/tail?file=stdout&trial=f0001&offset=0&inode={2 ** 63}", "inode: expected a non-negative"),
])
def test_every_bad_query_parameter_is_a_400_naming_it(filled_view, route, message):
    status, answer = call(filled_view.port, "GET", route)
    assert status == 400 and answer["error"].startswith(message)


def test_unknown_trials_are_404s(filled_view):
    for route in [f"{API}/trial-file/nosuch/stdout", "/api/v1/expmgr/tail?file=stdout&trial=nosuch"]:
        assert call(filled_view.port, "GET", route) == (404, {"error": "no trial 'nosuch'"})


def test_metric_data_latest_is_each_trials_last_intermediate_and_final_result(filled_view):
    latest = get(filled_view.port, f"{API}/metric-data-latest")
    assert len(latest) == 60
    by_trial: dict[str, list] = {}
    for metric in latest:
        by_trial.setdefault(metric["trialJobId"], []).append((metric["type"], metric["sequence"]))
    assert by_trial["f0007"] == [("PERIODICAL", 3), ("FINAL", 4)]
    assert set(by_trial) == {f"f{n:04d}" for n in range(30)}


def test_metric_data_range_holds_the_metrics_of_trials_in_the_sequence_range(filled_view):
    metrics = get(filled_view.port, f"{API}/metric-data-range/3/5")
    assert {(m["trialJobId"], m["parameterId"]) for m in metrics} == {
        ("f0003", "3"), ("f0004", "4"), ("f0005", "5")}
    assert len(metrics) == 3 * 5
    assert metrics == [m for m in get(filled_view.port, f"{API}/metric-data") if 3 <= int(m["parameterId"]) <= 5]
    assert get(filled_view.port, f"{API}/metric-data-range/5/3") == []


def test_a_view_is_read_only_and_refuses_every_write_with_409(filled_view):
    port = filled_view.port
    assert get(port, f"{API}/experiment")["readOnly"] is True
    changes = get(port, "/api/v1/expmgr/changes")
    assert changes["experiment"]["readOnly"] is True and changes["full"] is True
    for method, route, body in [
            ("PUT", f"{API}/experiment?update_type=TRIAL_CONCURRENCY", {"params": {"trialConcurrency": 3}}),
            ("DELETE", f"{API}/experiment", None),
            ("DELETE", f"{API}/trial-jobs/f0001", None),
            ("POST", f"{API}/experiment/import-data", [{"parameter": {"x": 1}, "value": 1}]),
            ("POST", "/api/v1/expmgr/trials/f0001/metrics", {"attempt": 1, "sequence": 9, "type": "FINAL",
                                                            "value": 1})]:
        assert call(port, method, route, body) == (409, {"error": READ_ONLY}), (method, route)


def test_an_experiment_in_error_shows_its_error_in_the_profile(tmp_path: Path):
    home = tmp_path / "home"
    exp_id = fill_experiment(home, trials=2, metrics_per_trial=1)
    store = ExperimentStore.open(home / exp_id / "db" / "experiment.sqlite")
    store.set_experiment_status(ExperimentState.ERROR, error="the tuner failed:\nTraceback (most recent call last):")
    store.close()
    view = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
    try:
        profile = get(view.port, f"{API}/experiment")
        assert profile["status"] == "ERROR" and profile["error"].startswith("the tuner failed:\nTraceback")
        assert get(view.port, "/api/v1/expmgr/changes")["experiment"]["error"] == profile["error"]
    finally:
        view.stop()


def test_trial_files_and_tails_of_a_running_trial_grow_with_it(stepped):
    port = stepped.port
    trial_id = stepped.running()[1]
    # An unbuffered print is two writes (the text, then its end): wait for the whole line.
    tail = wait_until(lambda: (t := get(port, f"/api/v1/expmgr/tail?file=stdout&trial={trial_id}"))["text"]
                      .endswith("\n") and t, what="the trial's first line")
    inode = (stepped.experiment.paths.trial_dir(trial_id) / "stdout").stat().st_ino
    assert tail == {"offset": 0, "next": 16, "size": 16, "text": "trial 1 started\n", "inode": inode, "base": 0,
                    "rotated": 0, "dropped": 0, "skipped": 0}
    stepped.step(1, 0)
    grown = wait_until(lambda: (t := get(port, f"/api/v1/expmgr/tail?file=stdout&trial={trial_id}&offset=16"))["text"]
                       .endswith("\n") and t, what="the trial's step 0")
    assert grown == {"offset": 16, "next": 23, "size": 23, "text": "step 0\n", "inode": inode, "base": 0,
                     "rotated": 0, "dropped": 0, "skipped": 0}
    assert get(port, f"/api/v1/expmgr/tail?file=stdout&trial={trial_id}&offset=-7")["text"] == "step 0\n"
    assert get(port, f"/api/v1/expmgr/tail?file=stderr&trial={trial_id}&offset=0")["text"] == "step 0\n"
    status, headers, text = get_text(port, f"{API}/trial-file/{trial_id}/stdout")
    assert (status, headers["Content-Type"], text) == (200, "text/plain; charset=UTF-8", "trial 1 started\nstep 0\n")
    assert get_text(port, f"{API}/trial-file/{trial_id}/trial.log")[0] == 200
    log = get(port, "/api/v1/expmgr/tail?file=experiment.log&offset=-4000")
    assert "is RUNNING" in log["text"] and log["next"] == log["size"]
    attempts = get(port, f"/api/v1/expmgr/trials/{trial_id}")["attemptDetails"]
    assert [(a["attempt"], a["status"], a["exitCode"]) for a in attempts] == [(1, "RUNNING", None)]
    assert attempts[0]["host"] == "127.0.0.1", "the host the local service runs trials on"


def test_changes_since_cursors_lose_and_repeat_no_metric_while_trials_run(stepped):
    port = stepped.port
    seen: list[tuple] = []
    trials: dict[str, dict] = {}
    cursor: list[str | None] = [None]

    def poll() -> dict:
        answer = get(port, "/api/v1/expmgr/changes" + (f"?since={cursor[0]}&limit=3" if cursor[0] else ""))
        assert not answer["full"] or cursor[0] is None
        seen.extend(tuple(m) for m in answer["metrics"])
        trials.update({t["trialJobId"]: t for t in answer["trials"]})
        cursor[0] = answer["cursor"]
        return answer

    first = poll()
    assert first["full"] and len(first["trials"]) == 2
    for step in range(4):  # reports of two trials, read in pages of 3 as they come
        stepped.step(1, step)
        stepped.step(2, step)
        wait_until(lambda step=step: len([m for m in (poll(), seen)[1] if m[2] == "PERIODICAL"]) == 2 * (step + 1),
                   what=f"step {step} of both trials")
    stepped.release()
    assert stepped.experiment.wait(timeout=120)
    # Its server closed with it; a view of its store goes on from the same cursor.
    view = Experiment.view(stepped.experiment.id, port=0, non_blocking=True,
                           home=stepped.experiment.paths.root.parent)
    port = view.port
    try:
        while poll()["more"]:
            pass
    finally:
        view.stop()
    database = sqlite3.connect(stepped.experiment.paths.database)
    stored = database.execute("SELECT trial_id, type, sequence, attempt FROM metrics").fetchall()
    assert len(seen) == len(set(seen)) == len(stored), "no metric repeated"
    assert {(m[0], m[2], m[3], m[6]) for m in seen} == set(stored), "no metric lost"
    assert {t["status"] for t in trials.values()} == {"SUCCEEDED"} and len(trials) == 4
    assert all(t["finalMetricData"] for t in trials.values())


def test_delete_experiment_stops_it_gracefully(stepped):
    assert call(stepped.port, "DELETE", f"{API}/experiment") == (200, {})
    assert stepped.experiment.wait(timeout=60)
    assert stepped.experiment.get_status() == "STOPPED"
    assert {t.status for t in stepped.experiment.list_trial_jobs()} == {"USER_CANCELED"}


def test_the_ui_is_served_with_its_assets_and_a_page_saying_when_it_was_not_built(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    home = tmp_path / "home"
    exp_id = fill_experiment(home, trials=1, metrics_per_trial=1)
    monkeypatch.setattr(static, "WEBUI_DIR", tmp_path / "webui")
    view = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
    try:
        status, headers, page = get_text(view.port, "/")
        assert status == 200 and "The web UI was not built" in page and headers["Cache-Control"] == "no-cache"
        (tmp_path / "webui" / "assets").mkdir(parents=True)
        (tmp_path / "webui" / "index.html").write_text('<script src="assets/app-1a2b.js"></script>')
        (tmp_path / "webui" / "assets" / "app-1a2b.js").write_text("console.log('hi')")
        status, headers, page = get_text(view.port, "/")
        assert (status, page, headers["Cache-Control"]) == (200, '<script src="assets/app-1a2b.js"></script>',
                                                           "no-cache")
        status, headers, script = get_text(view.port, "/assets/app-1a2b.js")
        assert (status, script) == (200, "console.log('hi')")
        assert "javascript" in headers["Content-Type"] and "max-age=31536000" in headers["Cache-Control"]
        assert get_text(view.port, "/assets/nosuch.js")[0] == 404
        assert get_text(view.port, "/assets/../index.html")[0] in (403, 404)
    finally:
        view.stop()


def test_a_schema_2_experiment_is_viewed_as_it_is_and_migrated_by_resume(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", "import expmgr\nx = expmgr.get_next_parameter()['x']\n"
                                       "expmgr.report_intermediate_result({'default': x, 'loss': 1})\n"
                                       "expmgr.report_final_result(x * 10)\n")
    finished = Experiment(grid_config(tmp_path, code_dir, max_trial_number=3))
    assert finished.run(port=0)
    finished.stop()  # its server stayed after DONE; a resume needs it stopped
    database = finished.paths.database
    downgrade_to_schema_2(database)

    view = Experiment.view(finished.id, port=0, non_blocking=True, home=tmp_path / "home")
    try:
        answer = get(view.port, "/api/v1/expmgr/changes")
    finally:
        view.stop()
    assert len(answer["trials"]) == 3 and answer["experiment"]["readOnly"] is True
    assert sorted((m[2], m[4]) for m in answer["metrics"]) == [
        ("FINAL", 0), ("FINAL", 10), ("FINAL", 20), ("PERIODICAL", 0), ("PERIODICAL", 1), ("PERIODICAL", 2)]
    assert schema_of(database)[0] == 2, "a view writes nothing"

    resumed = Experiment.resume(finished.id, port=0, home=tmp_path / "home")
    assert resumed.get_status() == "DONE"
    assert schema_of(database)[0] == SCHEMA_VERSION
    rows = sqlite3.connect(database).execute("SELECT value_json, value FROM metrics").fetchall()
    assert len(rows) == 6 and all(value == metric_number(json.loads(value_json)) for value_json, value in rows)


def test_check_status_and_the_trial_channel_are_unchanged_by_the_ui_routes(filled_view):
    with urllib.request.urlopen(f"http://127.0.0.1:{filled_view.port}{API}/check-status", timeout=10) as response:
        assert json.loads(response.read()) == {"status": "DONE", "errors": []}


def test_experiments_info_lists_the_homes_experiments_as_nnis_manifest_does(filled_view, tmp_path: Path):
    """NNI's experiments-info and experiment-metadata: the registry of the served experiment's
    home; one whose process died without recording its end is STOPPED, without a port."""
    from expmgr.store.registry import Registry, RegistryEntry
    home = tmp_path / "home"
    Registry(home).add(RegistryEntry(id="crashed1", name="died", dir=str(home / "crashed1"), port=1234, pid=None,
                                     status=ExperimentState.RUNNING, start_time=1_700_000_000.5))
    filled = Registry(home).get(filled_view.id)
    info = {record["id"]: record for record in get(filled_view.port, f"{API}/experiments-info")}
    assert info == {
        filled_view.id: {"id": filled_view.id, "startTime": int(filled.start_time * 1000),
                         "endTime": int(filled.end_time * 1000), "status": "DONE", "platform": "local",
                         "experimentName": "30 trials", "tag": [], "pid": None, "webuiUrl": [], "logDir": str(home),
                         "prefixUrl": None},
        "crashed1": {"id": "crashed1", "startTime": 1_700_000_000_500, "endTime": "N/A", "status": "STOPPED",
                     "platform": "local", "experimentName": "died", "tag": [], "pid": None, "webuiUrl": [],
                     "logDir": str(home), "prefixUrl": None},
    }
    assert get(filled_view.port, f"{API}/experiment-metadata") == info[filled_view.id]


def test_expmgrs_trial_route_has_the_uis_fields_and_nnis_has_nnis_alone(filled_view):
    port = filled_view.port
    nni = get(port, f"{API}/trial-jobs/f0003")
    ours = get(port, "/api/v1/expmgr/trials/f0003")
    # finalNumbers: each key's number of a dict result (this one's {"default": ..., "loss": ...})
    assert set(ours) - set(nni) == {"submitTime", "attempts", "canKill", "finalNumber", "finalNumbers",
                                    "attemptDetails", "duration"}
    assert {key: ours[key] for key in nni} == nni
    assert ours["finalNumber"] == metric_number(json.loads(json.loads(nni["finalMetricData"][0]["data"])))
    assert [(a["attempt"], a["status"], a["exitCode"]) for a in ours["attemptDetails"]] == [(1, "SUCCEEDED", 0)]
    assert call(port, "GET", "/api/v1/expmgr/trials/nosuch") == (404, {"error": "no trial 'nosuch'"})


def test_each_trials_host_is_in_expmgrs_views_and_nnis_trial_jobs_keep_nnis_keys(tmp_path: Path):
    home = tmp_path / "home"
    exp_id = experiment_on_hosts(home, [["node-a"], ["node-a", "node-b"]])
    view = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
    try:
        port = view.port
        changes = get(port, "/api/v1/expmgr/changes")
        assert changes["experiment"]["multiHost"] is True
        assert {t["trialJobId"]: t["host"] for t in changes["trials"]} == {"h0": "node-a", "h1": "node-b"}
        trial = get(port, "/api/v1/expmgr/trials/h1")
        assert trial["host"] == "node-b", "the host of its latest attempt"
        assert [(a["attempt"], a["status"], a["host"]) for a in trial["attemptDetails"]] == [
            (1, "FAILED", "node-a"), (2, "SUCCEEDED", "node-b")]
        assert get(port, f"{API}/experiment")["multiHost"] is True
        for nni in [get(port, f"{API}/trial-jobs/h1"), *get(port, f"{API}/trial-jobs")]:
            assert "host" not in nni, "NNI's keys alone"
            assert set(nni) == {"trialJobId", "sequenceId", "status", "hyperParameters", "logPath", "stderrPath",
                                "startTime", "endTime", "finalMetricData"}
    finally:
        view.stop()


def test_trials_on_one_host_are_not_multi_host(tmp_path: Path):
    home = tmp_path / "home"
    exp_id = experiment_on_hosts(home, [["127.0.0.1"], ["127.0.0.1", "127.0.0.1"], [None]])
    view = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
    try:
        changes = get(view.port, "/api/v1/expmgr/changes")
        assert changes["experiment"]["multiHost"] is False, "an unknown host is no second host"
        assert [t.get("host") for t in changes["trials"]] == ["127.0.0.1", "127.0.0.1", None]
        assert "host" not in changes["trials"][2], "sent once known"
    finally:
        view.stop()


def test_a_cursor_of_huge_ids_is_no_cursor_and_answers_everything(filled_view):
    """A cursor's ids beyond SQLite's 64-bit integers (or int()'s 4,300 digits) is not one of
    this experiment's cursors: the whole state, as for any other stranger cursor, not a 500."""
    port = filled_view.port
    exp_id = get(port, "/api/v1/expmgr/changes")["cursor"].split("-")[0]
    for huge in [str(2 ** 63), "9" * 5000]:
        answer = get(port, f"/api/v1/expmgr/changes?since={exp_id}-{huge}-0-{huge}")
        assert answer["full"] is True
