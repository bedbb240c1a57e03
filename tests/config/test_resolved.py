"""ResolvedConfig: a loaded or Python-built config resolved once into narrow types (seconds,
absolute paths, defaults applied), frozen, and changed while running only by
``with_update``, which checks the value as a config file would and changes nothing else."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from expmgr.config import (UPDATABLE_FIELDS, AlgorithmConfig, ConfigError, ExperimentConfig, ResolvedConfig,
                           ResolvedLocalConfig)

from tests.helpers.config import write

SPACE = {"lr": {"_type": "loguniform", "_value": [0.0001, 0.1]}}

PROJECT = """\
searchSpaceFile: space/search_space.json
trialCommand: python3 trial.py
trialCodeDirectory: code
trialConcurrency: 2
trialGpuNumber: 1
maxExperimentDuration: 1.5h
maxTrialDuration: 10m
trialIdleTimeout: 30
experimentWorkingDirectory: runs
tuner:
  name: TPE
  classArgs:
    optimize_mode: Minimize
trainingService:
  platform: local
  gpuIndices: "0,1"
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A config file in ``project/`` with relative paths, a search space file and text durations."""
    (tmp_path / "project" / "code").mkdir(parents=True)
    write(tmp_path / "project" / "space" / "search_space.json", json.dumps(SPACE))
    return write(tmp_path / "project" / "config.yml", PROJECT)


@pytest.fixture
def resolved(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ResolvedConfig:
    monkeypatch.chdir(tmp_path)   # elsewhere than the config's folder
    return ResolvedConfig.from_config(ExperimentConfig.load(project))


def python_config(tmp_path: Path, **fields) -> ExperimentConfig:
    return ExperimentConfig(**{"search_space": SPACE, "trial_command": "python3 trial.py",
                               "trial_code_directory": tmp_path, "trial_concurrency": 1, "tuner": {"name": "TPE"},
                               "experiment_working_directory": tmp_path / "home", **fields})


# -- conversions --------------------------------------------------------------------------------

def test_durations_are_seconds_as_floats(resolved: ResolvedConfig):
    assert resolved.max_experiment_duration == 5400.0
    assert resolved.max_trial_duration == 600.0
    assert resolved.trial_idle_timeout == 30.0
    assert all(isinstance(seconds, float) for seconds in
               (resolved.max_experiment_duration, resolved.max_trial_duration, resolved.trial_idle_timeout))


def test_relative_paths_are_resolved_against_the_config_files_folder(resolved: ResolvedConfig, project: Path):
    assert resolved.trial_code_directory == project.parent / "code"
    assert resolved.experiment_working_directory == project.parent / "runs"
    assert isinstance(resolved.trial_code_directory, Path) and resolved.trial_code_directory.is_absolute()


def test_the_search_space_is_read_from_its_file(resolved: ResolvedConfig, project: Path):
    assert resolved.search_space == SPACE
    assert resolved.to_dict()["searchSpaceFile"] == str(project.parent / "space" / "search_space.json")


def test_sections_become_typed_records(resolved: ResolvedConfig):
    assert resolved.tuner == AlgorithmConfig(name="TPE", class_args={"optimize_mode": "minimize"})
    assert resolved.assessor is None
    assert resolved.minimizes is True
    assert resolved.training_service == ResolvedLocalConfig(use_active_gpu=False, max_trial_number_per_gpu=1,
                                                            gpu_indices=(0, 1))
    assert resolved.training_service.platform == "local"
    assert resolved.trial_gpu_number == 1


def test_a_tuner_given_as_a_dict_becomes_an_algorithm_config(tmp_path: Path):
    resolved = ResolvedConfig.from_config(python_config(
        tmp_path, tuner={"name": "tpe", "class_args": {"optimize_mode": "maximize"}},
        assessor={"name": "Medianstop"}))
    assert resolved.tuner == AlgorithmConfig(name="TPE", class_args={"optimize_mode": "maximize"})
    assert resolved.assessor == AlgorithmConfig(name="Medianstop", class_args={})
    assert resolved.minimizes is False


def test_defaults_are_applied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("EXPMGR_HOME", str(tmp_path / "default-home"))
    config = python_config(tmp_path, experiment_working_directory=None, training_service=None)
    resolved = ResolvedConfig.from_config(config)
    assert resolved.trial_grace_period == 30.0
    assert resolved.max_trial_retries == 0
    assert resolved.log_level == "info"
    assert resolved.max_trial_number is None and resolved.max_experiment_duration is None
    assert resolved.trial_gpu_number is None, "None (not 0): trials' CUDA_VISIBLE_DEVICES is left alone"
    assert resolved.experiment_working_directory == tmp_path / "default-home"
    assert resolved.training_service == ResolvedLocalConfig()
    assert resolved.with_strategy is False


def test_python_numbers_become_floats_and_debug_raises_the_log_level(tmp_path: Path):
    resolved = ResolvedConfig.from_config(python_config(tmp_path, max_trial_duration=90, trial_grace_period=2,
                                                        debug=True, log_level="WARNING"))
    assert resolved.max_trial_duration == 90.0 and isinstance(resolved.max_trial_duration, float)
    assert resolved.trial_grace_period == 2.0 and isinstance(resolved.trial_grace_period, float)
    assert resolved.log_level == "debug"


def test_a_bad_config_is_a_config_error_and_the_config_is_left_as_given(tmp_path: Path):
    config = python_config(tmp_path, trial_concurrency=0)
    with pytest.raises(ConfigError, match=r"ExperimentConfig.trial_concurrency: expected a positive integer"):
        ResolvedConfig.from_config(config)
    good = python_config(tmp_path, max_trial_duration="1h")
    ResolvedConfig.from_config(good)
    assert good.max_trial_duration == "1h" and good.tuner == {"name": "TPE"}


def test_a_strategy_makes_tuner_and_search_space_optional(tmp_path: Path):
    config = python_config(tmp_path, tuner=None, search_space=None)
    with pytest.raises(ConfigError, match="search_space: required"):
        ResolvedConfig.from_config(config)
    resolved = ResolvedConfig.from_config(config, with_strategy=True)
    assert resolved.tuner is None and resolved.search_space is None and resolved.with_strategy


def test_it_is_frozen(resolved: ResolvedConfig):
    with pytest.raises(dataclasses.FrozenInstanceError):
        resolved.trial_concurrency = 5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        resolved.training_service.max_trial_number_per_gpu = 2  # type: ignore[misc]
    assert resolved.trial_concurrency == 2


def test_every_updatable_field_is_a_resolved_field():
    names = {f.name for f in dataclasses.fields(ResolvedConfig)}
    assert {entry.attribute for entry in UPDATABLE_FIELDS} <= names


# -- with_update ----------------------------------------------------------------------------------

@pytest.mark.parametrize("field, value, message", [
    ("trialConcurrency", 0, "trialConcurrency: expected a positive integer, got 0"),
    ("trialConcurrency", 3.0, "trialConcurrency: expected a positive integer, got 3.0"),
    ("trialConcurrency", 10**35, "trialConcurrency: at most 10,000"),
    ("maxTrialNumber", -1, "maxTrialNumber: expected a positive integer, got -1"),
    ("maxExperimentDuration", "5x", "maxExperimentDuration: unknown unit 'x'"),
    ("maxExperimentDuration", 10**35, "maxExperimentDuration: a duration must be at most 3650d"),
    ("searchSpace", {"lr": {"_type": "uniform", "_value": [1]}}, "searchSpace.lr._value"),
    ("searchSpace", "lr", "searchSpace: "),
    ("trialCommand", "python3 other.py", "trialCommand: cannot be changed while running; one of trialConcurrency"),
])
def test_a_refused_update_is_a_config_error_naming_the_field(resolved: ResolvedConfig, field: str, value: object,
                                                            message: str):
    before = resolved.to_dict()
    with pytest.raises(ConfigError) as refused:
        resolved.with_update(field, value)
    assert message in str(refused.value), str(refused.value)
    assert resolved.to_dict() == before


def test_an_update_gives_a_new_config_with_that_field_resolved(resolved: ResolvedConfig):
    longer = resolved.with_update("maxExperimentDuration", "2h")
    assert longer.max_experiment_duration == 7200.0
    assert resolved.max_experiment_duration == 5400.0, "the old one is unchanged"
    more = longer.with_update("trialConcurrency", 4).with_update("maxTrialNumber", 20)
    assert (more.trial_concurrency, more.max_trial_number, more.max_experiment_duration) == (4, 20, 7200.0)
    assert dataclasses.replace(more, trial_concurrency=2, max_trial_number=None,
                               max_experiment_duration=5400.0) == resolved


def test_the_stored_config_after_an_update_differs_only_in_that_field(resolved: ResolvedConfig):
    before = resolved.to_dict()
    assert resolved.with_update("maxExperimentDuration", "2h").to_dict() == {**before, "maxExperimentDuration": 7200.0}
    assert resolved.with_update("trialConcurrency", 3).to_dict() == {**before, "trialConcurrency": 3}
    assert resolved.with_update("maxTrialNumber", 7).to_dict() == {**before, "maxTrialNumber": 7}


def test_a_new_search_space_replaces_the_file_it_came_from(resolved: ResolvedConfig):
    before = resolved.to_dict()
    space = {"x": {"_type": "choice", "_value": [1, 2]}}
    updated = resolved.with_update("searchSpace", space)
    assert updated.search_space == space
    expected = {**before, "searchSpace": space}
    del expected["searchSpaceFile"]
    assert updated.to_dict() == expected
    # later updates keep it so (the file is not read again)
    assert updated.with_update("trialConcurrency", 5).to_dict() == {**expected, "trialConcurrency": 5}


def test_a_strategy_experiment_without_tuner_takes_updates(tmp_path: Path):
    resolved = ResolvedConfig.from_config(python_config(tmp_path, tuner=None, search_space=None),
                                          with_strategy=True)
    updated = resolved.with_update("trialConcurrency", 3)
    assert updated.trial_concurrency == 3 and updated.with_strategy
    assert updated.to_dict() == {**resolved.to_dict(), "trialConcurrency": 3}
