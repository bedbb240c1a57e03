"""The access token (expmgr/server/auth.py) against a real server: required on every
REST route, the websocket and the page when set, given by header, bearer or the cookie
a ``?token=`` link sets; trials report without it; everything served under a url
prefix; another local user cannot stop the experiment."""
from __future__ import annotations

import json
import logging
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import psutil
import pytest

from expmgr import Experiment
from expmgr.server import auth
from expmgr.store.registry import Registry
from expmgr.states import ExperimentState
from tests.helpers.common import REPO, wait_until
from tests.helpers.security import TOKEN, gated_experiment, request, websocket_status

READ_ROUTES = ["api/v1/nni/check-status", "api/v1/nni/experiment", "api/v1/nni/trial-jobs",
               "api/v1/nni/metric-data", "api/v1/nni/metric-data-latest", "api/v1/nni/job-statistics",
               "api/v1/nni/export-data", "api/v1/expmgr/changes", "api/v1/expmgr/tail?file=experiment.log"]


@pytest.fixture
def guarded(tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch):
    """A running experiment with an access token whose two trials reported once and wait."""
    experiment = gated_experiment(tmp_path, code_dir, monkeypatch, token=TOKEN)
    wait_until(lambda: len(json.loads(request(experiment.port, "GET", "/api/v1/nni/metric-data",
                                              {"X-Expmgr-Token": TOKEN})[2])) == 2,
               what="both trials' first reports")
    yield experiment
    (tmp_path / "release").touch()
    experiment.stop()


def test_without_the_token_every_route_the_websocket_and_the_page_answer_401(guarded):
    port = guarded.port
    for route in READ_ROUTES:
        status, headers, body = request(port, "GET", "/" + route)
        assert status == 401, route
        assert "X-Expmgr-Token" in json.loads(body)["error"], route
        assert headers["www-authenticate"].startswith("Bearer")
    for method, route, body in [("DELETE", "/api/v1/nni/experiment", None),
                                ("PUT", "/api/v1/nni/experiment?update_type=TRIAL_CONCURRENCY",
                                 {"params": {"trialConcurrency": 5}}),
                                ("POST", "/api/v1/nni/experiment/import-data", []),
                                ("DELETE", "/api/v1/nni/trial-jobs/nosuchtrial", None)]:
        assert request(port, method, route, body=body)[0] == 401, (method, route)
    wrong = request(port, "DELETE", "/api/v1/nni/experiment", {"X-Expmgr-Token": TOKEN[:-1] + "x"})
    assert wrong[0] == 401 and "is wrong" in json.loads(wrong[2])["error"]
    assert request(port, "GET", "/api/v1/nni/experiment", {"Cookie": f"{auth.cookie_name(TOKEN, port)}=nope"})[0] == 401
    assert request(port, "GET", "/api/v1/nni/experiment",
                   {"Cookie": f"{auth.cookie_name(TOKEN, port)}={TOKEN}"})[0] == 401, "the token is not the cookie's value"
    assert websocket_status(port, "/api/v1/expmgr/ws") == 401
    assert request(port, "GET", "/")[0] == 401
    assert guarded.get_status() in ("RUNNING", "NO_MORE_TRIAL"), "nothing the refused requests asked for happened"
    assert guarded.get_experiment_profile()["params"]["trialConcurrency"] == 2


def test_the_token_lets_in_by_header_bearer_and_the_cookie_of_a_token_link(guarded, caplog):
    caplog.set_level(logging.INFO, logger="tornado.access")
    port = guarded.port
    for headers in ({"X-Expmgr-Token": TOKEN}, {"Authorization": f"Bearer {TOKEN}"}):
        for route in READ_ROUTES:
            assert request(port, "GET", "/" + route, headers)[0] == 200, (route, headers)
        assert websocket_status(port, "/api/v1/expmgr/ws", headers) == "open"
    # The link: the cookie is set, and the address bar loses the token.
    status, headers, _ = request(port, "GET", f"/?token={TOKEN}")
    assert status == 302 and headers["location"] == "/"
    cookie = headers["set-cookie"]
    assert cookie.startswith(f"{auth.cookie_name(TOKEN, port)}={auth.cookie_value(TOKEN, port)};")
    assert TOKEN not in cookie and str(port) in auth.cookie_name(TOKEN, port)
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    with_cookie = {"Cookie": cookie.split(";")[0]}
    status, headers, page = request(port, "GET", "/", with_cookie)
    assert status == 200 and headers["content-type"].startswith("text/html") and b"<html" in page.lower()
    assert request(port, "GET", "/api/v1/nni/trial-jobs", with_cookie)[0] == 200
    assert websocket_status(port, "/api/v1/expmgr/ws", with_cookie) == "open"
    assert request(port, "GET", "/?token=wrong-token-wrong-token")[0] == 401
    assert "302 GET /?token=... (127.0.0.1)" in caplog.text and TOKEN not in caplog.text, "not in the access log"
    # The trials reported without it: their per-trial tokens are their own business.
    status, _, body = request(port, "GET", "/api/v1/nni/metric-data", with_cookie)
    assert sorted(json.loads(json.loads(m["data"])) for m in json.loads(body)) == [10, 20]
    assert request(port, "PUT", "/api/v1/nni/experiment?update_type=TRIAL_CONCURRENCY",
                   with_cookie, {"params": {"trialConcurrency": 3}})[0] == 200
    assert guarded.get_experiment_profile()["params"]["trialConcurrency"] == 3


