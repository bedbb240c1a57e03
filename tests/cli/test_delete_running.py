"""``expctl experiment delete`` of a running experiment is refused (docs/cli.md): non-zero
exit, a message saying to stop it first, and the experiment still running with its
folder intact."""
from __future__ import annotations

import json
import os
import signal

import psutil

from expmgr.states import ExperimentState
from tests.helpers.cli_daemon import created_id, entry, expctl, project  # noqa: F401 - project is a fixture
from tests.helpers.common import wait_until


def test_deleting_a_running_experiment_is_refused_and_leaves_it_running(project):  # noqa: F811
    cwd, home = project
    (cwd / "trial.py").write_text("import time\ntime.sleep(120)\n")
    exp_id = created_id(expctl(home, cwd, "create", "--config", "config.yml", "--port", "0"))

    def statuses() -> list[str]:
        return [row["status"] for row in json.loads(expctl(home, cwd, "trial", "ls", exp_id, "--json").stdout)]
    wait_until(lambda: statuses().count("RUNNING") == 2, what="two running trials")
    files_before = sorted(path.relative_to(home / exp_id) for path in (home / exp_id).rglob("*"))

    daemon = entry(home, exp_id).pid
    try:
        refused = expctl(home, cwd, "experiment", "delete", exp_id, "--yes")
    finally:
        if not (home / exp_id).exists() and psutil.pid_exists(daemon):
            os.kill(daemon, signal.SIGTERM)  # a wrong delete unlisted it: the project fixture cannot stop it
    assert refused.returncode != 0
    assert f"experiment {exp_id} is running; stop it first (expctl stop {exp_id})" in refused.stderr
    assert "deleted" not in refused.stdout
    # Still running, still listed, nothing removed.
    assert entry(home, exp_id).status == ExperimentState.RUNNING and psutil.pid_exists(entry(home, exp_id).pid)
    assert statuses() == ["RUNNING", "RUNNING"]
    assert set(files_before) <= {path.relative_to(home / exp_id) for path in (home / exp_id).rglob("*")}
    assert [row["id"] for row in json.loads(expctl(home, cwd, "experiment", "list", "--json").stdout)] == [exp_id]

    assert expctl(home, cwd, "stop", exp_id).returncode == 0
    deleted = expctl(home, cwd, "experiment", "delete", exp_id, "--yes")
    assert deleted.returncode == 0 and not (home / exp_id).exists()
