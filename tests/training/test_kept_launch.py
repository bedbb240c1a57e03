"""Launching under a keeper (``reattachWindow``) fails as a launch without one does: a command
that cannot be executed is refused with the system's reason, a program not found ends with the
shell's 127, and a keeper's trial is told started with the trial's own pid. Real services."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psutil
import pytest

from expmgr.training import TrainingServiceError
from tests.helpers.contract_service import SERVICE_CONFIGS, Context, run_service


def _launched(tmp_path: Path, service: str, command: str, script: str | None = None) -> Any:
    """What launching ``command`` did: the error's message, or the trial's exit event."""
    outcome: list[Any] = []

    async def test(c: Context) -> None:
        if script is not None:
            c.write_code("script.sh", script)   # written without the execute bit
        try:
            await c.service.launch(c.launch_of("t", command))
        except TrainingServiceError as error:
            outcome.append(str(error))
            return
        outcome.append(await c.until(lambda: c.events.exit_of("t"), "its end"))

    run_service(service, tmp_path, test, training_service=SERVICE_CONFIGS[service])
    return outcome[0]


@pytest.mark.parametrize("command, script", [("./script.sh", "#!/bin/sh\nexit 0\n"),
                                             ("no-such-program-for-expmgr --flag", None)])
def test_a_launch_under_a_keeper_fails_as_one_without(tmp_path: Path, command: str, script: str | None):
    (tmp_path / "cold").mkdir()
    (tmp_path / "kept").mkdir()
    cold = _launched(tmp_path / "cold", "local", command, script)
    kept = _launched(tmp_path / "kept", "local-kept", command, script)
    assert kept == cold
    if script is not None:
        assert "Permission denied" in kept
    else:
        assert kept == ("exited", "t", 1, 127, None)


def test_a_kept_trial_is_told_started_with_its_own_pid_under_its_keeper(tmp_path: Path):
    async def test(c: Context) -> None:
        c.write_code("waiter.py", "import os, time\nopen('pid', 'w').write(str(os.getpid()))\ntime.sleep(60)\n")
        await c.service.launch(c.launch_of("t", "python3 waiter.py"))
        pid_file = c.code / "pid"
        await c.until(lambda: pid_file.exists() and pid_file.read_text(), "the trial's pid")
        pid, _ = c.events.pids[("t", 1)]
        assert pid == int(pid_file.read_text())
        keeper = psutil.Process(pid).parent()
        assert keeper is not None and "keeper.py" in " ".join(keeper.cmdline())
        assert os.getpgid(pid) == pid != os.getpgid(keeper.pid), "the trial leads its own group, without its keeper"

    run_service("local-kept", tmp_path, test)
