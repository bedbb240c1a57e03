"""The Ray training service's config (``trainingService: {platform: ray, ...}``): its fields,
defaults and units, each refusal naming the field and its place in the file, ``trialGpuNumber``
as the trials' GPUs, Ray missing, and the canonical round trip that the store and resume use."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from expmgr.config import (ConfigError, ExperimentConfig, LocalConfig, RayConfig, ResolvedConfig, ResolvedRayConfig,
                           ResolvedTrialResources)
from tests.helpers.common import REPO

from tests.helpers.config import assert_error, load_error, write

# a valid config, 8 lines; tests append lines 9+ (keys of trainingService)
RAY = """\
searchSpace:
  lr: {_type: loguniform, _value: [0.0001, 0.1]}
trialCommand: python3 trial.py
trialConcurrency: 4
tuner:
  name: TPE
trainingService:
  platform: ray
"""
SERVICE = "trainingService"
RESOURCES = "trainingService.trialResources"


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    return tmp_path / "config.yml"


def resolved_service(path: Path, text: str) -> ResolvedRayConfig:
    write(path, text)
    service = ResolvedConfig.from_config(ExperimentConfig.load(path)).training_service
    assert isinstance(service, ResolvedRayConfig)
    return service


def resources_error(path: Path, resources: str) -> ConfigError:
    return load_error(path, RAY + f"  trialResources: {resources}\n")


# -- what a config gives the service ---------------------------------------------------------

def test_platform_ray_alone_gives_the_defaults(config_path: Path) -> None:
    service = resolved_service(config_path, RAY)
    assert service == ResolvedRayConfig()
    assert service.platform == "ray"
    assert service.address == "auto"
    assert service.trial_resources == ResolvedTrialResources(cpu=1.0, gpu=0.0, memory=None, custom=())
    assert service.max_pending_trials is None and service.runtime_env is None


def test_every_field_is_read_into_the_resolved_service(config_path: Path) -> None:
    service = resolved_service(config_path, RAY + """\
  address: 10.0.0.5:6379
  trialResources: {cpu: 2, gpu: 1, memory: 4GiB, my_resource: 0.5, accel: 1}
  maxPendingTrials: 2
  runtimeEnv: {env_vars: {A: "1"}, pip: [numpy==1.26]}
