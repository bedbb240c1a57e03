"""Other local users against an experiment's server (docs/security.md, "Other users of
this machine"): without a token only the server's own user gets in (Linux tells the uid of
a loopback client's socket: expmgr/server/peers.py), on every route and the websocket;
the cookie of a ``?token=`` link is named per port and holds no token; ``resume`` and
``view`` keep the token; trials never see ``$EXPMGR_TOKEN``.

Another user is ``nobody``, reached with ``setpriv`` from root; those tests skip elsewhere."""
from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from expmgr import Experiment, ExperimentConfig
from expmgr.server import auth, peers
from tests.helpers.common import wait_until, write_script
from tests.helpers.security import TOKEN, gated_experiment, request, websocket_status

SYSTEM_PYTHON = "/usr/bin/python3"
"""A Python any user can run (the clients as nobody use its standard library only)."""


def as_nobody() -> list[str]:
    """The command prefix that runs a program as user nobody; skips where that cannot be."""
    if os.geteuid() != 0:
        pytest.skip("switching to another user needs root")
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody'")
    if shutil.which("setpriv") is None or not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"needs setpriv and {SYSTEM_PYTHON}")
    return ["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups", SYSTEM_PYTHON]


RAW_CLIENT = r"""
import json, socket, sys
port, method, path, headers, body = int(sys.argv[1]), sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), sys.argv[5]
connection = socket.create_connection(("127.0.0.1", port), timeout=30)
head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {len(body)}\r\n"
head += "".join(f"{name}: {value}\r\n" for name, value in headers.items())
connection.sendall((head + "\r\n" + body).encode())
answer = b""
def complete():  # a refused upgrade may leave the connection open: read one answer
    head, found, rest = answer.partition(b"\r\n\r\n")
    length = head.lower().partition(b"content-length:")[2].split(b"\r\n")[0].strip() or b"0"
    return found and len(rest) >= int(length)
while not complete():
    chunk = connection.recv(65536)
    if not chunk:
        break
    answer += chunk
sys.stdout.buffer.write(answer)
"""


