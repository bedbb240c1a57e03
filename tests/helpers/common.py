"""What almost every test needs: the checkout's path, waits on a condition with a deadline,
trial scripts, a running trial's token, NNI's REST API, and the processes fixtures own
(tests/conftest.py checks that no test leaves a process behind)."""
from __future__ import annotations

import json
import os
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

import psutil


REPO = Path(__file__).resolve().parents[2]


def wait_until(condition: Callable[[], object], timeout: float = 30.0, what: str = "condition") -> object:
    """Poll ``condition`` until it returns something truthy; fail the test after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def trial_token(trial_id: str) -> str:
    """A running trial's token, read from its process environment as the trial itself does."""
    for process in psutil.Process().children(recursive=True):
        try:
            env = process.environ()
        except (psutil.AccessDenied, psutil.NoSuchProcess):
            continue
        if env.get("EXPMGR_TRIAL_ID") == trial_id:
            return env["EXPMGR_TRIAL_TOKEN"]
    raise AssertionError(f"no process of trial {trial_id}")


def write_script(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(body))
    return path


def write_json(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data))
    return path


fixture_process_roots: set[int] = set()
"""Pids of processes a module- or session-scoped fixture started and will stop itself (a Ray
cluster's nodes): they and their descendants are the fixture's, not a test's, even those
started during a test (Ray starts worker processes as the work asks)."""


PYTHON = sys.executable


ENV_WITH_REPO = {**os.environ, "PYTHONPATH": str(REPO)}


def rest_call(port: int, method: str, route: str, body: object = None) -> tuple[int, object]:
    """``method route`` of NNI's REST API on 127.0.0.1:``port``: (HTTP status, JSON answer)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/nni/{route}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def refuses_connections(port: int) -> bool:
    """Whether nothing listens on 127.0.0.1:``port`` any more (the server closed)."""
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/nni/check-status", timeout=5)
    except urllib.error.URLError as error:
        return isinstance(error.reason, ConnectionRefusedError)
    return False
