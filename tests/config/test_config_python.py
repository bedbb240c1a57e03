"""Configs built in Python: dicts or records for sections, plain attributes, errors named ExperimentConfig.x."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from expmgr.config import AlgorithmConfig, ConfigError, ExperimentConfig, LocalConfig

from tests.helpers.config import GOOD, write


def make(**overrides) -> ExperimentConfig:
    values = dict(experiment_name="x", search_space={"lr": {"_type": "uniform", "_value": [0, 1]}},
                  trial_command="python3 trial.py", trial_code_directory=".", trial_concurrency=2,
                  max_trial_number=10, tuner={"name": "TPE", "class_args": {"optimize_mode": "maximize"}},
                  training_service={"platform": "local"})
    values.update(overrides)
    return ExperimentConfig(**values)


def python_error(config: ExperimentConfig) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        config.canonical()
    return info.value


def test_python_config_with_dicts_and_assignment_canonicalises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = make(tuner={"name": "tpe", "classArgs": {"optimize_mode": "maximize"}},
                  training_service={"platform": "local", "maxTrialNumberPerGpu": 2})
    config.trial_concurrency = 4
    config.max_trial_duration = "5m"
    canonical = config.canonical()
    assert canonical.trial_concurrency == 4
    assert canonical.max_trial_duration == 300.0
    assert canonical.trial_code_directory == tmp_path
    assert canonical.tuner == AlgorithmConfig(name="TPE", class_args={"optimize_mode": "maximize"})
    assert canonical.training_service == LocalConfig(max_trial_number_per_gpu=2)


def test_records_are_accepted_for_sections() -> None:
    config = make(tuner=AlgorithmConfig(name="Random"), training_service=LocalConfig(gpu_indices=1))
    canonical = config.canonical()
    assert canonical.tuner.name == "Random"
    assert canonical.training_service.gpu_indices == [1]


def test_training_service_defaults_to_local() -> None:
    assert ExperimentConfig().training_service == LocalConfig()
    assert make(training_service=None).canonical().training_service == LocalConfig()


def test_canonical_does_not_mutate_the_original() -> None:
    config = make(max_experiment_duration="1h", tuner=AlgorithmConfig(name="tpe", class_args={"optimize_mode": "MAXIMIZE"}))
    before = repr(config)
    canonical = config.canonical()
    canonical.tuner.class_args["seed"] = 1
    canonical.search_space["lr"]["_value"][0] = 0.5
    assert repr(config) == before
    assert config.max_experiment_duration == "1h"
    assert config.tuner.name == "tpe"
    assert canonical is not config


def test_python_error_names_the_attribute() -> None:
    err = python_error(make(trial_concurrency=-1))
    assert str(err) == "ExperimentConfig.trial_concurrency: expected a positive integer, got -1"
    assert (err.file, err.line, err.column, err.field) == (None, None, None, "trialConcurrency")


def test_python_error_in_a_section_uses_snake_case_path() -> None:
    err = python_error(make(tuner={"name": "TPE", "class_args": {"optimize_mode": "up"}}))
    assert str(err) == "ExperimentConfig.tuner.class_args.optimize_mode: expected 'maximize' or 'minimize', got 'up'"
    assert err.field == "tuner.classArgs.optimize_mode"


def test_python_unknown_section_key_suggests_snake_case() -> None:
    err = python_error(make(tuner={"name": "TPE", "clas_args": {}}))
    assert str(err) == "ExperimentConfig.tuner.clas_args: unknown key; did you mean 'class_args'?"


def test_python_search_space_error_names_the_entry() -> None:
    err = python_error(make(search_space={"lr": {"_type": "loguniform", "_value": [0, 1]}}))
    assert str(err).startswith("ExperimentConfig.search_space.lr._value[0]: loguniform needs 0 < low")


def test_python_missing_tuner_shows_python_example() -> None:
    err = python_error(make(tuner=None))
    assert str(err) == "ExperimentConfig.tuner: required (e.g. tuner={'name': 'TPE'})"


def test_python_both_search_space_and_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text('{"lr": {"_type": "uniform", "_value": [0, 2]}}')
    err = python_error(make(search_space_file=tmp_path / "s.json"))
    assert "give either search_space or search_space_file, not both" in str(err)


def test_python_search_space_file_errors_name_that_file(tmp_path: Path) -> None:
    space = tmp_path / "s.json"
    space.write_text('{"lr": {"_type": "uniform", "_value": [2, 1]}}')
    err = python_error(make(search_space=None, search_space_file=str(space)))
    assert (err.file, err.line, err.field) == (space, 1, "searchSpace.lr._value")


def test_python_relative_paths_resolve_against_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "code").mkdir()
    (tmp_path / "s.yml").write_text("lr: {_type: uniform, _value: [0, 1]}\n")
    monkeypatch.chdir(tmp_path)
    canonical = make(search_space=None, search_space_file="s.yml", trial_code_directory="code",
                     experiment_working_directory="runs").canonical()
    assert canonical.trial_code_directory == tmp_path / "code"
    assert canonical.search_space_file == tmp_path / "s.yml"
    assert canonical.experiment_working_directory == tmp_path / "runs"


def test_unknown_attribute_cannot_be_set_by_typo() -> None:
    config = make()
    with pytest.raises(AttributeError):
        config.trial_concurency = 3


def test_loaded_config_changed_in_python_reports_python_style(tmp_path: Path) -> None:
    config = ExperimentConfig.load(write(tmp_path / "config.yml", GOOD))
    config.trial_concurrency = 0
    err = python_error(config)
    assert err.file is None
    assert str(err) == "ExperimentConfig.trial_concurrency: expected a positive integer, got 0"


def test_loaded_config_unchanged_field_still_points_into_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "config.yml", GOOD + "trialCodeDirectory: code\n")
    (tmp_path / "code").mkdir()
    config = ExperimentConfig.load(path)
    (tmp_path / "code").rmdir()
    err = python_error(config)
    assert (err.file, err.line, err.field) == (path, 13, "trialCodeDirectory")


def test_python_config_round_trips_through_dict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    canonical = make(assessor={"className": "my.Assessor"}).canonical()
    again = ExperimentConfig.from_dict(json.loads(json.dumps(canonical.to_dict())))
    assert again == canonical
    assert again.canonical() == canonical


def test_minimizes_follows_optimize_mode_or_the_builtin_tuners_default() -> None:
    def minimizes(tuner) -> bool:
        return ExperimentConfig(tuner=tuner).minimizes
    assert minimizes({"name": "TPE", "classArgs": {"optimize_mode": "Minimize"}})
    assert not minimizes({"name": "TPE", "class_args": {"optimize_mode": "maximize"}})
    assert minimizes({"name": "tpe"}), "NNI's TPE minimizes unless told otherwise"
    assert not minimizes({"name": "Evolution"}), "NNI's Evolution maximizes unless told otherwise"
    assert not minimizes({"class_name": "mine.Tuner"}) and not minimizes(None)