""")
    assert service == ResolvedRayConfig(
        address="10.0.0.5:6379",
        trial_resources=ResolvedTrialResources(cpu=2.0, gpu=1.0, memory=4 * 2**30,
                                               custom=(("accel", 1.0), ("my_resource", 0.5))),
        max_pending_trials=2,
        runtime_env={"env_vars": {"A": "1"}, "pip": ["numpy==1.26"]})


def test_a_list_of_one_ray_service_is_read_as_the_service(config_path: Path) -> None:
    text = RAY.replace("trainingService:\n  platform: ray\n",
                       "trainingService:\n  - platform: ray\n    trialResources: {cpu: 0.5}\n")
    assert resolved_service(config_path, text).trial_resources.cpu == 0.5


def test_resource_keys_take_any_case_and_custom_names_are_kept_as_written(config_path: Path) -> None:
    service = resolved_service(config_path, RAY + "  trialResources: {CPU: 3, Gpu: 0.25, Memory: 1024, TPU_v4: 2}\n")
    assert service.trial_resources == ResolvedTrialResources(cpu=3.0, gpu=0.25, memory=1024,
                                                             custom=(("TPU_v4", 2.0),))


@pytest.mark.parametrize("gpu", [0, 0.5, 0.0001, 1.5, 8])
def test_gpu_may_be_fractional_as_ray_allows(config_path: Path, gpu: float) -> None:
    assert resolved_service(config_path, RAY + f"  trialResources: {{gpu: {gpu}}}\n").trial_resources.gpu == gpu


@pytest.mark.parametrize("written, size", [
    ("1048576", 1048576),
    ("'1024B'", 1024),
    ("512MiB", 512 * 2**20),
    ("4GB", 4 * 10**9),
    ("4GiB", 4 * 2**30),
    ("1.5GiB", 1610612736),
    ("2 tib", 2 * 2**40),
    ("10kb", 10_000),
    ("3KiB", 3072),
    ("'0.5KB'", 500),
])
def test_memory_is_bytes_or_a_size_with_a_unit_of_1000_or_1024(config_path: Path, written: str, size: int) -> None:
    service = resolved_service(config_path, RAY + f"  trialResources: {{memory: {written}}}\n")
    assert service.trial_resources.memory == size


@pytest.mark.parametrize("address, canonical", [
    ("auto", "auto"), ("AUTO", "auto"), ("10.0.0.5:6379", "10.0.0.5:6379"),
    ("head-node.cluster:6380", "head-node.cluster:6380"),
    ("'[::1]:6379'", "[::1]:6379"), ("localhost:1", "localhost:1"), ("h:65535", "h:65535"),
])
def test_address_is_auto_or_host_and_port(config_path: Path, address: str, canonical: str) -> None:
    assert resolved_service(config_path, RAY + f"  address: {address}\n").address == canonical


# -- trialGpuNumber ----------------------------------------------------------------------------

def test_trial_gpu_number_gives_the_gpus_when_trial_resources_has_none(config_path: Path) -> None:
    text = RAY.replace("trialConcurrency: 4\n", "trialConcurrency: 4\ntrialGpuNumber: 2\n")
    service = resolved_service(config_path, text + "  trialResources: {cpu: 2}\n")
    assert service.trial_resources.gpu == 2.0 and service.trial_resources.cpu == 2.0


def test_trial_gpu_number_and_the_same_gpu_in_trial_resources_agree(config_path: Path) -> None:
    text = RAY.replace("trialConcurrency: 4\n", "trialConcurrency: 4\ntrialGpuNumber: 1\n")
    assert resolved_service(config_path, text + "  trialResources: {gpu: 1.0}\n").trial_resources.gpu == 1.0


def test_trial_gpu_number_and_a_different_gpu_is_an_error_naming_both(config_path: Path) -> None:
    text = RAY.replace("trialConcurrency: 4\n", "trialConcurrency: 4\ntrialGpuNumber: 1\n")
    err = load_error(config_path, text + "  trialResources:\n    gpu: 0.5\n")
    assert_error(err, config_path, 11, f"{RESOURCES}.gpu",
                 "trialGpuNumber is 1 but trainingService.trialResources.gpu is 0.5", column=10)


def test_the_gpu_from_trial_gpu_number_survives_the_round_trip(config_path: Path) -> None:
    text = RAY.replace("trialConcurrency: 4\n", "trialConcurrency: 4\ntrialGpuNumber: 3\n")
    write(config_path, text)
    first = ResolvedConfig.from_config(ExperimentConfig.load(config_path))
    assert first.to_dict()["trainingService"]["trialResources"] == {"cpu": 1.0, "gpu": 3.0}
    again = ResolvedConfig.from_config(ExperimentConfig.from_dict(first.to_dict()))
    assert again.training_service == first.training_service


# -- refusals, each at its field and line ------------------------------------------------------

@pytest.mark.parametrize("resources, key, column, fragment", [
    ("{cpu: -1}", "cpu", 25, "expected a number >= 0"),
    ("{cpu: two}", "cpu", 25, "expected a number >= 0"),
    ("{cpu: true}", "cpu", 25, "expected a number >= 0"),
    ("{cpu: .inf}", "cpu", 25, "expected a number >= 0"),
    ("{gpu: -0.5}", "gpu", 25, "expected a number >= 0"),
    ("{gpu: 0.00001}", "gpu", 25, "Ray's smallest amount is 0.0001"),
    ("{gpu: [1]}", "gpu", 25, "expected a number >= 0"),
])
def test_cpu_and_gpu_must_be_numbers_of_at_least_zero(config_path: Path, resources: str, key: str, column: int,
                                                      fragment: str) -> None:
    err = resources_error(config_path, resources)
    assert_error(err, config_path, 9, f"{RESOURCES}.{key}", fragment, column=column)


@pytest.mark.parametrize("memory, fragment", [
    ("0", "at least 1 byte"),
    ("-4096", "at least 1 byte"),
    ("'0.1B'", "at least 1 byte"),
    ("4.5", "expected a size such as 512MiB, 4GB or 4GiB"),
    ("4XB", "unknown unit 'XB'"),
    ("lots", "expected a size such as 512MiB"),
    ("true", "expected a size such as 512MiB"),
    ("2PiB", "unknown unit 'PiB'"),
    ("2048TiB", "at most 1,024TiB is allowed (see Limits in docs/config.md)"),
])
def test_memory_must_be_a_positive_size(config_path: Path, memory: str, fragment: str) -> None:
    err = load_error(config_path, RAY + f"  trialResources:\n    cpu: 1\n    memory: {memory}\n")
    assert_error(err, config_path, 11, f"{RESOURCES}.memory", fragment, column=13)


def test_a_custom_resource_is_named_by_its_key_and_must_be_a_number(config_path: Path) -> None:
    err = load_error(config_path, RAY + "  trialResources:\n    my_resource: -2\n")
    assert_error(err, config_path, 10, f"{RESOURCES}.my_resource",
                 "expected a number >= 0 (fractions such as 0.5 are allowed), got -2", column=18)


def test_a_resource_given_twice_in_two_spellings_is_an_error_at_the_second(config_path: Path) -> None:
    err = load_error(config_path, RAY + "  trialResources:\n    cpu: 1\n    CPU: 2\n")
    assert_error(err, config_path, 11, f"{RESOURCES}.CPU", "'cpu' is given twice", column=5)


def test_trial_resources_must_be_a_mapping(config_path: Path) -> None:
    err = resources_error(config_path, "[cpu, 2]")
    assert_error(err, config_path, 9, RESOURCES, "expected a mapping of resources to amounts", column=19)


@pytest.mark.parametrize("value, fragment", [
    ("0", "expected a positive integer, got 0"),
    ("-1", "expected a positive integer"),
    ("1.5", "expected a positive integer"),
    ("'2'", "expected a positive integer"),
    ("10001", "at most 10,000 is allowed"),
])
def test_max_pending_trials_is_a_positive_integer(config_path: Path, value: str, fragment: str) -> None:
    err = load_error(config_path, RAY + f"  maxPendingTrials: {value}\n")
    assert_error(err, config_path, 9, f"{SERVICE}.maxPendingTrials", fragment, column=21)


def test_scale_up_timeout_is_a_duration_15_minutes_by_default(config_path: Path) -> None:
    assert resolved_service(config_path, RAY).scale_up_timeout == 15 * 60
    assert resolved_service(config_path, RAY + "  scaleUpTimeout: 90s\n").scale_up_timeout == 90
    assert resolved_service(config_path, RAY + "  scaleUpTimeout: 2h\n").scale_up_timeout == 7200
    err = load_error(config_path, RAY + "  scaleUpTimeout: soon\n")
    assert_error(err, config_path, 9, f"{SERVICE}.scaleUpTimeout", "expected a duration such as 30s", column=19)


def test_trial_python_is_ray_by_default_or_path(config_path: Path) -> None:
    assert resolved_service(config_path, RAY).trial_python == "ray"
    assert resolved_service(config_path, RAY + "  trialPython: path\n").trial_python == "path"
    assert resolved_service(config_path, RAY + "  trialPython: Ray\n").trial_python == "ray"
    err = load_error(config_path, RAY + "  trialPython: /usr/bin/python3\n")
    assert_error(err, config_path, 9, f"{SERVICE}.trialPython", "expected one of ray, path", column=16)


def test_ray_client_addresses_are_not_supported(config_path: Path) -> None:
    err = load_error(config_path, RAY + "  address: ray://10.0.0.5:10001\n")
    assert_error(err, config_path, 9, f"{SERVICE}.address",
                 "not supported: Ray Client (ray://); run expctl on a node of the cluster", column=12)


@pytest.mark.parametrize("address, fragment", [
    ("10.0.0.5", "expected auto or the <host>:<port> of the cluster's head node"),
    ("6379", "expected auto or the <host>:<port>"),
    ("http://10.0.0.5:6379", "expected auto or the <host>:<port>"),
    ("'::1:6379'", "expected auto or the <host>:<port>"),
    ("'host:'", "expected auto or the <host>:<port>"),
    ("host:0", "the port must be 1 to 65535, got 'host:0'"),
    ("host:70000", "the port must be 1 to 65535"),
])
def test_address_must_be_auto_or_host_and_port(config_path: Path, address: str, fragment: str) -> None:
    err = load_error(config_path, RAY + f"  address: {address}\n")
    assert_error(err, config_path, 9, f"{SERVICE}.address", fragment, column=12)


@pytest.mark.parametrize("value", ["[pip, numpy]", "numpy", "1"])
def test_runtime_env_must_be_a_mapping(config_path: Path, value: str) -> None:
    err = load_error(config_path, RAY + f"  runtimeEnv: {value}\n")
    assert_error(err, config_path, 9, f"{SERVICE}.runtimeEnv", "expected a mapping, Ray's runtime_env", column=15)


def test_runtime_env_is_passed_as_written_without_renaming_its_keys(config_path: Path) -> None:
    service = resolved_service(config_path, RAY + """\
  runtimeEnv:
    working_dir: null
    env_vars: {MY_VAR: x}
    pip: {packages: [requests], pip_check: false}
