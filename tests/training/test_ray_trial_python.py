"""The trial's interpreter on Ray (``trainingService.trialPython``), on the real two-node test
cluster: ``ray`` runs ``python3`` as the slot's own Ray worker (the driver's Python, or the
runtime env's), ``path`` the first ``python3`` of the node's PATH, here a different one put
first through ``runtimeEnv.env_vars``."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from expmgr import Experiment, ExperimentConfig
from tests.helpers.common import write_script
from tests.helpers.ray_cluster import RayCluster, ray_cluster, ray_cluster_module  # noqa: F401

TRIAL = """
    import sys
    with open("executable.txt", "w") as f:
        f.write(sys.executable)
"""


def path_python(folder: Path) -> Path:
    """A ``python3`` of its own in ``folder``: a link to this Python's base interpreter, which
    reports the link's path as its ``sys.executable`` (not a virtual environment's)."""
    folder.mkdir()
    link = folder / "python3"
    link.symlink_to(getattr(sys, "_base_executable", None) or os.path.realpath(sys.executable))
    return link


def run_trial(cluster: RayCluster, code_dir: Path, home: Path, bin_dir: Path, trial_python: str | None) -> str:
    write_script(code_dir, "trial.py", TRIAL)
    service = {"platform": "ray", "address": cluster.address, "trialResources": {"cpu": 1},
               "runtimeEnv": {"env_vars": {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}}}
    if trial_python is not None:
        service["trialPython"] = trial_python
    experiment = Experiment(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1]}}, trial_command="python3 trial.py",
        trial_code_directory=code_dir, tuner={"name": "GridSearch"}, experiment_working_directory=home,
        trial_concurrency=1, max_trial_number=1, training_service=service))
    assert experiment.run(port=0)
    assert [t.status for t in experiment.list_trial_jobs()] == ["SUCCEEDED"]
    return (code_dir / "executable.txt").read_text()


@pytest.mark.parametrize("trial_python", ["ray", None])
def test_python3_in_a_trial_command_is_the_ray_workers_interpreter_by_default(ray_cluster, tmp_path, code_dir,
                                                                               trial_python):
    link = path_python(tmp_path / "bin")
    executable = run_trial(ray_cluster, code_dir, tmp_path / "home", tmp_path / "bin", trial_python)
    # The nodes run Ray from this virtual environment (its python or python3): the slot workers' Python.
    assert executable != str(link) and Path(executable).parent == Path(sys.executable).parent, executable


def test_trial_python_path_runs_the_first_python3_of_the_nodes_path(ray_cluster, tmp_path, code_dir):
    link = path_python(tmp_path / "bin")
    assert run_trial(ray_cluster, code_dir, tmp_path / "home", tmp_path / "bin", "path") == str(link)
