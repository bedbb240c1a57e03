"""The Ray service on a cluster that scales (``expmgr/training/ray_autoscale.py``), against a
real autoscaling cluster on this machine (``tests/helpers/ray_autoscaling_cluster.py``: Ray's
own autoscaler adding real nodes): trials asking for what no node has wait, with the reason
stored, while the autoscaler adds a node; the limit passing ends the experiment in ERROR; the
request to the autoscaler is withdrawn at the end; and the private Ray state that tells a
cluster with an autoscaler from one without (which still refuses such trials at start)."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from expmgr import Experiment, ExperimentConfig
from tests.helpers.common import REPO, wait_until, write_script
from tests.helpers.ray_autoscaling_cluster import SCALED_RESOURCE, AutoscalingRayCluster, autoscaling_cluster  # noqa: F401
from tests.helpers.ray_cluster import RayCluster, ray_cluster, ray_cluster_module  # noqa: F401

DEADLINE = 180.0
"""Seconds an experiment has: the autoscaler's node takes ~10-30 s to join on the busy machine."""


def scaled_config(cluster: AutoscalingRayCluster, code_dir: Path, home: Path, resources: dict[str, Any],
                  scale_up_timeout: str) -> ExperimentConfig:
    return ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1, 2]}},
        trial_command="python3 trial.py", trial_code_directory=code_dir, tuner={"name": "GridSearch"},
        experiment_working_directory=home, trial_concurrency=2, max_trial_number=2, trial_grace_period=5,
        training_service={"platform": "ray", "address": cluster.address, "trialResources": resources,
                          "scaleUpTimeout": scale_up_timeout})


def waiting_reasons(experiment: Experiment) -> dict[str, str | None]:
    """Each trial's stored waiting reason (what the web UI and `expctl trial ls` show)."""
    if not experiment.paths.database.exists():
        return {}
    try:
        with sqlite3.connect(experiment.paths.database) as db:
            return dict(db.execute("SELECT trial_id, waiting_reason FROM trials").fetchall())
    except sqlite3.OperationalError:  # its schema not written yet
        return {}


def hosts_of(experiment: Experiment) -> set[str | None]:
    with sqlite3.connect(experiment.paths.database) as db:
        return {host for (host,) in db.execute("SELECT host FROM attempts").fetchall()}


def standing_request(address: str) -> Any:
    """The resources asked of the autoscaler now (Ray's request channel in the GCS's KV)."""
    code = ("import json, sys\nfrom ray._raylet import GcsClient\nfrom ray._private import ray_constants\n"
            f"value = GcsClient(address={address!r}).internal_kv_get("
            "ray_constants.AUTOSCALER_RESOURCE_REQUEST_CHANNEL, namespace=None)\n"
            "print(json.dumps(None if value is None else json.loads(value)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def test_trials_asking_what_no_node_has_wait_with_the_reason_while_the_autoscaler_adds_a_node(
        autoscaling_cluster, tmp_path, code_dir):
    assert not autoscaling_cluster.worker_node_ids(), "the cluster starts with its head alone"
    write_script(code_dir, "trial.py", """
        import expmgr
        params = expmgr.get_next_parameter()
        expmgr.report_final_result(params["x"])
    """)
    experiment = Experiment(scaled_config(autoscaling_cluster, code_dir, tmp_path / "home",
                                          {"cpu": 1, SCALED_RESOURCE: 1}, scale_up_timeout="10m"))
    reason = "waiting for the Ray autoscaler to add a node with cpu: 1, scaled: 1 (up to trainingService.scaleUpTimeout, 10m)"
    try:
        with autoscaling_cluster.autoscaler_paused():   # no node comes before the trials wait
            experiment.start(port=0)
            waiting = wait_until(lambda: len(waiting_reasons(experiment)) == 2 and waiting_reasons(experiment),
                                 DEADLINE, "two trials waiting")
            assert set(waiting.values()) == {reason}, waiting
        assert experiment.wait(timeout=DEADLINE)
    finally:
        experiment.stop()
    assert experiment.get_status() == "DONE", experiment.get_error()
    assert {t.status for t in experiment.list_trial_jobs()} == {"SUCCEEDED"}
    assert not any(waiting_reasons(experiment).values()), "a started trial's reason is cleared"
    assert autoscaling_cluster.worker_node_ids(), "the autoscaler added a node"
    assert "head" not in hosts_of(experiment), "the trials ran on the added nodes"
    assert standing_request(autoscaling_cluster.address) == [], "the request is withdrawn at the end"


def _run(experiment: Experiment) -> bool:
    experiment.start(port=0)
    return experiment.wait(timeout=DEADLINE)


def test_when_the_autoscaler_adds_no_such_node_within_the_limit_the_experiment_ends_in_error(
        autoscaling_cluster, tmp_path, code_dir):
    write_script(code_dir, "trial.py", "open('started', 'w').close()\n")
    # The autoscaler's node type has scaled: 1; no node it can add has 2.
    experiment = Experiment(scaled_config(autoscaling_cluster, code_dir, tmp_path / "home",
                                          {"cpu": 1, SCALED_RESOURCE: 2}, scale_up_timeout="15s"))
    try:
        assert _run(experiment)
    finally:
        experiment.stop()
    assert experiment.get_status() == "ERROR"
    error = experiment.get_error()
    assert ("the Ray autoscaler added no node with the trialResources a trial asks for (cpu: 1, scaled: 2) "
            "within trainingService.scaleUpTimeout (15s)") in error and "Traceback" not in error, error
    assert "\n" not in error.strip(), f"one line: {error!r}"
    assert not (code_dir / "started").exists()
    assert standing_request(autoscaling_cluster.address) == [], "the request is withdrawn at the end"


HAS_AUTOSCALER = """
import sys, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
from expmgr.training.ray_autoscale import has_autoscaler
print(has_autoscaler())
"""


def has_autoscaler_of(address: str) -> str:
    done = subprocess.run([sys.executable, "-c", HAS_AUTOSCALER, address], capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(Path.home()),
                                            "RAY_AUTH_MODE": "disabled"})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_ray_says_which_cluster_has_an_autoscaler(autoscaling_cluster, ray_cluster):
    """Fails when a Ray release changes the private state ``has_autoscaler`` reads."""
    assert has_autoscaler_of(autoscaling_cluster.address) == "True"
    assert has_autoscaler_of(ray_cluster.address) == "False"
