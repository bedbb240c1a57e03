"""``expctl ui``: the experiments page of the registry served until SIGTERM or Ctrl+C, leaving
no process behind; a port in use is a one-line error with exit status 2."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.helpers.common import REPO
from tests.helpers.registry_fill import RegistryFill


def start_ui(home: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    env.pop("EXPMGR_TOKEN", None)
    return subprocess.Popen([sys.executable, "-m", "expmgr.cli", "ui", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_ui_serves_the_registry_until_sigterm_and_leaves_nothing_behind(tmp_path: Path):
    fill = RegistryFill(tmp_path / "home", tmp_path)
    exp_id = fill.done()
    ui = start_ui(fill.home, "--port", "0", "--url-prefix", "/all")
    try:
        assert ui.stdout is not None
        first = ui.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/all", first)
        assert match, first
        base = f"http://127.0.0.1:{match.group(1)}/all"
        with urllib.request.urlopen(f"{base}/api/v1/expmgr/experiments", timeout=30) as response:
            listed = json.loads(response.read())["experiments"]
        assert [(record["id"], record["state"], record["open"]) for record in listed] == [
            (exp_id, "DONE", f"/all/experiments/{exp_id}/")]
        with urllib.request.urlopen(f"{base}/", timeout=30) as response:
            assert b'<meta name="expmgr-mode" content="home"' in response.read()
        with urllib.request.urlopen(f"{base}/experiments/{exp_id}/api/v1/nni/experiment", timeout=30) as response:
            assert json.loads(response.read())["id"] == exp_id  # served read-only by this process
        ui.send_signal(signal.SIGTERM)
        assert ui.wait(timeout=30) == 0
    finally:
        if ui.poll() is None:
            ui.kill()
            ui.wait()
    assert ui.stderr is not None and "Traceback" not in ui.stderr.read()


def test_ui_on_a_port_in_use_says_so_in_one_line(tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ui = start_ui(tmp_path / "home", "--port", str(port))
        out, err = ui.communicate(timeout=60)
    assert ui.returncode == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"expctl ui: --port {port}: cannot listen on 127.0.0.1:{port}")


def test_ui_stops_on_ctrl_c(tmp_path: Path):
    ui = start_ui(tmp_path / "home", "--port", "0")
    try:
        assert ui.stdout is not None and "all experiments of" in ui.stdout.readline()
        ui.send_signal(signal.SIGINT)
        assert ui.wait(timeout=30) == 0
    finally:
        if ui.poll() is None:
            ui.kill()
            ui.wait()
