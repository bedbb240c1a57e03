"""A dispatcher process spoken to over its framed protocol: the ``dispatcher`` fixture that
starts one, and ``ask`` for one message and its answer."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from expmgr.dispatcher.protocol import read_frame, write_frame


@pytest.fixture
def dispatcher(tmp_path: Path):
    log = tmp_path / "dispatcher.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "expmgr.dispatcher", "--log-file", str(log), "--log-level", "debug"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(log, "ab"))
    yield process, log
    if process.poll() is None:
        process.stdin.close()
        process.wait(timeout=30)


def ask(process: subprocess.Popen, message: dict) -> dict:
    write_frame(process.stdin, message)
    return read_frame(process.stdout)