""")
    assert service.runtime_env == {"working_dir": None, "env_vars": {"MY_VAR": "x"},
                                   "pip": {"packages": ["requests"], "pip_check": False}}


@pytest.mark.parametrize("key, message", [
    ("gpuIndices: [0]", "unknown key; known keys: platform, address, trialResources, maxPendingTrials, runtimeEnv, "
                        "storagePath, trialPlacement, scaleUpTimeout, trialPython"),
    ("trialResource: {cpu: 1}", "unknown key; did you mean 'trialResources'?"),
    ("maxPendingTrial: 2", "unknown key; did you mean 'maxPendingTrials'?"),
])
def test_unknown_keys_of_a_ray_service_are_the_usual_error(config_path: Path, key: str, message: str) -> None:
    err = load_error(config_path, RAY + f"  {key}\n")
    assert_error(err, config_path, 9, f"{SERVICE}.{key.split(':')[0]}", message, column=3)


# -- Ray itself ---------------------------------------------------------------------------------

def test_without_ray_installed_a_ray_config_fails_at_its_platform(config_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "ray" else real_find_spec(name, *args))
    err = load_error(config_path, RAY + "  trialResources: {cpu: 2}\n")
    assert_error(err, config_path, 8, f"{SERVICE}.platform",
                 "not supported without Ray installed: pip install 'expmgr[ray]'", column=13)


def test_without_ray_importable_in_a_fresh_process_the_message_is_the_same(config_path: Path) -> None:
    write(config_path, RAY)
    code = ("import sys; sys.modules['ray'] = None\n"
            "from expmgr.config import ConfigError, ExperimentConfig\n"
            "try:\n"
            "    ExperimentConfig.load(sys.argv[1])\n"
            "except ConfigError as err:\n"
            "    print(err)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code, str(config_path)], capture_output=True, text=True,
                          env=env, timeout=60, check=True)
    assert done.stdout.strip() == (f"{config_path}:8:13: trainingService.platform: "
                                   f"not supported without Ray installed: pip install 'expmgr[ray]'")


def test_reading_a_stored_ray_config_needs_no_ray_but_validating_it_does(config_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    write(config_path, RAY)
    resolved = ResolvedConfig.from_config(ExperimentConfig.load(config_path))
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "ray" else real_find_spec(name, *args))
    config = ExperimentConfig.from_dict(resolved.to_dict())   # listings and views of a stored experiment
    assert isinstance(config.training_service, RayConfig)
    assert config.minimizes is resolved.minimizes
    with pytest.raises(ConfigError, match=r"pip install 'expmgr\[ray\]'") as refused:
        config.canonical()   # starting or resuming it
    assert refused.value.field == "trainingService.platform"


def test_validating_a_ray_config_does_not_import_ray(config_path: Path) -> None:
    write(config_path, RAY)
    code = ("import sys\n"
            "from expmgr.config import ExperimentConfig, ResolvedConfig\n"
            "ResolvedConfig.from_config(ExperimentConfig.load(sys.argv[1]))\n"
            "print('ray' in sys.modules)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code, str(config_path)], capture_output=True, text=True,
                          env=env, timeout=60, check=True)
    assert done.stdout.strip() == "False"


# -- the canonical config: stored, shown, resumed -----------------------------------------------

FULL = RAY + """\
  address: head:6379
  trialResources: {memory: 512MiB, zeta: 1, alpha: 0.5, cpu: 4}
  maxPendingTrials: 3
  runtimeEnv: {env_vars: {A: "1"}}
