"""NNI's ``experiments-info`` reports each experiment's platform as stored when it was
created (the registry's, or for a registry row from before the registry kept it, the
experiment's profile): a Ray experiment says ``ray``. Real registry, real stores; no Ray
cluster is needed, the stored experiment alone decides."""
from __future__ import annotations

import importlib.util
import sqlite3
import time
from pathlib import Path

import pytest

from expmgr import Experiment, ExperimentConfig
from expmgr.layout import ExperimentPaths
from expmgr.server.experiments_info import experiments_info
from expmgr.states import ExperimentState
from expmgr.store import ExperimentProfile, create_store, open_store
from expmgr.store.registry import Registry, RegistryEntry


def stored_experiment(home: Path, exp_id: str, platform: str, registry_platform: str | None) -> None:
    """A DONE experiment of ``platform`` in ``home``: its store, and its registry row saying
    ``registry_platform`` (None: as an expmgr before the registry kept it)."""
    paths = ExperimentPaths(home / exp_id)
    paths.create()
    config = {"trialCommand": "true", "trialConcurrency": 1, "trainingService": {"platform": platform}}
    with create_store(paths, ExperimentProfile(
            id=exp_id, name=exp_id, config=config, status=ExperimentState.DONE, error=None,
            start_time=time.time() - 5, end_time=time.time(), port=None, log_dir=str(paths.root),
            platform=platform, minimizes=False)):
        pass
    Registry(home).add(RegistryEntry(id=exp_id, name=exp_id, dir=str(paths.root), port=None, pid=None,
                                     status=ExperimentState.DONE, start_time=time.time() - 5, end_time=time.time(),
                                     platform=registry_platform))


def test_experiments_info_reports_ray_for_a_ray_experiment_and_local_for_a_local_one(tmp_path: Path):
    home = tmp_path / "home"
    stored_experiment(home, "ray00001", "ray", "ray")
    stored_experiment(home, "local001", "local", "local")
    platforms = {record["id"]: record["platform"] for record in experiments_info(Registry(home))}
    assert platforms == {"ray00001": "ray", "local001": "local"}


def test_a_registry_row_without_a_platform_reports_the_one_its_store_keeps(tmp_path: Path):
    home = tmp_path / "home"
    stored_experiment(home, "ray00002", "ray", None)
    # Its config no longer says ray: the platform stored with the experiment is what counts.
    conn = sqlite3.connect(ExperimentPaths(home / "ray00002").database)
    conn.execute("UPDATE experiment SET config_json = json_remove(config_json, '$.trainingService')")
    conn.commit()
    conn.close()
    [record] = experiments_info(Registry(home))
    assert record["platform"] == "ray"


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="a Ray config needs Ray installed")
def test_an_experiment_started_on_ray_is_stored_and_reported_as_ray(tmp_path: Path, code_dir: Path):
    # No cluster answers at that address: the experiment ends in ERROR, its platform is stored anyway.
    home = tmp_path / "home"
    config = ExperimentConfig(search_space={"x": {"_type": "choice", "_value": [1]}}, trial_command="python3 trial.py",
                              trial_code_directory=code_dir, tuner={"name": "GridSearch"}, trial_concurrency=1,
                              experiment_working_directory=home,
                              training_service={"platform": "ray", "address": "127.0.0.1:1"})
    experiment = Experiment(config)
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=120)
    finally:
        experiment.stop()
    [record] = experiments_info(Registry(home))
    assert record["id"] == experiment.id and record["platform"] == "ray"
    assert Registry(home).get(experiment.id).platform == "ray"
    with open_store(ExperimentPaths(home / experiment.id), readonly=True) as store:
        assert store.profile().platform == "ray"
