"""Running ``expctl create`` as a user does (a command, a project folder with a config): the
command line, a foreground create started in the background, and a base config."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.common import REPO


def start_create(project: Path, home: Path, *, extra_env: dict[str, str] | None = None,
                 foreground_only: bool = False, **popen: object) -> subprocess.Popen:
    """``expctl create --foreground --exit-when-done`` on project/config.yml, as a running
    process (``foreground_only``: without --exit-when-done, it serves after DONE)."""
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO), **(extra_env or {})}
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([sys.executable, "-m", "expmgr.cli", "create", "--config", "config.yml", "--port", "0",
                             "--foreground", *([] if foreground_only else ["--exit-when-done"])],
                            cwd=project, env=env, text=True, **popen)


def expctl(*args: str, home: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "expmgr.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


BASE = """\
searchSpaceFile: space.json
trialCommand: python3 trial.py
trialConcurrency: 1
maxTrialNumber: 2
tuner:
  name: Random
"""
