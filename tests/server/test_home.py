"""The experiments page's server side (expmgr/server/home.py, shelf.py): one record per
experiment of the registry, with the state a user should see (a SIGKILLed experiment is
CRASHED, with the command that resumes it), its platform, best result, trials, times and
where it opens; and stop, resume, delete and open by id, as expctl does them. Real
daemons (expctl create), real stores, a real server on 127.0.0.1."""
from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from expmgr.experiment.home_server import HomeServer
from expmgr.experiment.listening import server_sockets
from expmgr.layout import ExperimentPaths
from expmgr.server.lifecycle import is_serving
from expmgr.states import ExperimentState
from tests.helpers.common import wait_until
from tests.helpers.registry_fill import SLEEPING_TRIAL, RegistryFill


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def call(port: int, method: str, path: str, body: object = None,
         token: str | None = None) -> tuple[int, Any, dict[str, str]]:
    """(status, JSON answer or text, headers) of ``method path`` on the home server; redirects not followed."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"} if data is not None else {}
    if token is not None:
        headers["X-Expmgr-Token"] = token
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method, headers=headers)
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=120) as response:
            status, text, headers = response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as error:
        status, text, headers = error.code, error.read(), dict(error.headers)
    try:
        return status, json.loads(text), headers
    except ValueError:
        return status, text.decode(errors="replace"), headers


@pytest.fixture(scope="module")
def fill(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A registry with a running, a done, a stopped and a crashed experiment (real daemons),
    a copy of the done one that ran on Ray, and a copy whose store is damaged."""
    root = tmp_path_factory.mktemp("home-registry")
    registry = RegistryFill(root / "home", root)
    try:
        ids = {"done": registry.done()}
        ids["stopped"] = registry.daemon(SLEEPING_TRIAL, "stopped")
        ids["crashed"] = registry.daemon(SLEEPING_TRIAL, "crashed")
        ids["running"] = registry.daemon(SLEEPING_TRIAL, "running")
        for kind in ("stopped", "crashed", "running"):
            registry.running_trials(ids[kind], 2)
        registry.stop(ids["stopped"])
        registry.crash(ids["crashed"])
        ids["ray"] = registry.copy(ids["done"], "rayrun01", name="on-ray", platform="ray")
        ids["damaged"] = registry.copy(ids["done"], "damaged1")
        ExperimentPaths(root / "home" / "damaged1").database.write_bytes(b"not a database" * 100)
        ids["home"] = str(root / "home")
        ids["cwd"] = str(root)
        yield ids
    finally:
        registry.kill()


@pytest.fixture
def home_server(fill: dict[str, str]) -> Iterator[HomeServer]:
    sockets, access = server_sockets(0, "127.0.0.1", "", None)
    server = HomeServer(Path(fill["home"]), sockets, access)
    server.start()
    yield server
    server.stop()


def records(port: int) -> dict[str, dict[str, Any]]:
    status, answer, _ = call(port, "GET", "/api/v1/expmgr/experiments")
    assert status == 200, answer
    return {record["id"]: record for record in answer["experiments"]}


