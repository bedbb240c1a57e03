"""The report socket (expmgr/server/report_socket.py) of a real experiment with real trials:
local trials send their reports over it, answered as the HTTP route answers them (the same
statuses and errors, duplicates stored once), and nothing a client sends or holds keeps the
other trials' reports from being stored; a trial that cannot reach it sends over HTTP."""
from __future__ import annotations

import json
import os
import socket
import stat
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from expmgr import Experiment, ExperimentConfig
from expmgr import trial as trial_api
from expmgr.engine.reports import attempt_token, load_trial_secret
from expmgr.server import report_socket
from expmgr.server.refusals import READ_ONLY
from tests.helpers.common import trial_token, wait_until, write_script
from tests.helpers.server import get

GATED_TRIAL = """
    import os, time
    import expmgr
    gates = os.environ["GATE_DIR"]
    if os.path.exists(os.path.join(gates, "no-http")):
        os.environ["EXPMGR_MANAGER_PORT"] = "1"   # read at the first call: nothing listens there
    x = expmgr.get_next_parameter()["x"]
    # An intermediate result 10x + n for each file step<n>-<x> the test makes; end-<x> ends
    # this trial, release every one.
    step, deadline = 0, time.monotonic() + 60
    while time.monotonic() < deadline and not any(
            os.path.exists(os.path.join(gates, name)) for name in ("release", f"end-{x}")):
        if os.path.exists(os.path.join(gates, f"step{step}-{x}")):
            expmgr.report_intermediate_result(x * 10 + step)
            step += 1
        else:
            time.sleep(0.01)
    expmgr.report_final_result(x)
"""


@dataclass
class Gated:
    """A running experiment of GATED_TRIAL trials (x = 1..4), two at a time."""

    experiment: Experiment
    gates: Path
    home: Path

    @classmethod
    def start(cls, tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch, http_off: bool = False) -> Gated:
        write_script(code_dir, "trial.py", GATED_TRIAL)
        gates = tmp_path / "gates"
        gates.mkdir()
        if http_off:
            (gates / "no-http").touch()
        monkeypatch.setenv("GATE_DIR", str(gates))
        config = ExperimentConfig(
            search_space={"x": {"_type": "choice", "_value": [1, 2, 3, 4]}}, trial_command="python3 trial.py",
            trial_code_directory=code_dir, trial_concurrency=2, max_trial_number=4, tuner={"name": "GridSearch"},
            trial_grace_period=2, experiment_working_directory=tmp_path / "home")
        gated = cls(Experiment(config), gates, tmp_path / "home")
        try:   # a start that fails half-way still stops what it started
            gated.experiment.start(port=0)
            wait_until(lambda: len(gated.running()) == 2, what="two running trials")
        except BaseException:
            gated.stop()
            raise
        return gated

    @property
    def port(self) -> int:
        return self.experiment.port

    @property
    def socket(self) -> Path:
        return self.experiment.paths.report_socket

    def step(self, x: int, step: int) -> None:
        (self.gates / f"step{step}-{x}").touch()

    def end(self, x: int) -> None:
        (self.gates / f"end-{x}").touch()

    def release(self) -> None:
        (self.gates / "release").touch()

    def stop(self) -> None:
        self.release()
        self.experiment.stop()

    def running(self) -> dict[int, str]:
        """x -> trial id of the running trials."""
        return {json.loads(t["hyperParameters"][0])["parameters"]["x"]: t["trialJobId"]
                for t in get(self.port, "/api/v1/nni/trial-jobs") if t["status"] == "RUNNING"}

    def stored(self, trial_id: str) -> list[tuple[str, int, Any]]:
        """(type, sequence, value) of the trial's stored reports."""
        return sorted((m["type"], m["sequence"], json.loads(json.loads(m["data"])))
                      for m in get(self.port, f"/api/v1/nni/metric-data/{trial_id}"))

    def stderr(self, trial_id: str) -> str:
        return (self.experiment.paths.trial_dir(trial_id) / "stderr").read_text()


