"""Totals across clients: the bytes of imports held until the tuner takes them, and of
websocket follows, are bounded for all clients together (docs/security.md)."""
from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Iterator

import pytest

from expmgr import Experiment, ExperimentConfig
from tests.conftest import wait_until, write_script
from tests.security.conftest import send

IMPORT = "/api/v1/nni/experiment/import-data"
HELD_TOTAL = 100_000
"""EXPMGR_MAX_IMPORTS_HELD of these tests: bytes, not the default's MiBs."""
WAITING_TRIAL = """
    import time
    import expmgr
    expmgr.get_next_parameter()
    time.sleep(600)
"""


def records_body(size: int) -> bytes:
    """A valid import body of about ``size`` bytes."""
    count = max(1, size // 40)
    return json.dumps([{"parameter": {"x": 1}, "value": index / 3} for index in range(count)]).encode()


@pytest.fixture
def importing(tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Experiment]:
    """A running experiment with a tuner, whose imports held may total HELD_TOTAL bytes."""
    write_script(code_dir, "trial.py", WAITING_TRIAL)
    monkeypatch.setenv("EXPMGR_MAX_IMPORTS_HELD", str(HELD_TOTAL))
    experiment = Experiment(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1, 2]}}, trial_command="python3 trial.py",
        trial_code_directory=code_dir, trial_concurrency=1, max_trial_number=1, tuner={"name": "GridSearch"},
        trial_grace_period=1, experiment_working_directory=tmp_path / "home"))
    experiment.start(port=0)
    try:
        yield experiment
    finally:
        experiment.stop()


def start_import(port: int, body: bytes, sent: int) -> socket.socket:
    """An import whose headers and first ``sent`` bytes of body were sent: its body is held."""
    client = socket.create_connection(("127.0.0.1", port), timeout=30)
    client.sendall(f"POST {IMPORT} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(body)}\r\n\r\n".encode() + body[:sent])
    return client


def answer_of(client: socket.socket) -> tuple[int, str]:
    data = b""
    while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < content_length(data):
        chunk = client.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode()


def content_length(data: bytes) -> int:
    for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def test_an_import_beyond_the_total_held_is_refused_until_the_others_are_taken(importing: Experiment):
    port = importing.port
    held_body = records_body(HELD_TOTAL * 8 // 10)
    held = start_import(port, held_body, 1000)  # its body is reserved from its headers on
    try:
        small = records_body(HELD_TOTAL // 4)
        wait_until(lambda: send(port, "POST", IMPORT, small).status == 503, what="the second import refused")
        refused = send(port, "POST", IMPORT, small)
        assert "EXPMGR_MAX_IMPORTS_HELD" in refused.error and "retry once they are taken" in refused.error, refused
        assert f"holds at most {HELD_TOTAL}" in refused.error, refused
        with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
            raw.sendall(f"POST {IMPORT} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                        f"Content-Length: {len(small)}\r\n\r\n".encode() + small)
            response = raw.recv(65536).decode()
        assert response.startswith("HTTP/1.1 503") and "\r\nRetry-After: 5\r\n" in response, response
        held.sendall(held_body[1000:])
        assert answer_of(held) == (200, "{}")
    finally:
        held.close()
    # Taken by the tuner: its bytes are given back, and the next import is accepted.
    wait_until(lambda: f"{len(json.loads(held_body))} results imported into the tuner"
               in importing.paths.experiment_log.read_text(), what="the first import taken by the tuner")
    wait_until(lambda: send(port, "POST", IMPORT, small).status == 200, what="the second import accepted")


def test_an_import_whose_client_leaves_before_its_body_ends_gives_its_bytes_back(importing: Experiment):
    port = importing.port
    body = records_body(HELD_TOTAL * 8 // 10)
    small = records_body(HELD_TOTAL // 4)
    left = start_import(port, body, 1000)
    wait_until(lambda: send(port, "POST", IMPORT, small).status == 503, what="an import refused meanwhile")
    left.close()
    wait_until(lambda: send(port, "POST", IMPORT, small).status == 200, what="an import accepted once it left")