def test_each_experiment_is_listed_with_the_state_a_user_should_see(fill, home_server):
    listed = records(home_server.port)
    assert {record["state"] for record in listed.values()} >= {"RUNNING", "DONE", "STOPPED", "CRASHED"}
    running, done, stopped, crashed = (listed[fill[kind]] for kind in ("running", "done", "stopped", "crashed"))
    assert running["state"] == "RUNNING" and running["openKind"] == "live" and running["endTime"] is None
    assert running["actions"] == {"stop": True, "resume": False, "delete": False}
    assert running["trials"] == {"RUNNING": 2} and running["duration"] > 0
    assert done["state"] == "DONE" and done["trials"] == {"SUCCEEDED": 4} and done["trialCount"] == 4
    assert done["best"]["value"] == 6.0, "x = 4 reports 6.0, the highest: maximize by default"
    assert done["endTime"] >= done["startTime"] and done["open"] == f"/experiments/{fill['done']}/"
    assert done["actions"] == {"stop": False, "resume": False, "delete": True}
    assert stopped["state"] == "STOPPED" and stopped["resumeCommand"] == f"expctl resume {fill['stopped']}"
    # Its process was SIGKILLed: the registry still says RUNNING, the page says what happened.
    assert crashed["state"] == "CRASHED" and crashed["resumeCommand"] == f"expctl resume {fill['crashed']}"
    assert crashed["actions"] == {"stop": False, "resume": True, "delete": True}
    assert crashed["openKind"] == "read-only" and crashed["endTime"] is None
    assert all(listed[fill[kind]]["platform"] == "local" for kind in ("running", "done", "stopped", "crashed"))
    assert listed["rayrun01"]["problem"] is None and listed["rayrun01"]["platform"] == "ray" and listed["rayrun01"]["name"] == "on-ray"
    # One unreadable store: its row says why, the others are listed as usual.
    assert "damaged1" in listed and "experiment.sqlite" in (listed["damaged1"]["problem"] or "")
    assert all(record["problem"] is None for exp_id, record in listed.items() if exp_id != "damaged1")


def test_best_is_the_server_rule_that_expctl_uses(fill, home_server):
    from tests.helpers.registry_fill import expctl
    top = expctl(Path(fill["home"]), Path(fill["cwd"]), "trial", "ls", fill["done"], "--sort", "default",
                 "--head", "1", "--json")
    best = json.loads(top.stdout)[0]
    assert records(home_server.port)[fill["done"]]["best"] == {"trialId": best["trial"], "value": best["final"]}


def test_an_experiment_opens_live_while_it_runs_and_read_only_here_once_ended(fill, home_server):
    port = home_server.port
    status, _, headers = call(port, "GET", f"/api/v1/expmgr/experiments/{fill['running']}/open")
    running = RegistryFill(Path(fill["home"]), Path(fill["cwd"])).entry(fill["running"])
    assert status == 302 and headers["Location"] == f"http://127.0.0.1:{running.port}/"
    status, _, headers = call(port, "GET", f"/api/v1/expmgr/experiments/{fill['crashed']}/open")
    assert status == 302 and headers["Location"] == f"/experiments/{fill['crashed']}/"
    status, page, _ = call(port, "GET", f"/experiments/{fill['crashed']}/")
    assert status == 200 and "<html" in page and 'content="home"' not in page, "the experiment's own page"
    status, profile, _ = call(port, "GET", f"/experiments/{fill['crashed']}/api/v1/nni/experiment")
    assert status == 200 and profile["id"] == fill["crashed"]
    status, refused, _ = call(port, "PUT", f"/experiments/{fill['crashed']}/api/v1/nni/experiment"
                                           "?update_type=TRIAL_CONCURRENCY", {"params": {"trialConcurrency": 3}})
    assert status == 409 and "read-only" in refused["error"]
    # Under the experiment's page, the list answers with links of the home server.
    status, nested, _ = call(port, "GET", f"/experiments/{fill['crashed']}/api/v1/expmgr/experiments")
    assert status == 200 and {r["id"]: r["open"] for r in nested["experiments"]}[fill["done"]] == \
        f"/experiments/{fill['done']}/"
    # A running one asked for under the shelf goes to its own server.
    status, _, headers = call(port, "GET", f"/experiments/{fill['running']}/")
    assert status == 302 and headers["Location"].endswith(f"/experiments/{fill['running']}/open")