def report(sequence: int, value: Any = 5, **fields: Any) -> bytes:
    """A report's body as a trial of attempt 1 sends it (the MAC is only for metrics.jsonl)."""
    return json.dumps({"attempt": 1, "sequence": sequence, "type": "PERIODICAL", "value": value, **fields}).encode()


def silent_connection(path: Path) -> socket.socket:
    """A client of the socket that has sent nothing (yet)."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(30)
    client.connect(str(path))
    return client


def exchange(path: Path, data: bytes) -> bytes:
    """Send ``data`` to the socket at ``path``; all it answers before it closes the connection."""
    with silent_connection(path) as client:
        client.sendall(data)
        answer = b""
        while chunk := client.recv(4096):
            answer += chunk
    return answer


def over_socket(path: Path, trial_id: str, token: str, body: bytes) -> tuple[int, Any]:
    """(status, JSON answer) of one report over the report socket."""
    answer = exchange(path, f"{trial_id} {token} {len(body)}\n".encode() + body)
    assert answer.endswith(b"\n") and answer.count(b"\n") == 1, answer
    status, _, text = answer.partition(b" ")
    return int(status), json.loads(text)


def over_http(port: int, trial_id: str, token: str, body: bytes) -> tuple[int, Any]:
    """(status, JSON answer) of the same report POSTed to the HTTP route."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}" + trial_api.METRICS_ROUTE.format(trial_id=trial_id), body, method="POST",
        headers={"Content-Type": "application/json", trial_api.TOKEN_HEADER: token})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture
def gated(tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch):
    """Two running trials (x = 1, 2, of 1..4) that report when the test says."""
    gated = Gated.start(tmp_path, code_dir, monkeypatch)
    try:
        yield gated
    finally:
        gated.stop()


def test_a_trials_reports_go_over_the_socket_and_are_stored_while_it_runs(tmp_path: Path, code_dir: Path,
                                                                           monkeypatch: pytest.MonkeyPatch):
    gated = Gated.start(tmp_path, code_dir, monkeypatch, http_off=True)  # HTTP unreachable for the trials
    try:
        path = gated.experiment.paths.report_socket
        trial_id = gated.running()[1]
        gated.step(1, 0)
        assert wait_until(lambda: gated.stored(trial_id) == [("PERIODICAL", 0, 10)], what="the report stored")
        assert trial_id in gated.running().values(), "stored as it was sent, not picked up from metrics.jsonl at its end"
        gated.step(1, 1)
        wait_until(lambda: len(gated.stored(trial_id)) == 2, what="its second report")
        assert "warning" not in gated.stderr(trial_id)
        assert stat.S_ISSOCK(path.lstat().st_mode)
    finally:
        gated.stop()


@pytest.mark.parametrize("case", ["wrong token", "no token", "unknown trial", "another attempt", "bad field",
                                  "not JSON", "duplicate key", "not an object", "good"])
def test_the_socket_answers_each_report_as_the_http_route_does(gated: Gated, case: str):
    trial_id = gated.running()[1]
    token = trial_token(trial_id)
    body = report(sequence=100)
    if case == "wrong token":
        token = "0" * 32
    elif case == "no token":
        token = ""
    elif case == "unknown trial":
        trial_id = "nosuch"
    elif case == "another attempt":
        body = report(sequence=100, attempt=2)
    elif case == "bad field":
        body = report(sequence=100, type="SOMETIMES")
    elif case == "not JSON":
        body = b'{"attempt": 1, "seq'
    elif case == "duplicate key":
        body = b'{"attempt": 1, "attempt": 1, "sequence": 100, "type": "PERIODICAL", "value": 5}'
    elif case == "not an object":
        body = b"[1, 2]"
    by_socket = over_socket(gated.socket, trial_id, token, body)
    by_http = over_http(gated.port, trial_id, token, body)
    assert by_socket == by_http
    expected = {"wrong token": 403, "no token": 403, "unknown trial": 403, "another attempt": 409,
                "good": 200}.get(case, 400)
    assert by_socket[0] == expected, by_socket
    stored = gated.stored(gated.running()[1])
    assert stored == ([("PERIODICAL", 100, 5)] if case == "good" else []), "a refused report is never stored"


