"""A served experiment whose trials step when told (``Stepped``, trial ``STEPPED_TRIAL``), and
clients of its REST API and websocket (``call``, ``get``, ``get_text``, the ``sockets`` fixture)."""
from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tornado.websocket

from expmgr import Experiment


STEPPED_TRIAL = """
    import os, sys, time
    import expmgr
    x = expmgr.get_next_parameter()["x"]
    gates = os.environ["GATE_DIR"]
    # Whole lines in one write each: an unbuffered print() is two (the text, then its end),
    # and the tests count the followed file's messages.
    sys.stdout.write(f"trial {x} started\\n")
    sys.stdout.flush()
    step, deadline = 0, time.monotonic() + 60
    # One intermediate result (and a line on stdout and stderr) per file step<n>-<x> the
    # test creates; the file "release" ends every trial.
    while time.monotonic() < deadline and not os.path.exists(os.path.join(gates, "release")):
        if os.path.exists(os.path.join(gates, f"step{step}-{x}")):
            expmgr.report_intermediate_result(x * 10 + step)
            sys.stdout.write(f"step {step}\\n")
            sys.stdout.flush()
            sys.stderr.write(f"step {step}\\n")
            sys.stderr.flush()
            step += 1
        else:
            time.sleep(0.01)
    expmgr.report_final_result(x)
"""


@dataclass
class Stepped:
    """A running experiment of stepped trials (x = 1, 2, ...), two at a time."""

    experiment: Experiment
    gates: Path

    @property
    def port(self) -> int:
        return self.experiment.port

    def step(self, x: int, step: int) -> None:
        (self.gates / f"step{step}-{x}").touch()

    def release(self) -> None:
        (self.gates / "release").touch()

    def running(self) -> dict[int, str]:
        """x -> trial id of the running trials."""
        return {json.loads(t["hyperParameters"][0])["parameters"]["x"]: t["trialJobId"]
                for t in get(self.port, "/api/v1/nni/trial-jobs") if t["status"] == "RUNNING"}


def call(port: int, method: str, route: str, body: Any = None) -> tuple[int, Any]:
    """(status, decoded JSON body) of a request to 127.0.0.1:port (JSON, as the guard requires
    of a request that changes something)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}{route}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def get(port: int, route: str) -> Any:
    status, answer = call(port, "GET", route)
    assert status == 200, answer
    return answer


def get_text(port: int, route: str) -> tuple[int, dict[str, str], str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{route}", timeout=30) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


class SocketClient:
    """A websocket client on a thread of its own, for synchronous tests: the messages
    received collect in ``messages`` (decoded); wait for them with ``wait_until``."""

    def __init__(self, port: int, query: str = "") -> None:
        self.messages: list[dict[str, Any]] = []
        self.closed = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="test-websocket", daemon=True)
        self._thread.start()
        url = f"ws://127.0.0.1:{port}/api/v1/expmgr/ws{query}"
        self._connection = asyncio.run_coroutine_threadsafe(self._connect(url), self._loop).result(30)
        asyncio.run_coroutine_threadsafe(self._read(), self._loop)

    async def _connect(self, url: str) -> tornado.websocket.WebSocketClientConnection:
        return await tornado.websocket.websocket_connect(url)

    async def _read(self) -> None:
        while (message := await self._connection.read_message()) is not None:
            self.messages.append(json.loads(message))
        self.closed.set()

    def send(self, message: dict[str, Any]) -> None:
        self._loop.call_soon_threadsafe(self._connection.write_message, json.dumps(message))

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [message for message in list(self.messages) if message["type"] == kind]

    def close(self) -> None:
        """Close the connection and stop the client's thread; idempotent."""
        if self._loop.is_closed():
            return
        if not self.closed.is_set():
            self._loop.call_soon_threadsafe(self._connection.close)
            self.closed.wait(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


@pytest.fixture
def sockets():
    """Open websocket clients with ``sockets(port, query="")``; all closed after the test."""
    opened: list[SocketClient] = []

    def open_socket(port: int, query: str = "") -> SocketClient:
        client = SocketClient(port, query)
        opened.append(client)
        return client

    yield open_socket
    for client in opened:
        client.close()
