"""Platforms in one table (``expmgr.config.PLATFORMS``): reading a config, validating it,
resolving it, building its training service and NNI's v1 format each go by the table, so a
platform is one entry; the errors that list the platforms list the table's."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from expmgr.config import PLATFORMS, ConfigError, ExperimentConfig, Platform, ResolvedConfig
from expmgr.config._validate import _Canonicalizer
from expmgr.layout import ExperimentPaths
from expmgr.training import create_training_service, trial_files

from tests.helpers.config import write

RAY_INSTALLED = importlib.util.find_spec("ray") is not None
NO_EVENTS: Any = object()   # a service is only built here, never started: it tells nothing


REQUIRED = {"remote": {"machine_list": [{"host": "gpu1.example.org"}]}}
"""What a platform's section cannot do without, by platform."""
V1_REQUIRED = {"remote": "machineList: [{ip: gpu1.example.org}]\n"}


def config_of(tmp_path: Path, platform: str) -> ResolvedConfig:
    return ResolvedConfig.from_config(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1]}}, trial_command="python3 trial.py",
        trial_code_directory=tmp_path, trial_concurrency=1, tuner={"name": "Random"},
        training_service={"platform": platform, **REQUIRED.get(platform, {})}, experiment_working_directory=tmp_path))


def usable(platform: Platform) -> bool:
    return platform.name != "ray" or RAY_INSTALLED


@pytest.mark.parametrize("name", list(PLATFORMS))
def test_each_platform_is_read_checked_resolved_and_built_by_its_entry(tmp_path: Path, name: str) -> None:
    platform = PLATFORMS[name]
    if not usable(platform):
        pytest.skip("Ray is not installed")
    assert platform.section().platform == name == platform.resolved.platform
    assert callable(getattr(_Canonicalizer, platform.check)), f"{name}: its check {platform.check} is a validator method"
    assert isinstance(ExperimentConfig(name).training_service, platform.section), "NNI's ExperimentConfig('local')"
    resolved = config_of(tmp_path, name)
    assert isinstance(resolved.training_service, platform.resolved)
    files_module, files_class = platform.files.split(":")
    stored = trial_files(ExperimentPaths(tmp_path / "exp"), name)
    assert (type(stored).__module__, type(stored).__name__) == (files_module, files_class), (
        f"{name}: a stored experiment's trial files are built by {platform.files}")
    service = create_training_service(resolved, NO_EVENTS, ExperimentPaths(tmp_path / "exp"))
    module, function = platform.service.split(":")
    assert type(service).__module__ == module, f"{name}: built by {platform.service}"
    # the readers' class, or one built on it that also knows what only the running service does
    # (remote: the checkpoints on its hosts)
    assert isinstance(service.files, type(stored)), f"{name}: the service reads its trials' files as readers do"


def test_errors_list_the_platforms_of_the_table(tmp_path: Path) -> None:
    listed = ", ".join(PLATFORMS)
    with pytest.raises(ConfigError, match=f"supported: {listed}"):
        config_of(tmp_path, 7)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=f"expmgr's platforms: {listed}"):
        config_of(tmp_path, "kubeflow")


def test_nnis_v1_format_takes_the_platforms_the_table_marks_as_nnis(tmp_path: Path) -> None:
    for platform in PLATFORMS.values():
        write(tmp_path / "space.json", '{"x": {"_type": "choice", "_value": [1]}}')
        path = write(tmp_path / f"{platform.name}.yml",
                     f"authorName: a\ntrialConcurrency: 1\ntrainingServicePlatform: {platform.name}\n"
                     "searchSpacePath: space.json\n"
                     "tuner: {builtinTunerName: Random}\ntrial: {command: 'true', codeDir: .}\n"
                     + V1_REQUIRED.get(platform.name, ""))
        if platform.nni:
            assert ExperimentConfig.load(path).canonical().training_service.platform == platform.name
        else:
            with pytest.raises(ConfigError, match=f"not supported in NNI's v1 format: {platform.name}"):
                ExperimentConfig.load(path)
