"""The download routes under ``/api/v1/expmgr/download/``: results as ``expctl experiment
export`` writes them, the config, each log file; attachments named after the experiment."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from ruamel.yaml import YAML

from tests.helpers.common import REPO
from tests.helpers.server import get

DOWNLOAD = "/api/v1/expmgr/download"


def fetch(port: int, route: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{route}", timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_results_download_is_the_export_of_expctl(filled_view, tmp_path, fmt):
    status, headers, body = fetch(filled_view.port, f"{DOWNLOAD}/results.{fmt}")
    assert status == 200
    assert headers["Content-Disposition"] == f"attachment; filename=fill0000-results.{fmt}"
    assert headers["Content-Type"].startswith("text/csv" if fmt == "csv" else "application/json")
    env = {**os.environ, "EXPMGR_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    exported = subprocess.run([sys.executable, "-m", "expmgr.cli", "experiment", "export", "fill0000",
                               "--format", fmt], env=env, capture_output=True, timeout=120, check=True).stdout
    assert body == exported
    if fmt == "csv":
        assert body.decode().splitlines()[0].startswith("trialJobId,") and len(body.decode().splitlines()) == 31


def test_config_downloads_as_yaml_and_json(filled_view):
    config = get(filled_view.port, "/api/v1/nni/experiment")["params"]
    status, headers, body = fetch(filled_view.port, f"{DOWNLOAD}/config.yml")
    assert status == 200 and headers["Content-Disposition"] == "attachment; filename=fill0000-config.yml"
    assert YAML(typ="safe").load(body.decode()) == config
    status, headers, body = fetch(filled_view.port, f"{DOWNLOAD}/config.json")
    assert status == 200 and headers["Content-Disposition"] == "attachment; filename=fill0000-config.json"
    assert json.loads(body) == config


def test_log_downloads_are_the_whole_files_as_attachments(stepped):
    port = stepped.port
    x, trial_id = sorted(stepped.running().items())[0]
    stepped.step(x, 0)
    expected = f"trial {x} started\nstep 0\n".encode()

    def downloaded() -> bytes:
        return fetch(port, f"{DOWNLOAD}/logs/stdout?trial={trial_id}")[2]
    from tests.helpers.common import wait_until
    wait_until(lambda: downloaded() == expected, what="the step in the downloaded stdout")
    status, headers, _ = fetch(port, f"{DOWNLOAD}/logs/stdout?trial={trial_id}")
    assert headers["Content-Disposition"] == f"attachment; filename={stepped.experiment.id}-{trial_id}-stdout.log"
    status, headers, body = fetch(port, f"{DOWNLOAD}/logs/experiment.log")
    assert status == 200 and headers["Content-Disposition"] == (
        f"attachment; filename={stepped.experiment.id}-experiment.log")
    assert b"INFO" in body


@pytest.mark.parametrize("route, code, message", [
    ("/logs/passwd?trial=f0001", 400, "file: expected one of stdout, stderr, trial.log, experiment.log"),
    ("/logs/..%2F..%2Fdb.sqlite", 400, "file: expected one of"),
    ("/logs/stdout", 400, "trial: stdout is a trial's file; name the trial"),
    ("/logs/stdout?trial=nosuch", 404, "no trial 'nosuch'"),
    ("/results.xml", 404, "format: expected one of csv, json, got 'xml'"),
    ("/config.toml", 404, "format: expected one of yml, json, got 'toml'"),
])
def test_bad_download_names_are_refused_naming_why(filled_view, route, code, message):
    status, _, body = fetch(filled_view.port, DOWNLOAD + route)
    assert status == code and json.loads(body)["error"].startswith(message)
