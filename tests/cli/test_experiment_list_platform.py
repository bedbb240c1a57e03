"""``expctl experiment list`` shows each experiment's platform, as stored with it (NNI's
``nnictl experiment list`` has the column too): a ``platform`` key in ``--json`` and a
PLATFORM column in the table. Real expctl processes on finished experiments."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from expmgr.layout import ExperimentPaths
from tests.helpers.common import REPO
from tests.helpers.fill import fill_experiment


def expctl(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "expmgr.cli", *args], cwd=home.parent, env=env,
                          capture_output=True, text=True, timeout=120)


def test_experiment_list_shows_the_platform_stored_with_each_experiment(tmp_path: Path):
    home = tmp_path / "home"
    local = fill_experiment(home, trials=2, metrics_per_trial=1, exp_id="local001")
    on_ray = fill_experiment(home, trials=2, metrics_per_trial=1, exp_id="ray00001")
    conn = sqlite3.connect(ExperimentPaths(home / on_ray).database)   # as a Ray experiment's store says
    conn.execute("UPDATE experiment SET platform = 'ray'")
    conn.commit()
    conn.close()

    listed = expctl(home, "experiment", "list", "--all", "--json")
    assert listed.returncode == 0, listed.stderr
    assert {row["id"]: row["platform"] for row in json.loads(listed.stdout)} == {local: "local", on_ray: "ray"}

    table = expctl(home, "experiment", "list", "--all")
    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header.split()[:5] == ["ID", "NAME", "STATUS", "PORT", "PLATFORM"]
    column = header.index("PLATFORM")
    assert {row.split()[0]: row[column:].split()[0] for row in rows} == {local: "local", on_ray: "ray"}