def request_as_nobody(port: int, method: str, path: str, headers: dict[str, str] | None = None,
                      body: str = "") -> tuple[int, str]:
    """One raw HTTP/1.1 request from a process of user nobody: (status, body)."""
    done = subprocess.run([*as_nobody(), "-c", RAW_CLIENT, str(port), method, path, json.dumps(headers or {}), body],
                          capture_output=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr
    status_line, _, rest = done.stdout.decode(errors="replace").partition("\r\n")
    return int(status_line.split()[1]), rest.partition("\r\n\r\n")[2]


@pytest.fixture
def open_experiment(tmp_path, code_dir, monkeypatch):
    """A running experiment without a token (the default) whose two trials reported once and wait."""
    experiment = gated_experiment(tmp_path, code_dir, monkeypatch)
    assert experiment.access.token is None
    wait_until(lambda: len(json.loads(request(experiment.port, "GET", "/api/v1/nni/metric-data")[2])) == 2,
               what="both trials' first reports")
    yield experiment
    (tmp_path / "release").touch()
    experiment.stop()


def test_without_a_token_nobody_is_refused_everywhere_and_the_owner_let_in(open_experiment):
    port = open_experiment.port
    status, body = request_as_nobody(port, "DELETE", "/api/v1/nni/experiment", {"Content-Type": "application/json"})
    assert status == 403, body
    error = json.loads(body)["error"]
    assert "user nobody (uid 65534)" in error and "--token" in error and "X-Expmgr-Token" in error, error
    for route in ("/api/v1/nni/experiment", "/api/v1/nni/trial-jobs", "/api/v1/expmgr/tail?file=experiment.log",
                  "/"):
        assert request_as_nobody(port, "GET", route)[0] == 403, route
    assert request_as_nobody(port, "PUT", "/api/v1/nni/experiment?update_type=TRIAL_CONCURRENCY",
                             {"Content-Type": "application/json"},
                             json.dumps({"params": {"trialConcurrency": 5}}))[0] == 403
    upgrade = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
    assert request_as_nobody(port, "GET", "/api/v1/expmgr/ws", upgrade)[0] == 403
    # Its owner's tools need nothing: this process is its user.
    assert request(port, "GET", "/api/v1/nni/experiment")[0] == 200
    assert websocket_status(port, "/api/v1/expmgr/ws") == "open"
    assert open_experiment.get_status() in ("RUNNING", "NO_MORE_TRIAL"), "nobody's DELETE stopped nothing"
    assert open_experiment.get_experiment_profile()["params"]["trialConcurrency"] == 2


def test_with_a_token_nobody_gets_in_with_it_only(tmp_path, code_dir, monkeypatch):
    experiment = gated_experiment(tmp_path, code_dir, monkeypatch, token=TOKEN)
    try:
        port = experiment.port
        assert request_as_nobody(port, "GET", "/api/v1/nni/experiment")[0] == 401
        assert request_as_nobody(port, "GET", "/api/v1/nni/experiment", {"X-Expmgr-Token": TOKEN})[0] == 200
    finally:
        (tmp_path / "release").touch()
        experiment.stop()


# -- telling the user of a connection ----------------------------------------------

def _accepted(family: socket.AddressFamily, listen_on: str, connect_to: str):
    server = socket.socket(family if ":" in listen_on else socket.AF_INET)
    server.bind((listen_on, 0))
    server.listen()
    client = socket.socket(family)
    client.connect((connect_to, server.getsockname()[1]))
    accepted, _ = server.accept()
    server.close()
    return client, accepted


def _diag_or_tables(how: str):
    """The lookup ``how`` names, skipping where this system has not that way."""
    if how == "diag":
        try:
            peers.uid_from_diag(("127.0.0.1", 1), ("127.0.0.1", 1))
        except peers.CannotAsk:
            pytest.skip("no socket diagnostics (netlink) here")
        return peers.uid_from_diag
    if not os.access(peers.TABLES[0], os.R_OK):
        pytest.skip("no /proc/net/tcp")
    return peers.uid_from_tables


@pytest.mark.parametrize("how", ["diag", "tables"])
@pytest.mark.parametrize("family, listen_on, connect_to", [
    (socket.AF_INET, "127.0.0.1", "127.0.0.1"), (socket.AF_INET6, "::1", "::1"),
    (socket.AF_INET6, "127.0.0.1", "::ffff:127.0.0.1")])  # an IPv6 socket reaching an IPv4 server
def test_the_uid_of_a_loopback_client_is_told_and_none_once_it_closed(how, family, listen_on, connect_to):
    lookup = _diag_or_tables(how)
    try:
        client, accepted = _accepted(family, listen_on, connect_to)
    except OSError as error:
        pytest.skip(f"cannot connect {connect_to} here: {error}")
    try:
        assert lookup(accepted.getpeername(), accepted.getsockname()) == os.geteuid()
        client.close()
        # Closed, the client's end has no owner (the kernel shows uid 0 for it): not root's.
        assert lookup(accepted.getpeername(), accepted.getsockname()) is None
        assert peers.connection_peer_uid(accepted) is None
    finally:
        client.close()
        accepted.close()


@pytest.mark.parametrize("how", ["diag", "tables"])
def test_the_uid_of_another_users_client_is_theirs(how):
    command = as_nobody()
    lookup = _diag_or_tables(how)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    client = subprocess.Popen([*command, "-c", f"import socket, sys; c = socket.create_connection(('127.0.0.1', "
                                               f"{server.getsockname()[1]})); sys.stdin.read()"],
                              stdin=subprocess.PIPE, cwd="/")
    try:
        server.settimeout(60)
        accepted, _ = server.accept()
        assert lookup(accepted.getpeername(), accepted.getsockname()) == pwd.getpwnam("nobody").pw_uid
        assert peers.connection_peer_uid(accepted) == pwd.getpwnam("nobody").pw_uid
        accepted.close()
    finally:
        server.close()
        client.communicate(timeout=60)


# -- cookies ----------------------------------------------------------------------

def test_the_cookie_of_one_port_opens_no_other_and_holds_no_token(tmp_path, code_dir, monkeypatch):
    """Two experiments with the same token on two ports of 127.0.0.1: a browser sends the
    cookie of one to the other; it neither opens the other nor tells it the token."""
    started = []
    try:
        for folder in ("a", "b"):
            started.append((gated_experiment(tmp_path / folder, code_dir, monkeypatch, token=TOKEN), tmp_path / folder))
        (first, _), (second, _) = started
        status, headers, _ = request(first.port, "GET", f"/?token={TOKEN}")
        assert status == 302
        cookie = headers["set-cookie"].split(";")[0]
        name, _, value = cookie.partition("=")
        assert name == f"expmgr-{first.port}-" + name.rsplit("-", 1)[1] and TOKEN not in cookie
        assert request(first.port, "GET", "/api/v1/nni/experiment", {"Cookie": cookie})[0] == 200
        assert request(second.port, "GET", "/api/v1/nni/experiment", {"Cookie": cookie})[0] == 401
        # Even under the other's name, the value of one port is not the other's.
        other_name = auth.cookie_name(TOKEN, second.port)
        assert request(second.port, "GET", "/api/v1/nni/experiment", {"Cookie": f"{other_name}={value}"})[0] == 401
    finally:
        for experiment, folder in started:
            (folder / "release").touch()
            experiment.stop()


# -- resume and view ----------------------------------------------------------------

QUICK_TRIAL = """
    import os
    import expmgr
    expmgr.get_next_parameter()
    # 1: the server's access token reached the trial; 2: its own token did not
    expmgr.report_final_result(1 if "EXPMGR_TOKEN" in os.environ else 2 if "EXPMGR_TRIAL_TOKEN" not in os.environ
                               else 0)
"""


def quick_experiment(tmp_path: Path, code_dir: Path) -> Experiment:
    write_script(code_dir, "trial.py", QUICK_TRIAL)
    return Experiment(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1, 2]}}, trial_command="python3 trial.py",
        trial_code_directory=code_dir, trial_concurrency=2, max_trial_number=2, tuner={"name": "GridSearch"},
        experiment_working_directory=tmp_path / "home"))


