"""NNI's config spellings: ``advisor`` read as the tuner, the v1 format converted as nnictl
does, and platforms expmgr does not run refused with "not supported: <platform>"."""
from __future__ import annotations

from pathlib import Path

from expmgr.config import ExperimentConfig, ResolvedConfig

from tests.helpers.config import GOOD, assert_error, good_with, load_error, write

V1 = """\
authorName: default
experimentName: example_mnist
trialConcurrency: 2
maxExecDuration: 1h
maxTrialNum: 10
trainingServicePlatform: local
searchSpacePath: search_space.json
useAnnotation: false
multiThread: true
logLevel: debug
localConfig:
  gpuIndices: "0,1"
  maxTrialNumPerGpu: 2
  useActiveGpu: false
tuner:
  builtinTunerName: TPE
  classArgs:
    optimize_mode: minimize
assessor:
  builtinAssessorName: Medianstop
  classArgs:
    start_step: 3
trial:
  command: python3 mnist.py
  codeDir: .
  gpuNum: 0
"""
SPACE = '{"lr": {"_type": "uniform", "_value": [0.1, 1]}}'


def v1_config(tmp_path: Path, text: str = V1) -> Path:
    write(tmp_path / "search_space.json", SPACE)
    return write(tmp_path / "config.yml", text)


def test_a_v1_config_is_converted_as_nnictl_does(tmp_path: Path):
    config = ExperimentConfig.load(v1_config(tmp_path))
    assert config.to_dict() == ExperimentConfig.from_dict({
        "experimentName": "example_mnist", "trialConcurrency": 2, "maxExperimentDuration": "1h",
        "maxTrialNumber": 10, "searchSpaceFile": str(tmp_path / "search_space.json"), "useAnnotation": False,
        "logLevel": "debug", "trialCommand": "python3 mnist.py", "trialCodeDirectory": str(tmp_path),
        "trialGpuNumber": 0,
        "trainingService": {"platform": "local", "gpuIndices": "0,1", "maxTrialNumberPerGpu": 2,
                            "useActiveGpu": False},
        "tuner": {"name": "TPE", "classArgs": {"optimize_mode": "minimize"}},
        "assessor": {"name": "Medianstop", "classArgs": {"start_step": 3}},
    }).to_dict()
    resolved = ResolvedConfig.from_config(config)
    assert resolved.minimizes and resolved.max_experiment_duration == 3600
    assert resolved.training_service.gpu_indices == (0, 1)
    assert resolved.notes[0].startswith("the config is in NNI's v1 format; converted to v2")
    assert "ignored, as NNI does: authorName, multiThread" in resolved.notes


def test_a_v1_custom_advisor_becomes_the_tuner_class(tmp_path: Path):
    text = V1.replace("tuner:\n  builtinTunerName: TPE\n  classArgs:\n    optimize_mode: minimize\n",
                      "advisor:\n  codeDir: .\n  classFileName: dummy_advisor.py\n  className: DummyAdvisor\n"
                      "  classArgs:\n    k: 3\n")
    config = ExperimentConfig.load(v1_config(tmp_path, text))
    assert config.tuner.class_name == "dummy_advisor.DummyAdvisor"
    assert Path(config.tuner.code_directory) == tmp_path and config.tuner.class_args == {"k": 3}
    assert "advisor is read as the tuner (NNI 3.0 does the same)" in config.notes


def test_errors_in_a_v1_config_point_at_the_v1_key(tmp_path: Path):
    path = v1_config(tmp_path, V1.replace("  command: python3 mnist.py", "  command: ''"))
    assert_error(load_error(path), path, 24, "trial.command", "expected a non-empty command", column=12)
    path = v1_config(tmp_path, V1.replace("maxTrialNum: 10", "maxTrialNum: -1"))
    assert_error(load_error(path), path, 5, "maxTrialNum", "expected a positive integer", column=14)
    path = v1_config(tmp_path, V1.replace("    start_step: 3", "    start_stop: 3"))
    assert_error(load_error(path), path, 22, "assessor.classArgs.start_stop", "unknown assessor Medianstop argument")
    path = v1_config(tmp_path, V1.replace("  maxTrialNumPerGpu: 2", "  maxTrialNumPerGpu: 0"))
    assert_error(load_error(path), path, 13, "localConfig.maxTrialNumPerGpu", "expected a positive integer")