"""


def test_the_canonical_ray_section_is_camel_case_with_defaults_and_units_resolved(config_path: Path) -> None:
    write(config_path, FULL)
    stored = ResolvedConfig.from_config(ExperimentConfig.load(config_path)).to_dict()
    assert stored["trainingService"] == {
        "platform": "ray",
        "address": "head:6379",
        "trialResources": {"cpu": 4.0, "gpu": 0.0, "memory": 512 * 2**20, "alpha": 0.5, "zeta": 1.0},
        "maxPendingTrials": 3,
        "runtimeEnv": {"env_vars": {"A": "1"}},
    }


def test_the_stored_ray_config_resolves_again_to_the_same_service(config_path: Path) -> None:
    write(config_path, FULL)
    first = ResolvedConfig.from_config(ExperimentConfig.load(config_path))
    stored = json.loads(json.dumps(first.to_dict()))   # as the store holds it
    again = ResolvedConfig.from_config(ExperimentConfig.from_dict(stored))
    assert again.training_service == first.training_service
    assert again.to_dict() == first.to_dict()
    shown = ExperimentConfig.from_dict(stored).to_yaml()   # the experiment folder's config.yml
    reloaded = write(config_path.parent / "shown.yml", shown)
    assert ResolvedConfig.from_config(ExperimentConfig.load(reloaded)).training_service == first.training_service


def test_an_update_while_running_keeps_the_ray_service(config_path: Path) -> None:
    write(config_path, FULL)
    first = ResolvedConfig.from_config(ExperimentConfig.load(config_path))
    updated = first.with_update("trialConcurrency", 8)
    assert updated.trial_concurrency == 8 and updated.training_service == first.training_service


# -- in Python -----------------------------------------------------------------------------------

def python_config(tmp_path: Path, **fields) -> ExperimentConfig:
    return ExperimentConfig(search_space={"x": {"_type": "choice", "_value": [1, 2]}}, trial_command="true",
                            trial_code_directory=tmp_path, trial_concurrency=1, tuner={"name": "Random"}, **fields)


def test_a_ray_config_built_in_python(tmp_path: Path) -> None:
    config = python_config(tmp_path, trial_gpu_number=1, training_service=RayConfig(
        trial_resources={"cpu": 2, "memory": "1GiB", "custom_a": 1}, max_pending_trials=1))
    service = ResolvedConfig.from_config(config).training_service
    assert service == ResolvedRayConfig(trial_resources=ResolvedTrialResources(
        cpu=2.0, gpu=1.0, memory=2**30, custom=(("custom_a", 1.0),)), max_pending_trials=1)


def test_a_ray_config_as_a_dict_in_python(tmp_path: Path) -> None:
    config = python_config(tmp_path, training_service={"platform": "ray", "trial_resources": {"gpu": 1}})
    assert ResolvedConfig.from_config(config).training_service.trial_resources.gpu == 1.0  # type: ignore[union-attr]


def test_nnis_platform_argument_ray_gives_an_empty_ray_section(tmp_path: Path) -> None:
    config = ExperimentConfig("ray")
    assert config.training_service == RayConfig()
    config.training_service.trial_resources["cpu"] = 3  # type: ignore[union-attr,index]
    assert config.training_service.to_dict() == {"platform": "ray", "address": "auto",  # type: ignore[union-attr]
                                                 "trialResources": {"cpu": 3}}


def test_python_errors_name_the_attribute_path(tmp_path: Path) -> None:
    config = python_config(tmp_path, trial_gpu_number=2, training_service=RayConfig(trial_resources={"gpu": 1}))
    with pytest.raises(ConfigError) as refused:
        config.canonical()
    assert str(refused.value) == ("ExperimentConfig.training_service.trial_resources.gpu: trial_gpu_number is 2 but "
                                  "training_service.trial_resources.gpu is 1: give the GPUs of a trial in one of "
                                  "them, or the same number in both")


def test_a_section_of_another_platform_is_refused_at_platform(tmp_path: Path) -> None:
    config = python_config(tmp_path, training_service=LocalConfig(platform="ray"))
    with pytest.raises(ConfigError, match="LocalConfig is the section of platform 'local'; for platform 'ray' "
                                          "use RayConfig") as refused:
        config.canonical()
    assert refused.value.field == "trainingService.platform"


# -- NNI's platforms and formats are as they were ------------------------------------------------

def test_nnis_other_platforms_are_still_not_supported(config_path: Path) -> None:
    err = load_error(config_path, RAY.replace("platform: ray", "platform: openpai"))
    assert_error(err, config_path, 8, f"{SERVICE}.platform",
                 "not supported: openpai (NNI's openpai training service); expmgr's platforms: local, ray, remote",
                 column=13)


def test_an_unknown_platform_lists_ray_among_the_known_ones(config_path: Path) -> None:
    err = load_error(config_path, RAY.replace("platform: ray", "platform: rya"))
    assert_error(err, config_path, 8, f"{SERVICE}.platform", "unknown platform 'rya'; did you mean 'ray'?")


def test_nnis_v1_format_has_no_ray_platform(config_path: Path) -> None:
    err = load_error(config_path, """\
