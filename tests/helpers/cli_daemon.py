"""``expctl`` against a daemonised experiment: the command, a ``project`` fixture (a folder
with a config and trial), the id ``create`` printed, and the registry entry it made."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from expmgr.store.registry import Registry, RegistryEntry
from tests.helpers.common import REPO


CONFIG = """\
searchSpace:
  x: {_type: choice, _value: [1, 2, 3, 4]}
trialCommand: python3 trial.py
trialConcurrency: 2
maxTrialNumber: 4
trialGracePeriod: 2s
tuner:
  name: GridSearch
"""


@pytest.fixture
def project(tmp_path: Path):
    (tmp_path / "config.yml").write_text(CONFIG)
    (tmp_path / "trial.py").write_text("import expmgr\nexpmgr.report_final_result(expmgr.get_next_parameter()['x'])\n")
    home = tmp_path / "home"
    yield tmp_path, home
    for entry in Registry(home).entries():  # no daemon outlives its test
        if entry.pid and psutil.pid_exists(entry.pid):
            os.kill(entry.pid, signal.SIGKILL)


def expctl(home: Path, cwd: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    """expctl's output to a pipe (where it prints nnictl's forms), ``stdin`` its input (by
    default none: a command that asks y/N reads the end of its input)."""
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "expmgr.cli", *args], cwd=cwd, env=env, input=stdin,
                          capture_output=True, text=True, timeout=120)


def created_id(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout.split()[1]


def entry(home: Path, exp_id: str) -> RegistryEntry:
    return Registry(home).get(exp_id)