def test_unknown_v1_keys_are_errors_at_their_line(tmp_path: Path):
    path = v1_config(tmp_path, V1.replace("maxTrialNum: 10", "maxTrialNumber: 10"))
    assert_error(load_error(path), path, 5, "maxTrialNumber", "unknown key in an NNI v1 config; did you mean "
                                                              "'maxTrialNum'?", column=1)
    path = v1_config(tmp_path, V1.replace("  gpuNum: 0", "  gpuNumber: 0"))
    assert_error(load_error(path), path, 26, "trial.gpuNumber", "unknown key in an NNI v1 trial section")
    path = v1_config(tmp_path, V1 + "remoteConfig:\n  reuse: true\n")
    assert_error(load_error(path), path, 27, "remoteConfig", "belongs to another training service")
    path = v1_config(tmp_path, V1.replace("multiThread: true", "multiPhase: true"))
    assert_error(load_error(path), path, 9, "multiPhase", "not supported: multiPhase")


def test_v1_platforms_other_than_local_are_not_supported(tmp_path: Path):
    for platform in ("pai", "kubeflow", "adl"):   # remote and hybrid: tests/config/test_remote_config.py
        path = v1_config(tmp_path, V1.replace("trainingServicePlatform: local", f"trainingServicePlatform: {platform}"))
        assert_error(load_error(path), path, 6, "trainingServicePlatform", f"not supported: {platform} (NNI's "
                                                                            f"{platform} training service)", column=26)


def test_advisor_is_read_as_the_tuner_and_noted(tmp_path: Path):
    path = write(tmp_path / "config.yml", good_with("tuner:", "advisor:").replace(
        "  name: TPE", "  name: Hyperband").replace("    optimize_mode: maximize", "    R: 9"))
    config = ExperimentConfig.load(path)
    assert config.tuner.name == "Hyperband" and config.tuner.class_args == {"R": 9}
    assert config.notes == ("advisor is read as the tuner (NNI 3.0 does the same)",)
    path = write(tmp_path / "bad.yml", good_with("tuner:", "advisor:").replace("    optimize_mode: maximize", "    R: 9"))
    assert_error(load_error(path), path, 10, "advisor.classArgs.R", "unknown tuner TPE argument")


def test_tuner_and_advisor_together_is_an_error_naming_both(tmp_path: Path):
    path = tmp_path / "config.yml"
    err = load_error(path, GOOD + "advisor:\n  name: BOHB\n")
    assert_error(err, path, 13, "advisor", "give either tuner or advisor (NNI's older name for a tuner), not both")


def test_shared_storage_is_not_supported(tmp_path: Path):
    path = tmp_path / "config.yml"
    err = load_error(path, GOOD + "sharedStorage:\n  storageType: NFS\n")
    assert_error(err, path, 13, "sharedStorage", "not supported: sharedStorage", column=1)


def test_nni_tuners_expmgr_lacks_are_not_supported_rather_than_unknown(tmp_path: Path):
    path = tmp_path / "config.yml"
    err = load_error(path, good_with("  name: TPE", "  name: SMAC"))
    assert_error(err, path, 8, "tuner.name", "not supported: SMAC (one of NNI's built-in tuners, not in expmgr)")


def test_a_custom_tuner_takes_a_search_space_of_its_own_format(tmp_path: Path):
    write(tmp_path / "tuners" / "mine.py", "class Mine:\n    pass\n")
    text = good_with("  lr: {_type: loguniform, _value: [0.0001, 0.1]}", "  README: any format").replace(
        "  name: TPE", "  className: mine.Mine\n  codeDirectory: tuners")
    config = ExperimentConfig.load(write(tmp_path / "config.yml", text))
    assert config.canonical().search_space == {"README": "any format"}
