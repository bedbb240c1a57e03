"""Totals across clients: the bytes of imports held until the tuner takes them, and of
websocket follows, are bounded for all clients together (docs/security.md)."""
from __future__ import annotations

import base64
import json
import os
import socket
from pathlib import Path
from typing import Iterator

import pytest

from expmgr import Experiment, ExperimentConfig
from expmgr.layout import TrialFolder
from tests.helpers.common import wait_until, write_script
from tests.helpers.security import send
from tests.helpers.server import sockets  # noqa: F401 - the websocket client fixture

IMPORT = "/api/v1/nni/experiment/import-data"
HELD_TOTAL = 100_000
"""EXPMGR_MAX_IMPORTS_HELD of these tests: bytes, not the default's MiBs."""
FOLLOW_TOTAL = 1024 * 1024
"""EXPMGR_MAX_FOLLOW_BACKLOG of these tests."""
STDOUT_BYTES = 1_000_000
WAITING_TRIAL = f"""
    import os, time
    import expmgr
    expmgr.get_next_parameter()
    line = "x" * 99 + "\\n"
    os.write(1, (line * ({STDOUT_BYTES} // 100)).encode())
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
    monkeypatch.setenv("EXPMGR_MAX_FOLLOW_BACKLOG", str(FOLLOW_TOTAL))
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


def hold_import(experiment: Experiment, body: bytes, small: bytes) -> socket.socket:
    """An import of ``body`` held open (its first 1000 bytes sent) whose reservation is in
    place: an import of ``small`` is refused beside it. The server may read the small one's
    headers first; then the held one, read while the small one is held, is refused for the
    total (silently until its body ends). So each try starts with no import held, and a try
    whose small import got in is finished and made again."""
    accepted = 0  # imports answered 200: each is logged once the tuner took it

    def none_held() -> bool:
        return experiment.paths.experiment_log.read_text().count(" results imported into the tuner") >= accepted

    def attempt() -> socket.socket | None:
        nonlocal accepted
        wait_until(none_held, what="the imports accepted so far taken by the tuner")
        held = start_import(experiment.port, body, 1000)
        if send(experiment.port, "POST", IMPORT, small).status == 503:
            return held
        accepted += 1
        held.sendall(body[1000:])
        accepted += answer_of(held)[0] == 200
        held.close()
        return None

    return wait_until(attempt, what="an import refused beside the held one")  # type: ignore[return-value]


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
    small = records_body(HELD_TOTAL // 4)
    held = hold_import(importing, held_body, small)  # its body is reserved from its headers on
    try:
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
    left = hold_import(importing, body, small)
    left.close()
    wait_until(lambda: send(port, "POST", IMPORT, small).status == 200, what="an import accepted once it left")


def stdout_size(experiment: Experiment, trial_id: str) -> int:
    stdout = TrialFolder(experiment.paths.trial_dir(trial_id)).stdout
    return stdout.stat().st_size if stdout.exists() else 0


def running_trial(experiment: Experiment) -> str:
    """The id of the experiment's trial, once it wrote its stdout."""
    def written() -> str | None:
        trials = send(experiment.port, "GET", "/api/v1/nni/trial-jobs").body
        ready = [trial["trialJobId"] for trial in trials
                 if stdout_size(experiment, trial["trialJobId"]) == STDOUT_BYTES]
        return ready[0] if ready else None
    wait_until(written, what="the trial's stdout written")
    return str(written())


def test_a_follow_that_names_no_offset_starts_at_the_end_of_the_file(importing: Experiment, sockets):
    trial_id = running_trial(importing)
    client = sockets(importing.port)
    client.send({"type": "follow", "file": "stdout", "trial": trial_id})
    wait_until(lambda: client.of_type("tail"), what="the first tail")
    first = client.of_type("tail")[0]
    assert first["size"] == STDOUT_BYTES and first["next"] == STDOUT_BYTES, first["size"]
    assert 0 < first["offset"] < STDOUT_BYTES and len(first["text"]) <= 256 * 1024, first["offset"]


class SilentClient:
    """A websocket client that sends and never reads (a small receive buffer): what the
    server sends it piles up in the server."""

    def __init__(self, port: int) -> None:
        self.connection = socket.socket()
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.connection.connect(("127.0.0.1", port))
        key = base64.b64encode(os.urandom(16)).decode()
        self.connection.sendall(f"GET /api/v1/expmgr/ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                                "Sec-WebSocket-Version: 13\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.connection.recv(1)
        assert head.startswith(b"HTTP/1.1 101"), head

    def send(self, message: dict[str, object]) -> None:
        payload = json.dumps(message).encode()
        assert len(payload) < 126
        mask = os.urandom(4)
        self.connection.sendall(bytes([0x81, 0x80 | len(payload)]) + mask
                                + bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload)))

    def close(self) -> None:
        self.connection.close()


def test_follows_wait_while_all_clients_together_have_too_much_unsent(importing: Experiment, sockets):
    trial_id = running_trial(importing)
    silent = SilentClient(importing.port)
    reader = sockets(importing.port)
    try:
        wait_until(lambda: reader.of_type("hello"), what="the reader connected")

        def follow_held_back() -> bool:
            """The silent client asks for more (each follow answers with up to 256 KiB, until
            the kernel's buffers are full and the server's pile up); the reader follows too,
            then sends a bad message: messages are handled in order, so the error's answer
            comes after the follow's turn."""
            for _ in range(8):
                silent.send({"type": "follow", "file": "stdout", "trial": trial_id, "offset": 0})
            reader.messages.clear()
            reader.send({"type": "follow", "file": "stdout", "trial": trial_id, "offset": -1000})
            reader.send({"type": "ping"})
            wait_until(lambda: reader.of_type("error"), what="the bad message answered")
            kinds = [message["type"] for message in list(reader.messages)]
            return "tail" not in kinds[:kinds.index("error")]
        wait_until(follow_held_back, what="a follow held back")
    finally:
        silent.close()
    # The silent client's bytes given back when it left, the reader's follow is answered.
    wait_until(lambda: reader.of_type("tail"), what="the held-back follow answered")
