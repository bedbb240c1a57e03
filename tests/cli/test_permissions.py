"""What ``expctl create`` writes is readable by its owner only: the experiments' home,
each experiment's folder and its subfolders 0700, the registry and the experiment's
database files 0600, whatever the umask."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from tests.helpers.cli_create import BASE
from tests.helpers.common import REPO


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_experiment_folders_are_0700_and_databases_0600_even_with_umask_0(tmp_path: Path):
    (tmp_path / "trial.py").write_text("import expmgr\nexpmgr.report_final_result(1.0)\n")
    (tmp_path / "space.json").write_text('{"x": {"_type": "uniform", "_value": [0, 1]}}')
    (tmp_path / "config.yml").write_text(BASE)
    home = tmp_path / "home"
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-m", "expmgr.cli", "create", "--config", "config.yml", "--port", "0",
                             "--foreground", "--exit-when-done"], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=120,
                            preexec_fn=lambda: os.umask(0))  # the most open umask there is
    assert result.returncode == 0, result.stderr
    (root,) = [path for path in home.iterdir() if path.is_dir()]
    for folder in (home, root, root / "db", root / "logs", root / "trials"):
        assert _mode(folder) == 0o700, f"{folder}: {oct(_mode(folder))}"
    databases = [path for path in (*root.glob("db/experiment.sqlite*"), *home.glob("registry.sqlite*"))]
    assert {path.name for path in databases} >= {"experiment.sqlite", "registry.sqlite"}
    for database in databases:
        assert _mode(database) == 0o600, f"{database}: {oct(_mode(database))}"
    # Trials' folders and logs are made as before; the 0700 experiment folder above them
    # is what keeps other users out.
    trial_files = [path for path in (root / "trials").rglob("*")]
    assert trial_files and all(root in path.parents for path in trial_files)