def test_a_trial_never_sees_the_access_token(tmp_path, code_dir, monkeypatch):
    monkeypatch.setenv(auth.TOKEN_ENV, TOKEN)  # as expctl gives it to its daemon
    experiment = quick_experiment(tmp_path, code_dir)
    try:
        assert experiment.run(port=0, token=TOKEN)
        assert [result.value for result in experiment.export_data()] == [0, 0]
    finally:
        experiment.stop()


def test_resume_and_view_keep_the_token_of_the_last_run(tmp_path, code_dir):
    experiment = quick_experiment(tmp_path, code_dir)
    try:
        assert experiment.run(port=0, token=TOKEN)
    finally:
        experiment.stop()
    home = tmp_path / "home"
    resumed = Experiment.resume(experiment.id, port=0, wait_completion=False, home=home)
    try:
        assert resumed.access.token == TOKEN
        assert resumed.url.endswith(f"?token={TOKEN}")
        assert request(resumed.port, "GET", "/api/v1/nni/experiment")[0] == 401
        assert request(resumed.port, "GET", "/api/v1/nni/experiment", {"X-Expmgr-Token": TOKEN})[0] == 200
    finally:
        resumed.stop()
    viewed = Experiment.view(experiment.id, port=0, non_blocking=True, home=home)
    try:
        assert viewed.access.token == TOKEN
        assert request(viewed.port, "GET", "/api/v1/nni/experiment")[0] == 401
    finally:
        viewed.stop()
    other = "another-token-for-tests_0123456789"
    viewed = Experiment.view(experiment.id, port=0, non_blocking=True, home=home, token=other)
    try:
        assert request(viewed.port, "GET", "/api/v1/nni/experiment", {"X-Expmgr-Token": other})[0] == 200
    finally:
        viewed.stop()