def test_the_token_is_stored_for_its_owner_only_and_connect_uses_it(guarded):
    access_file = guarded.paths.access_file
    assert stat.S_IMODE(access_file.stat().st_mode) == 0o600
    assert json.loads(access_file.read_text())["token"] == TOKEN
    assert TOKEN not in guarded.paths.experiment_log.read_text(), "the token stays out of the logs"
    assert guarded.url == f"http://127.0.0.1:{guarded.port}/?token={TOKEN}"
    connected = Experiment.connect(guarded.port, home=guarded.paths.root.parent)
    connected.update_trial_concurrency(4)  # through REST, with the token of the access file
    assert guarded.get_experiment_profile()["params"]["trialConcurrency"] == 4


def test_everything_is_served_under_the_url_prefix_and_trials_still_report(tmp_path, code_dir, monkeypatch):
    experiment = gated_experiment(tmp_path, code_dir, monkeypatch, url_prefix="team/exp-1/", token=TOKEN)
    try:
        port, token = experiment.port, {"X-Expmgr-Token": TOKEN}
        status, headers, _ = request(port, "GET", f"/team/exp-1?token={TOKEN}")
        assert status in (301, 302) and headers["location"] == f"/team/exp-1/?token={TOKEN}"
        status, headers, _ = request(port, "GET", f"/team/exp-1/?token={TOKEN}")
        assert status == 302 and headers["location"] == "/team/exp-1/"
        assert "Path=/team/exp-1/" in headers["set-cookie"]
        assert request(port, "GET", "/team/exp-1/", {"Cookie": headers["set-cookie"].split(";")[0]})[0] == 200
        for route in READ_ROUTES:
            assert request(port, "GET", "/team/exp-1/" + route, token)[0] == 200, route
            assert request(port, "GET", "/" + route, token)[0] == 404, f"{route} is not served outside the prefix"
        assert request(port, "GET", "/", token)[0] == 404
        assert websocket_status(port, "/team/exp-1/api/v1/expmgr/ws", token) == "open"
        assert experiment.url == f"http://127.0.0.1:{port}/team/exp-1/?token={TOKEN}"
        (tmp_path / "release").touch()
        assert experiment.wait(60)
        assert experiment.get_status() == "DONE"
        assert sorted(result.value for result in experiment.export_data()) == [1, 2], "reports under the prefix"
    finally:
        (tmp_path / "release").touch()
        experiment.stop()


@pytest.mark.parametrize("prefix", ["a b", "/x/../y", "a?b", "é"])
def test_a_bad_url_prefix_is_refused_before_anything_is_created(tmp_path, code_dir, monkeypatch, prefix):
    from expmgr.experiment import AccessError
    with pytest.raises(AccessError, match="url_prefix: expected a path of URL-safe segments"):
        gated_experiment(tmp_path, code_dir, monkeypatch, url_prefix=prefix)
    assert not (tmp_path / "home").exists()


def _this_machines_lan_address() -> str | None:
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family == socket.AF_INET and not address.address.startswith("127."):
                return address.address
    return None


def test_listening_on_a_lan_address_generates_a_token_and_trials_report_to_that_address(
        tmp_path, code_dir, monkeypatch):
    address = _this_machines_lan_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    experiment = gated_experiment(tmp_path, code_dir, monkeypatch, host=address)
    try:
        token = experiment.access.token
        assert token and len(token) >= 40, "generated: secrets.token_urlsafe(32)"
        assert experiment.url == f"http://{address}:{experiment.port}/?token={token}"
        (tmp_path / "release").touch()
        assert experiment.wait(60) and experiment.get_status() == "DONE"
        assert sorted(result.value for result in experiment.export_data()) == [1, 2]
    finally:
        (tmp_path / "release").touch()
        experiment.stop()