def test_a_trial_that_does_not_run_gets_the_answer_http_gives_and_a_read_only_experiment_409(gated: Gated):
    ended = gated.running()[1]
    token = attempt_token(load_trial_secret(gated.experiment.paths.root), ended, 1)
    gated.end(1)
    wait_until(lambda: ended not in gated.running().values(), what="trial 1's end")
    by_socket = over_socket(gated.socket, ended, token, report(sequence=100))
    assert by_socket == over_http(gated.port, ended, token, report(sequence=100))
    assert by_socket[0] == 403
    gated.release()
    assert gated.experiment.wait(timeout=60), "the search ends; its server stays, read-only"
    assert gated.socket.exists()
    by_socket = over_socket(gated.socket, ended, token, report(sequence=100))
    assert by_socket == over_http(gated.port, ended, token, report(sequence=100)) == (409, {"error": READ_ONLY})
    assert [kind for kind, _, _ in gated.stored(ended)] == ["FINAL"]


def test_a_report_sent_twice_is_stored_once(gated: Gated):
    trial_id = gated.running()[2]
    token = trial_token(trial_id)
    assert over_socket(gated.socket, trial_id, token, report(sequence=7, value=3)) == (200, {"ok": True})
    assert over_socket(gated.socket, trial_id, token, report(sequence=7, value=3)) == (200, {"ok": True})
    assert over_http(gated.port, trial_id, token, report(sequence=7, value=3)) == (200, {"ok": True})
    assert gated.stored(trial_id) == [("PERIODICAL", 7, 3)]


def test_a_report_over_the_size_limit_is_refused_413_and_not_stored(gated: Gated):
    trial_id = gated.running()[1]
    token = trial_token(trial_id)
    big = report(sequence=9, value={"default": 1, "pad": "x" * 70_000})
    status, answer = over_socket(gated.socket, trial_id, token, big)
    assert status == 413 and "more than the 65536 bytes" in answer["error"]
    assert over_http(gated.port, trial_id, token, big)[0] == 413
    # Refused from the header alone, however much of the body follows.
    assert exchange(gated.socket, f"{trial_id} {token} {2**60}\n".encode()).startswith(b"413 ")
    assert gated.stored(trial_id) == []


@pytest.mark.parametrize("header", [b"x" * 300, b"garbage\n", b"a b\n", b"a b c d\n", b"a b -5\n", b"a b 5x\n",
                                    b"\xff\xfe t 5\n", b"a b 99999999999999999999\n", b" t 5\n"])
def test_a_malformed_header_is_a_400(gated: Gated, header: bytes):
    answer = exchange(gated.socket, header)
    assert answer.startswith(b"400 {") and answer.endswith(b"}\n"), answer
    assert "header" in json.loads(answer.split(b" ", 1)[1])["error"]
    assert "report socket failed" not in gated.experiment.paths.experiment_log.read_text(), "no error of ours"


def test_bad_and_silent_clients_do_not_keep_other_trials_reports_out(gated: Gated):
    silent = [silent_connection(gated.socket) for _ in range(3)]
    half_header = silent_connection(gated.socket)
    half_header.sendall(b"abcde 0123")   # a header that never ends
    half_body = silent_connection(gated.socket)
    half_body.sendall(b"abcde 0123 100\n{")   # a body that never comes
    assert exchange(gated.socket, b"y" * 5000).startswith(b"400 ")
    trial_id = gated.running()[1]
    assert over_socket(gated.socket, trial_id, trial_token(trial_id), report(sequence=50)) == (200, {"ok": True})
    gated.step(1, 0)
    wait_until(lambda: ("PERIODICAL", 0, 10) in gated.stored(trial_id), what="the trial's own report")
    assert "warning" not in gated.stderr(trial_id)
    for connection in [*silent, half_header, half_body]:
        connection.close()
    assert "report socket failed" not in gated.experiment.paths.experiment_log.read_text(), "no error of ours"