def test_at_most_max_open_experiments_are_served_read_only_at_once(fill, home_server):
    assert home_server.shelf is not None
    home_server.shelf.max_open = 2
    for kind in ("done", "stopped", "crashed"):
        status, _, _ = call(home_server.port, "GET", f"/experiments/{fill[kind]}/api/v1/nni/check-status")
        assert status == 200
    assert home_server.shelf.open_ids == [fill["stopped"], fill["crashed"]], "the least recently used closed"
    status, _, _ = call(home_server.port, "GET", f"/experiments/{fill['done']}/api/v1/nni/check-status")
    assert status == 200 and home_server.shelf.open_ids == [fill["crashed"], fill["done"]]


@pytest.mark.parametrize("path, method, status, words", [
    ("/api/v1/expmgr/experiments/a%20b/stop", "POST", 400, "id: expected an experiment id"),
    ("/api/v1/expmgr/experiments/..", "DELETE", 400, "id: expected an experiment id"),
    ("/api/v1/expmgr/experiments/" + "x" * 200 + "/open", "GET", 400, "id: expected an experiment id"),
    ("/api/v1/expmgr/experiments/nosuch12/resume", "POST", 404, "id: no experiment 'nosuch12'"),
    ("/api/v1/expmgr/experiments/nosuch12", "DELETE", 404, "id: no experiment 'nosuch12'"),
    ("/experiments/nosuch12/", "GET", 404, "id: no experiment 'nosuch12'"),
])
def test_bad_ids_are_refused_naming_the_field(home_server, path, method, status, words):
    answer_status, answer, _ = call(home_server.port, method, path, {} if method == "POST" else None)
    assert answer_status == status and words in answer["error"]


def test_actions_that_do_not_apply_are_refused_with_what_to_do(fill, home_server):
    port = home_server.port
    status, answer, _ = call(port, "POST", f"/api/v1/expmgr/experiments/{fill['done']}/frobnicate", {})
    assert status == 404 and "action: expected stop or resume" in answer["error"]
    status, answer, _ = call(port, "POST", f"/api/v1/expmgr/experiments/{fill['crashed']}/stop", {})
    assert status == 409 and answer["error"] == f"experiment {fill['crashed']} is not running (CRASHED)"
    status, answer, _ = call(port, "DELETE", f"/api/v1/expmgr/experiments/{fill['running']}")
    assert status == 409 and answer["error"] == (f"experiment {fill['running']} is running; stop it first "
                                                 f"(expctl stop {fill['running']})")
    assert Path(fill["home"], fill["running"]).is_dir()
    status, answer, _ = call(port, "POST", f"/api/v1/expmgr/experiments/{fill['running']}/resume", {})
    assert status == 409 and "stop it first" in answer["error"]


def test_stop_resume_and_delete_do_what_expctl_does(fill, home_server):
    home, port = Path(fill["home"]), home_server.port
    registry = RegistryFill(home, Path(fill["cwd"]))
    exp_id = registry.copy(fill["crashed"], "resumed1", name="resumed")
    try:
        status, answer, _ = call(port, "POST", f"/api/v1/expmgr/experiments/{exp_id}/resume", {})
        assert status == 200 and answer["message"] == f"experiment {exp_id} resumed"
        assert is_serving(registry.entry(exp_id))
        wait_until(lambda: records(port)[exp_id]["state"] == "RUNNING", what="RUNNING in the list")
        status, answer, _ = call(port, "POST", f"/api/v1/expmgr/experiments/{exp_id}/stop", {})
        assert status == 200 and answer["message"] == f"experiment {exp_id} is stopping"
        wait_until(lambda: not is_serving(registry.entry(exp_id)), timeout=60, what="the stop")
        assert registry.entry(exp_id).status == ExperimentState.STOPPED
        assert records(port)[exp_id]["state"] == "STOPPED"
    finally:
        registry.kill(exp_id)
    status, answer, _ = call(port, "DELETE", f"/api/v1/expmgr/experiments/{exp_id}")
    assert status == 200 and answer["message"] == f"deleted experiment {exp_id}"
    assert not (home / exp_id).exists() and registry.registry.get(exp_id) is None
    assert exp_id not in records(port)


