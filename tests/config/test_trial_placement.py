"""``trainingService.trialPlacement``, a Ray trial over several nodes (Ray Train's
ScalingConfig): its fields and defaults, each refusal naming the field and its line, refused
beside a different trialResources and on other platforms, and the canonical round trip that
the store and resume use."""
from __future__ import annotations

from pathlib import Path

import pytest

from expmgr.config import (ExperimentConfig, ResolvedConfig, ResolvedRayConfig, ResolvedTrialPlacement,
                           ResolvedTrialResources)
from tests.helpers.config import assert_error, load_error, write

# a valid config, 8 lines; tests append lines 9+ (keys of trainingService), as test_ray_config.py's
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

PLACEMENT = "trainingService.trialPlacement"


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    return tmp_path / "config.yml"


def resolved(path: Path, text: str) -> ResolvedRayConfig:
    write(path, text)
    service = ResolvedConfig.from_config(ExperimentConfig.load(path)).training_service
    assert isinstance(service, ResolvedRayConfig)
    return service


def test_workers_resources_and_strategy_are_read_with_ray_trains_default_strategy(config_path: Path) -> None:
    service = resolved(config_path, RAY + "  trialPlacement: {workers: 2, resourcesPerWorker: {cpu: 2, gpu: 1}}\n")
    each = ResolvedTrialResources(cpu=2.0, gpu=1.0)
    assert service.trial_placement == ResolvedTrialPlacement(workers=2, resources=each, strategy="PACK")
    assert service.trial_resources == each, "trialResources, canonical, is each rank's"
    spread = resolved(config_path, RAY + "  trial_placement: {workers: 3, strategy: strict_spread}\n")
    assert spread.trial_placement == ResolvedTrialPlacement(workers=3, resources=ResolvedTrialResources(),
                                                            strategy="STRICT_SPREAD")


def test_without_it_a_trial_is_one_process(config_path: Path) -> None:
    assert resolved(config_path, RAY).trial_placement is None


def test_the_placement_survives_the_round_trip(config_path: Path) -> None:
    write(config_path, RAY + "  trialPlacement: {workers: 2, resourcesPerWorker: {cpu: 1, gpu: 1}, strategy: SPREAD}\n")
    first = ResolvedConfig.from_config(ExperimentConfig.load(config_path))
    again = ResolvedConfig.from_config(ExperimentConfig.from_dict(first.to_dict()))
    assert again.training_service == first.training_service


@pytest.mark.parametrize("placement, field, fragment", [
    ("{resourcesPerWorker: {cpu: 1}}", f"{PLACEMENT}.workers", "required: the trial's number of workers"),
    ("{workers: 0}", f"{PLACEMENT}.workers", "expected a positive integer, got 0"),
    ("{workers: 2000}", f"{PLACEMENT}.workers", "at most 1,024"),
    ("{workers: 2, strategy: DIAGONAL}", f"{PLACEMENT}.strategy",
     "expected one of PACK, SPREAD, STRICT_PACK, STRICT_SPREAD, got 'DIAGONAL'"),
    ("{workers: 2, resourcesPerWorker: {cpu: -1}}", f"{PLACEMENT}.resourcesPerWorker.cpu", "expected a number >= 0"),
    ("{workers: 2, resourcesPerWorker: {cpu: 0}}", f"{PLACEMENT}.resourcesPerWorker",
     "needs each worker to ask for some resource"),
    ("{workers: 2, nodes: 2}", f"{PLACEMENT}.nodes", "unknown key"),
    ("[2]", PLACEMENT, "expected a mapping such as {workers: 2"),
])
def test_a_bad_placement_is_refused_at_its_field_and_line(config_path: Path, placement: str, field: str,
                                                            fragment: str) -> None:
    err = load_error(config_path, RAY + f"  trialPlacement: {placement}\n")
    assert_error(err, config_path, 9, field, fragment)


def test_a_different_trial_resources_beside_it_is_refused(config_path: Path) -> None:
    err = load_error(config_path, RAY + "  trialResources: {cpu: 4}\n  trialPlacement: {workers: 2}\n")
    assert_error(err, config_path, 10, PLACEMENT, "give trainingService.trialResources or "
                                                  "trainingService.trialPlacement, not both")


def test_it_is_refused_on_another_platform(config_path: Path) -> None:
    err = load_error(config_path, RAY.replace("platform: ray", "platform: local") + "  trialPlacement: {workers: 2}\n")
    assert_error(err, config_path, 9, PLACEMENT, "trialPlacement is a field of platform ray, not of local")


def test_it_is_refused_beside_a_storage_path(config_path: Path) -> None:
    # Each rank would stream its files back from a folder of its own node: not built yet.
    err = load_error(config_path, RAY + "  storagePath: /shared/checkpoints\n  trialPlacement: {workers: 2}\n")
    assert_error(err, config_path, 10, PLACEMENT, "multi-node trials need the shared folder for now: give "
                                                  "trainingService.trialPlacement or trainingService.storagePath")