def test_clients_holding_every_connection_of_the_socket_leave_trials_their_http(gated: Gated):
    held = [silent_connection(gated.socket) for _ in range(report_socket.MAX_CONNECTIONS)]
    try:
        one_more = silent_connection(gated.socket)
        assert one_more.recv(100) == b"", "over the cap, a connection is closed unread"
        one_more.close()
        trial_id = gated.running()[2]
        gated.step(2, 0)   # refused by the socket: the trial sends it over HTTP
        wait_until(lambda: ("PERIODICAL", 0, 20) in gated.stored(trial_id), what="the trial's report over HTTP")
        assert "warning" not in gated.stderr(trial_id)
        assert get(gated.port, "/api/v1/nni/check-status")["status"] == "RUNNING"
    finally:
        for connection in held:
            connection.close()
    token = trial_token(trial_id)
    wait_until(lambda: over_socket(gated.socket, trial_id, token, report(sequence=60)) == (200, {"ok": True}),
               what="the socket answering again once the held connections closed")


def test_a_connection_that_sends_nothing_is_closed_after_the_connection_timeout(
        gated: Gated, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(report_socket, "CONNECTION_TIMEOUT", 0.2)
    connection = silent_connection(gated.socket)
    connection.settimeout(30)
    assert connection.recv(100) == b"", "closed by the server, unanswered"
    connection.close()


def test_the_socket_is_its_owners_alone_removed_at_stop_and_a_stale_one_is_replaced(gated: Gated):
    path = gated.socket
    assert stat.S_ISSOCK(path.lstat().st_mode) and stat.S_IMODE(path.lstat().st_mode) == 0o600
    gated.stop()
    assert not path.exists() and not path.is_symlink()
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)   # as a run that was SIGKILLed leaves it
    stale.bind(str(path))
    stale.close()
    resumed = Experiment.resume(gated.experiment.id, port=0, home=gated.home, wait_completion=False)
    try:
        assert stat.S_IMODE(path.lstat().st_mode) == 0o600
        assert exchange(path, b"garbage\n").startswith(b"400 "), "the resumed experiment's own socket"
    finally:
        resumed.stop()
    assert not path.exists()


def test_a_trial_sends_over_http_when_the_socket_is_gone(gated: Gated):
    trial_id = gated.running()[1]
    gated.step(1, 0)
    wait_until(lambda: len(gated.stored(trial_id)) == 1, what="the first report")
    gated.socket.unlink()
    gated.step(1, 1)
    assert wait_until(lambda: gated.stored(trial_id) == [("PERIODICAL", 0, 10), ("PERIODICAL", 1, 11)],
                      what="the second report, over HTTP")
    assert "warning" not in gated.stderr(trial_id)
    gated.stop()   # the socket file it made is gone: nothing else is removed


def test_a_path_too_long_for_a_unix_socket_leaves_trials_on_http(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", """
        import os, expmgr
        expmgr.get_next_parameter()
        print("socket:", os.environ.get("EXPMGR_MANAGER_SOCKET"))
        expmgr.report_final_result(1)
    """)
    home = tmp_path / ("h" * (report_socket.MAX_PATH_BYTES - len(str(tmp_path))))
    config = ExperimentConfig(search_space={"x": {"_type": "choice", "_value": [1]}}, trial_command="python3 trial.py",
                              trial_code_directory=code_dir, trial_concurrency=1, max_trial_number=1,
                              tuner={"name": "GridSearch"},
                              experiment_working_directory=home)
    experiment = Experiment(config)
    assert experiment.run(port=0)
    assert len(os.fsencode(experiment.paths.report_socket)) > report_socket.MAX_PATH_BYTES
    assert not experiment.paths.report_socket.exists()
    [trial] = experiment.list_trial_jobs()
    assert trial.finalMetric == 1
    folder = experiment.paths.trial_dir(trial.trialJobId)
    assert (folder / "stdout").read_text() == "socket: None\n"
    assert "warning" not in (folder / "stderr").read_text()
    assert experiment.paths.experiment_log.read_text().count("no report socket") == 1
