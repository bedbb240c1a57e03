"""Shared fixtures: a temporary experiments home, trial scripts, condition waits, a local
S3 server (tests/helpers/s3_server.py), and a check that no test leaves a child process behind."""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest
from tests.helpers.common import REPO, fixture_process_roots
from tests.helpers.s3_server import s3_server, s3_server_module  # noqa: F401 - fixtures for every folder

# A shell runs a command started with "&" with SIGINT ignored, and processes inherit that:
# the tests that Ctrl+C an experiment need SIGINT at its default in what they start.
signal.signal(signal.SIGINT, signal.default_int_handler)


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


LEFTOVER_GRACE = 10.0
"""Seconds a test's processes have to end on their own after it, before they count as left behind."""


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


