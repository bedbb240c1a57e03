"""Good config files load as NNI users write them, and survive to_dict/from_dict/to_yaml round trips."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from expmgr.config import AlgorithmConfig, ConfigError, ExperimentConfig, LocalConfig

from tests.helpers.config import GOOD, good_with, write

QUICKSTART = """\
# NNI's quickstart, v2 format
experimentName: mnist
searchSpaceFile: search_space.json
trialCommand: python3 mnist.py
trialCodeDirectory: .
trialGpuNumber: 0
trialConcurrency: 2
maxExperimentDuration: 1h
maxTrialNumber: 10
tuner:
  name: TPE
  classArgs:
    optimize_mode: maximize
trainingService:
  platform: local
  useActiveGpu: false
"""

SEARCH_SPACE = {
    "batch_size": {"_type": "choice", "_value": [16, 32, 64, 128]},
    "hidden_size": {"_type": "choice", "_value": [128, 256, 512, 1024]},
    "lr": {"_type": "loguniform", "_value": [0.0001, 0.1]},
    "momentum": {"_type": "uniform", "_value": [0, 1]},
}


@pytest.fixture
def quickstart(tmp_path: Path) -> Path:
    folder = tmp_path / "mnist"
    folder.mkdir()
    (folder / "search_space.json").write_text(json.dumps(SEARCH_SPACE, indent=4))
    return write(folder / "config.yml", QUICKSTART)


def test_nni_quickstart_config_loads_and_canonicalises(quickstart: Path, home: Path) -> None:
    config = ExperimentConfig.load(quickstart)
    canonical = config.canonical()
    folder = quickstart.parent
    assert canonical.experiment_name == "mnist"
    assert canonical.search_space == SEARCH_SPACE
    assert canonical.search_space_file == folder / "search_space.json"
    assert canonical.trial_command == "python3 mnist.py"
    assert canonical.trial_code_directory == folder
    assert canonical.trial_gpu_number == 0
    assert canonical.trial_concurrency == 2
    assert canonical.max_experiment_duration == 3600.0
    assert canonical.max_trial_number == 10
    assert canonical.max_trial_duration is None
    assert canonical.tuner == AlgorithmConfig(name="TPE", class_args={"optimize_mode": "maximize"})
    assert canonical.assessor is None
    assert canonical.training_service == LocalConfig()
    assert canonical.log_level == "info"
    assert canonical.experiment_working_directory == home


def test_load_returns_values_as_written_with_absolute_paths(quickstart: Path) -> None:
    config = ExperimentConfig.load(quickstart)
    assert config.max_experiment_duration == "1h"
    assert config.search_space is None
    assert config.search_space_file == quickstart.parent / "search_space.json"
    assert config.log_level is None
    assert isinstance(config.tuner, AlgorithmConfig)


def test_relative_paths_resolve_against_the_config_folder(
        quickstart: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    (quickstart.parent / "src").mkdir()
    text = QUICKSTART.replace("trialCodeDirectory: .", "trialCodeDirectory: src") + "experimentWorkingDirectory: ../runs\n"
    write(quickstart, text)
    canonical = ExperimentConfig.load(quickstart).canonical()
    assert canonical.trial_code_directory == quickstart.parent / "src"
    assert canonical.experiment_working_directory == tmp_path / "runs"
    assert canonical.search_space == SEARCH_SPACE


def test_trial_code_directory_defaults_to_the_config_folder(tmp_path: Path) -> None:
    path = write(tmp_path / "exp" / "config.yml", GOOD)
    assert ExperimentConfig.load(path).canonical().trial_code_directory == tmp_path / "exp"


def test_snake_case_keys_work_like_camel_case(tmp_path: Path) -> None:
    camel = ExperimentConfig.load(write(tmp_path / "camel.yml", GOOD + "maxTrialDuration: 10m\n"))
    snake = ExperimentConfig.load(write(tmp_path / "snake.yml", """\
        experiment_name: demo
        search_space:
          lr: {_type: loguniform, _value: [0.0001, 0.1]}
        trial_command: python3 trial.py
        trial_concurrency: 2
        max_trial_number: 10
        max_trial_duration: 10m
        tuner:
          name: TPE
          class_args:
            optimize_mode: maximize
        training_service:
          platform: local
        """))
    assert snake == camel
    assert snake.canonical() == camel.canonical()


@pytest.mark.parametrize("written,seconds", [("30s", 30.0), ("10m", 600.0), ("1.5h", 5400.0),
                                             ("2d", 172800.0), ("90", 90.0), ("0.5", 0.5)])
def test_durations_become_seconds(tmp_path: Path, written: str, seconds: float) -> None:
    path = write(tmp_path / "config.yml", GOOD + f"maxExperimentDuration: {written}\nmaxTrialDuration: {written}\n")
    canonical = ExperimentConfig.load(path).canonical()
    assert canonical.max_experiment_duration == seconds
    assert canonical.max_trial_duration == seconds


def test_debug_lowers_log_level_to_debug_unless_set_lower(tmp_path: Path) -> None:
    def level(extra: str) -> str | None:
        return ExperimentConfig.load(write(tmp_path / "config.yml", GOOD + extra)).canonical().log_level

    assert level("") == "info"
    assert level("debug: true\n") == "debug"
    assert level("debug: true\nlogLevel: WARNING\n") == "debug"
    assert level("debug: true\nlogLevel: trace\n") == "trace"
    assert level("logLevel: Error\n") == "error"


def test_working_directory_defaults_to_home_folder_without_env(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EXPMGR_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    canonical = ExperimentConfig.load(write(tmp_path / "config.yml", GOOD)).canonical()
    assert canonical.experiment_working_directory == tmp_path / "user" / "expmgr-experiments"


def test_training_service_options_and_list_of_one(tmp_path: Path) -> None:
    text = good_with("trainingService:\n  platform: local\n",
                     "trainingService:\n  - platform: Local\n    useActiveGpu: true\n"
                     "    maxTrialNumberPerGpu: 2\n    gpuIndices: \"0,2\"\n")
    service = ExperimentConfig.load(write(tmp_path / "config.yml", text)).canonical().training_service
    assert service == LocalConfig(platform="local", use_active_gpu=True, max_trial_number_per_gpu=2, gpu_indices=[0, 2])


@pytest.mark.parametrize("written,indices", [("3", [3]), ("[0, 1]", [0, 1]), ('"1"', [1])])
def test_gpu_indices_forms(tmp_path: Path, written: str, indices: list[int]) -> None:
    path = write(tmp_path / "config.yml", GOOD + f"  gpuIndices: {written}\n")
    assert ExperimentConfig.load(path).canonical().training_service.gpu_indices == indices


def test_nni_compatibility_keys_are_accepted(tmp_path: Path) -> None:
    extra = "useAnnotation: false\nexperimentType: hpo\nnniManagerIp: 10.0.0.1\n"
    canonical = ExperimentConfig.load(write(tmp_path / "config.yml", GOOD + extra)).canonical()
    assert canonical.use_annotation is False
    assert canonical.experiment_type == "hpo"
    assert canonical.nni_manager_ip == "10.0.0.1"


def test_tuner_name_is_case_insensitive_and_canonicalised(tmp_path: Path) -> None:
    text = good_with("  name: TPE", "  name: gridsearch").replace("optimize_mode: maximize", "optimize_mode: Minimize")
    tuner = ExperimentConfig.load(write(tmp_path / "config.yml", text)).canonical().tuner
    assert tuner == AlgorithmConfig(name="GridSearch", class_args={"optimize_mode": "minimize"})


def test_custom_tuner_code_directory_is_relative_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "tuners").mkdir()
    text = good_with("  name: TPE", "  className: my_tuner.MyTuner\n  codeDirectory: tuners")
    tuner = ExperimentConfig.load(write(tmp_path / "config.yml", text)).canonical().tuner
    assert tuner.class_name == "my_tuner.MyTuner"
    assert tuner.code_directory == tmp_path / "tuners"
    assert tuner.name is None


def test_assessor_by_class_name(tmp_path: Path) -> None:
    text = GOOD + "assessor:\n  className: stop.EarlyStop\n  classArgs: {patience: 3}\n"
    assessor = ExperimentConfig.load(write(tmp_path / "config.yml", text)).canonical().assessor
    assert assessor == AlgorithmConfig(class_name="stop.EarlyStop", class_args={"patience": 3})


# -- to_dict / from_dict / to_yaml ----------------------------------------------------------

def test_to_dict_is_camel_case_json_without_none(quickstart: Path, home: Path) -> None:
    data = ExperimentConfig.load(quickstart).canonical().to_dict()
    assert json.loads(json.dumps(data)) == data
    folder = quickstart.parent
    assert data["searchSpaceFile"] == str(folder / "search_space.json")
    assert data["searchSpace"] == SEARCH_SPACE
    assert data["trialCodeDirectory"] == str(folder)
    assert data["trialConcurrency"] == 2
    assert data["maxExperimentDuration"] == 3600.0
    assert data["experimentWorkingDirectory"] == str(home)
    assert data["tuner"] == {"name": "TPE", "classArgs": {"optimize_mode": "maximize"}}
    assert data["trainingService"] == {"platform": "local", "useActiveGpu": False, "maxTrialNumberPerGpu": 1}
    assert "maxTrialDuration" not in data and "assessor" not in data
    assert all("_" not in key for key in data)


def test_from_dict_inverts_to_dict(quickstart: Path) -> None:
    canonical = ExperimentConfig.load(quickstart).canonical()
    again = ExperimentConfig.from_dict(json.loads(json.dumps(canonical.to_dict())))
    assert again == canonical
    assert again.canonical() == canonical


def test_from_dict_works_after_the_search_space_file_is_gone(quickstart: Path) -> None:
    saved = ExperimentConfig.load(quickstart).canonical().to_dict()
    (quickstart.parent / "search_space.json").unlink()
    assert ExperimentConfig.from_dict(saved).canonical().search_space == SEARCH_SPACE


def test_from_dict_accepts_snake_case_keys() -> None:
    config = ExperimentConfig.from_dict({"trial_command": "x", "trial_concurrency": 1,
                                         "tuner": {"name": "TPE", "class_args": {}}})
    assert config.trial_concurrency == 1
    assert config.tuner == AlgorithmConfig(name="TPE")


def test_from_dict_rejects_unknown_keys_without_a_file() -> None:
    with pytest.raises(ConfigError) as info:
        ExperimentConfig.from_dict({"trialComand": "x"})
    assert info.value.file is None
    assert str(info.value) == "trialComand: unknown key; did you mean 'trialCommand'?"


def test_to_yaml_writes_camel_case_that_loads_back(quickstart: Path, tmp_path: Path) -> None:
    canonical = ExperimentConfig.load(quickstart).canonical()
    text = canonical.to_yaml()
    assert "trialConcurrency: 2\n" in text
    assert "_value: [16, 32, 64, 128]" in text
    saved = write(tmp_path / "saved" / "config.yml", text)
    assert ExperimentConfig.load(saved).canonical() == canonical


def test_canonical_is_idempotent(quickstart: Path) -> None:
    canonical = ExperimentConfig.load(quickstart).canonical()
    assert canonical.canonical() == canonical
