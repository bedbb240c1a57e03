"""Shared fixtures: a temporary experiments home, trial scripts, condition waits,
and a check that no test leaves a child process behind."""
from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

import psutil
import pytest

# A shell runs a command started with "&" with SIGINT ignored, and processes inherit that:
# the tests that Ctrl+C an experiment need SIGINT at its default in what they start.
signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parents[1]


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


def pytest_configure(config: pytest.Config) -> None:
    """Trial and dispatcher processes import this checkout's expmgr, however it was installed;
    `python3` in a trial command is the test interpreter, as if its environment were activated
    (trials keep the PATH they are given)."""
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    os.environ["PATH"] = os.pathsep.join(filter(None, [os.path.dirname(sys.executable), os.environ.get("PATH")]))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty EXPMGR_HOME for this test."""
    path = tmp_path / "home"
    monkeypatch.setenv("EXPMGR_HOME", str(path))
    return path


@pytest.fixture
def code_dir(tmp_path: Path) -> Path:
    path = tmp_path / "code"
    path.mkdir()
    return path


def write_script(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(body))
    return path


def write_json(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data))
    return path


LEFTOVER_GRACE = 10.0
"""Seconds a test's processes have to end on their own after it, before they count as left behind."""

fixture_process_roots: set[int] = set()
"""Pids of processes a module- or session-scoped fixture started and will stop itself (a Ray
cluster's nodes): they and their descendants are the fixture's, not a test's, even those
started during a test (Ray starts worker processes as the work asks)."""


@pytest.fixture(autouse=True)
def no_child_process_left_behind():
    """Every process a test starts, it stops: one still running after the test is named
    (pid and command line), killed, and fails the test."""
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    def leftovers() -> list[psutil.Process]:
        return [p for p in psutil.Process().children(recursive=True)
                if p.pid not in before and _alive(p) and not _of_fixture(p)]
    deadline = time.monotonic() + LEFTOVER_GRACE
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.05)
    # Read each leftover's command line before killing it: a killed process has none.
    named = [(process, _command_line(process)) for process in leftovers()]
    for process, _ in named:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    assert not named, "processes left behind: " + "; ".join(
        f"pid {process.pid}: {command}" for process, command in named)


@pytest.fixture(autouse=True)
def no_experiment_left_serving(no_child_process_left_behind):
    """An experiment a test started in this process and did not stop (its server stays
    after its search, as NNI's) is stopped after the test, as the interpreter's exit would;
    before the check for processes left behind. Those of wider-scoped fixtures, made
    before the test, are left to them."""
    from expmgr.experiment.experiment import _experiments
    before = set(_experiments.keys())
    yield
    for exp_id, experiment in list(_experiments.items()):
        if exp_id not in before and experiment._manager is not None:  # started here (not viewed, not connected)
            experiment.stop()


def _of_fixture(process: psutil.Process) -> bool:
    """Whether the process is, or descends from, one of ``fixture_process_roots``."""
    try:
        return bool(fixture_process_roots & {process.pid, *(p.pid for p in process.parents())})
    except psutil.NoSuchProcess:
        return False


def _alive(process: psutil.Process) -> bool:
    """Whether the process still runs (not ended, not a zombie waiting to be reaped)."""
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _command_line(process: psutil.Process) -> str:
    """The process's command line, or why it cannot be read (it may just have ended)."""
    try:
        return " ".join(process.cmdline()) or f"({process.name()})"
    except psutil.Error as error:
        return f"(command line unreadable: {type(error).__name__})"


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