def test_an_empty_token_on_a_wildcard_address_is_refused(tmp_path, code_dir, monkeypatch):
    from expmgr.experiment import AccessError
    with pytest.raises(AccessError, match="token: listening on 0.0.0.0 .* requires an access token"):
        gated_experiment(tmp_path, code_dir, monkeypatch, host="0.0.0.0", token="")
    with pytest.raises(AccessError, match="token: expected at least 16 characters"):
        gated_experiment(tmp_path, code_dir, monkeypatch, token="short")
    assert not (tmp_path / "home").exists()


# -- another local user ------------------------------------------------------------

def _python_for(user: str) -> list[str] | None:
    """A Python command ``user`` can run that imports this checkout's expmgr, or None."""
    site = sysconfig.get_paths()["purelib"]
    for python in dict.fromkeys([sys.executable, shutil.which("python3", path="/usr/bin:/usr/local/bin") or ""]):
        if not python:
            continue
        command = ["env", f"PYTHONPATH={REPO}{os.pathsep}{site}", python]
        try:
            probe = subprocess.run([*command, "-c", "import expmgr.cli, tornado, psutil"], user=user,
                                   capture_output=True, timeout=60, cwd="/")
        except (OSError, subprocess.SubprocessError):
            continue
        if probe.returncode == 0:
            return command
    return None


@pytest.fixture
def shared_home():
    """An experiments home other users may look into (the worst case: only the token guards)."""
    path = Path(tempfile.mkdtemp(prefix="expmgr-shared-"))
    path.chmod(0o755)
    yield path
    for entry in Registry(path).entries():
        if entry.pid and psutil.pid_exists(entry.pid):
            os.kill(entry.pid, signal.SIGKILL)
    shutil.rmtree(path, ignore_errors=True)


def test_another_local_user_cannot_stop_an_experiment_with_a_token(shared_home, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("switching to another user needs root")
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody'")
    as_nobody = _python_for("nobody")
    if as_nobody is None:
        pytest.skip("no Python that user 'nobody' can run with this checkout")
    project = Path(tempfile.mkdtemp(prefix="expmgr-project-", dir=shared_home))
    (project / "config.yml").write_text(
        "searchSpace:\n  x: {_type: choice, _value: [1]}\ntrialCommand: python3 -c 'import time; time.sleep(60)'\n"
        "trialConcurrency: 1\nmaxTrialNumber: 1\ntrialGracePeriod: 1s\ntuner:\n  name: GridSearch\n"
        f"experimentWorkingDirectory: {shared_home}\n")
    env = {**os.environ, "EXPMGR_HOME": str(shared_home), "PYTHONPATH": str(REPO)}
    created = subprocess.run([sys.executable, "-m", "expmgr.cli", "create", "--config", "config.yml", "--port", "0",
                              "--token", TOKEN], cwd=project, env=env, capture_output=True, text=True, timeout=120)
    assert created.returncode == 0, created.stderr
    exp_id = created.stdout.split()[1]
    entry = Registry(shared_home).get(exp_id)
    for folder in (shared_home / exp_id, shared_home / exp_id / "db"):
        folder.chmod(0o755)  # even where another user may read the folder, the token file stays closed
    access_file = shared_home / exp_id / "access.json"
    assert stat.S_IMODE(access_file.stat().st_mode) == 0o600

    def as_user(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*as_nobody, *args], user="nobody", env={**env, "PYTHONPATH": ""}, cwd="/",
                              capture_output=True, text=True, timeout=60)

    delete = as_user("-c", f"""
import urllib.request, urllib.error
request = urllib.request.Request("http://127.0.0.1:{entry.port}/api/v1/nni/experiment", method="DELETE",
                                 headers={{"Content-Type": "application/json"}})
try:
    print(urllib.request.urlopen(request, timeout=30).status)
except urllib.error.HTTPError as error:
    print(error.code)
""")
    assert delete.stdout.strip() == "401", delete.stderr
    stolen = as_user("-c", f"print(open({str(access_file)!r}).read())")
    assert stolen.returncode != 0 and "Permission denied" in stolen.stderr
    stop = as_user("-m", "expmgr.cli", "stop", exp_id)
    assert stop.returncode != 0, stop.stdout  # the registry is not theirs to write, the process not to signal
    assert "Traceback" not in stop.stderr and stop.stderr.strip(), stop.stderr  # one clear message
    assert Registry(shared_home).get(exp_id).status in (ExperimentState.RUNNING, ExperimentState.NO_MORE_TRIAL)
    assert psutil.pid_exists(entry.pid)
    stopped = subprocess.run([sys.executable, "-m", "expmgr.cli", "stop", exp_id], env=env, capture_output=True,
                             text=True, timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    wait_until(lambda: not psutil.pid_exists(entry.pid), what="the daemon to exit")