def test_a_deleted_experiment_open_read_only_is_closed(fill, home_server):
    registry = RegistryFill(Path(fill["home"]), Path(fill["cwd"]))
    exp_id = registry.copy(fill["done"], "gone0001")
    assert call(home_server.port, "GET", f"/experiments/{exp_id}/api/v1/nni/check-status")[0] == 200
    assert home_server.shelf is not None and exp_id in home_server.shelf.open_ids
    assert call(home_server.port, "DELETE", f"/api/v1/expmgr/experiments/{exp_id}")[0] == 200
    status, answer, _ = call(home_server.port, "GET", f"/experiments/{exp_id}/api/v1/nni/check-status")
    assert status == 404 and exp_id not in home_server.shelf.open_ids
    shutil.rmtree(Path(fill["home"], exp_id), ignore_errors=True)


def test_nnis_experiments_info_reports_the_platform_stored_with_each_experiment(fill):
    running = RegistryFill(Path(fill["home"]), Path(fill["cwd"])).entry(fill["running"])
    with urllib.request.urlopen(f"http://127.0.0.1:{running.port}/api/v1/nni/experiments-info",
                                timeout=30) as response:
        platforms = {record["id"]: record["platform"] for record in json.loads(response.read())}
    assert platforms["rayrun01"] == "ray" and platforms[fill["done"]] == "local"


def test_with_a_token_and_a_prefix_nothing_is_said_to_a_client_without_the_token(fill):
    token = "home-token-0123456789abcdef"
    sockets, access = server_sockets(0, "127.0.0.1", "/lab", token)
    server = HomeServer(Path(fill["home"]), sockets, access)
    server.start()
    try:
        for path in ("/lab/api/v1/expmgr/experiments", f"/lab/experiments/{fill['done']}",
                     f"/lab/experiments/{fill['done']}/api/v1/nni/experiment", "/lab/experiments/nosuch12/",
                     f"/lab/api/v1/expmgr/experiments/{fill['running']}/open"):
            status, answer, _ = call(server.port, "GET", path)
            assert status == 401 and "token" in answer["error"], path
        status, answer, _ = call(server.port, "DELETE", f"/lab/api/v1/expmgr/experiments/{fill['done']}")
        assert status == 401 and Path(fill["home"], fill["done"]).is_dir()
        status, answer, _ = call(server.port, "GET", "/lab/api/v1/expmgr/experiments", token=token)
        assert status == 200
        opened = {record["id"]: record["open"] for record in answer["experiments"]}
        assert opened[fill["done"]] == f"/lab/experiments/{fill['done']}/"
        assert opened[fill["running"]] == f"/lab/api/v1/expmgr/experiments/{fill['running']}/open"
        status, profile, _ = call(server.port, "GET", f"/lab/experiments/{fill['done']}/api/v1/nni/experiment",
                                  token=token)
        assert status == 200 and profile["id"] == fill["done"]
    finally:
        server.stop()


def test_an_ended_experiments_store_is_read_once_until_its_files_change(fill, monkeypatch):
    """200 experiments polled every few seconds: only the running ones' stores are read again."""
    from expmgr.server import home
    from expmgr.store.registry import Registry
    opened: list[str] = []
    real_open = home.open_store

    def counting_open(paths, readonly):  # noqa: ANN001, ANN202 - the real open, counted
        opened.append(paths.root.name)
        return real_open(paths, readonly=readonly)
    monkeypatch.setattr(home, "open_store", counting_open)
    records_cache = home.ExperimentRecords()
    site = home.HomeSite(Path(fill["home"]), "", shelf=True)
    first = records_cache.read(Registry(Path(fill["home"])), site)
    assert len(opened) == len(first)
    opened.clear()
    again = records_cache.read(Registry(Path(fill["home"])), site)
    assert opened == [fill["running"]]
    assert [record["state"] for record in again] == [record["state"] for record in first]