authorName: me
experimentName: v1
trialConcurrency: 1
trainingServicePlatform: ray
searchSpacePath: space.json
tuner:
  builtinTunerName: TPE
trial:
  command: python3 trial.py
  codeDir: .
""")
    assert_error(err, config_path, 4, "trainingServicePlatform",
                 "not supported in NNI's v1 format: ray; write a v2 config with trainingService: {platform: ray, ...}",
                 column=26)


def test_resources_are_checked_in_the_order_they_are_written(config_path: Path) -> None:
    err = resources_error(config_path, "{cpu: -1, my_resource: -1}")
    assert err.field == f"{RESOURCES}.cpu", str(err)


def test_a_resource_written_as_null_takes_its_default(config_path: Path) -> None:
    service = resolved_service(config_path, RAY + "  trialResources: {cpu: null, gpu: null, memory: null}\n")
    assert service.trial_resources == ResolvedTrialResources()


# -- storagePath: no shared folder (docs/ray.md) ----------------------------------------------

def test_storage_path_is_read_into_the_resolved_service_and_survives_the_round_trip(config_path: Path, tmp_path: Path) -> None:
    write(config_path, RAY + f"  storagePath: {tmp_path / 'store'}\n")
    first = ResolvedConfig.from_config(ExperimentConfig.load(config_path))
    assert isinstance(first.training_service, ResolvedRayConfig)
    assert first.training_service.storage_path == str(tmp_path / "store")
    again = ResolvedConfig.from_config(ExperimentConfig.from_dict(first.to_dict()))
    assert again.training_service == first.training_service, "kept in the stored config (resume)"
    assert resolved_service(config_path, RAY).storage_path is None, "none: the shared-folder mode"


@pytest.mark.parametrize("value, fragment", [
    ("relative/store", "'relative/store' is a relative path: give an absolute path"),
    ("''", "the storage path is empty: give an absolute path or an s3:// URI"),
    ("[a, b]", "expected an absolute path or an s3:// URI"),
    ("5", "expected an absolute path or an s3:// URI"),
])
def test_storage_path_must_be_an_absolute_path_or_an_s3_uri(config_path: Path, value: str, fragment: str) -> None:
    err = load_error(config_path, RAY + f"  storagePath: {value}\n")
    assert_error(err, config_path, 9, f"{SERVICE}.storagePath", fragment, column=16)


def test_storage_path_is_refused_for_the_local_platform(config_path: Path) -> None:
    err = load_error(config_path, RAY.replace("platform: ray", "platform: local") + "  storagePath: /store\n")
    assert err.field == f"{SERVICE}.storagePath", str(err)
