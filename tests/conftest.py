"""Shared fixtures: a temporary experiments home, trial scripts, condition waits,
and a check that no test leaves a child process behind."""
from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path
from typing import Callable

import psutil
import pytest

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


def pytest_configure(config: pytest.Config) -> None:
    """Trial and dispatcher processes import this checkout's expmgr, however it was installed."""
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))


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


@pytest.fixture(autouse=True)
def no_child_process_left_behind():
    """Every process a test starts, it stops."""
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    def leftovers() -> list[psutil.Process]:
        return [p for p in psutil.Process().children(recursive=True)
                if p.pid not in before and p.status() != psutil.STATUS_ZOMBIE]
    deadline = time.monotonic() + 10
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.05)
    left = leftovers()
    for process in left:
        process.kill()
    assert not left, f"processes left behind: {[(p.pid, p.cmdline()) for p in left]}"


PYTHON = sys.executable
ENV_WITH_REPO = {**os.environ, "PYTHONPATH": str(REPO)}
