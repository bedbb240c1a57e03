"""A crashed experiment's page (issue 22, papercut 5): when the experiment's process is
SIGKILLed, its server stops answering, and the page says so instead of looking alive: the
state is unknown since then, the duration stops, the controls are off with the reason, and
it names `expctl resume <id>` and `expctl view <id>`."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import psutil
import pytest
from playwright.sync_api import expect

from expmgr.store.registry import Registry, RegistryEntry
from tests.helpers.common import REPO, wait_until

CONFIG = """\
experimentName: crash
searchSpace:
  x: {_type: choice, _value: [1, 2, 3, 4]}
trialCommand: python3 trial.py
trialConcurrency: 2
maxTrialNumber: 4
trialGracePeriod: 1s
tuner:
  name: GridSearch
"""

# Reports and waits until the file "release" exists (or two minutes pass).
TRIAL = """\
import os, time
import expmgr
x = expmgr.get_next_parameter()["x"]
expmgr.report_intermediate_result(x * 10)
deadline = time.monotonic() + 120
while not os.path.exists({release!r}) and time.monotonic() < deadline:
    time.sleep(0.05)
expmgr.report_final_result(x)
"""


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[RegistryEntry]:
    """An experiment started by ``expctl create`` (its own process, as a user starts one),
    with two trials running; after the test, it and every process of its tree are gone."""
    (tmp_path / "config.yml").write_text(CONFIG)
    (tmp_path / "trial.py").write_text(TRIAL.format(release=str(tmp_path / "release")))
    home = tmp_path / "home"
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    created = subprocess.run([sys.executable, "-m", "expmgr.cli", "create", "--config", "config.yml", "--port", "0"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert created.returncode == 0, created.stderr
    entry = Registry(home).get(created.stdout.split()[1])
    assert entry is not None and entry.port and entry.pid
    tree: list[psutil.Process] = []
    try:
        manager = psutil.Process(entry.pid)
        wait_until(lambda: len(manager.children(recursive=True)) >= 2, what="the trials to start")
        tree = [manager, *manager.children(recursive=True)]
        yield entry
    finally:
        (tmp_path / "release").touch()
        for process in tree:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        gone, alive = psutil.wait_procs(tree, timeout=30)
        assert not alive, f"left behind: {alive}"


def test_a_crashed_experiment_is_shown_unreachable_with_its_state_unknown_and_how_to_resume_it(ui, daemon):
    url = f"http://127.0.0.1:{daemon.port}/"
    ui.page.goto(url + "#/overview")
    expect(ui.get("status")).to_have_text("RUNNING")
    expect(ui.get("liveBadge")).to_be_visible()
    expect(ui.get("count", "RUNNING")).to_have_text("2")
    expect(ui.get("stopExperiment")).to_be_enabled()

    os.kill(daemon.pid, signal.SIGKILL)
    wait_until(lambda: not psutil.pid_exists(daemon.pid) or psutil.Process(daemon.pid).status() == psutil.STATUS_ZOMBIE,
               what="the experiment's process to die")

    expect(ui.get("status")).to_have_text("UNKNOWN")
    expect(ui.get("offlineBadge")).to_have_text(re.compile(r"^unreachable since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d$"))
    notice = ui.get("unreachableNotice")
    expect(notice).to_contain_text("has not answered since")
    expect(notice).to_contain_text("last known: RUNNING")
    expect(notice).to_contain_text(f"expctl resume {daemon.id}")
    expect(notice).to_contain_text(f"expctl view {daemon.id}")
    expect(ui.get("stopExperiment")).to_be_disabled()
    expect(ui.get("concurrencyInput")).to_be_disabled()
    expect(ui.get("controlsOffReason")).to_contain_text("does not answer")
    ui.screenshot("crashed")

    # the duration stays where the server stopped answering while the page keeps trying (a
    # few reconnections take seconds; a ticking duration would change each second)
    duration = ui.get("duration").inner_text()
    for _ in range(2):
        ui.page.wait_for_event("websocket", timeout=30_000)   # a reconnection attempt (backoff: 0.5 s, 1 s, ...)
    expect(ui.get("duration")).to_have_text(duration)
    expect(ui.get("status")).to_have_text("UNKNOWN")
