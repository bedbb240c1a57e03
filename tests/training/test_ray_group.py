"""The rules of multi-node trials that need no cluster (``expmgr/training/ray_group.py``): the
variables each rank gets, as torchrun gives them, and the start check that refuses a placement
the cluster's nodes can never hold. The trials themselves: test_ray_multinode.py."""
from __future__ import annotations

import pytest

from expmgr.config import ResolvedTrialPlacement, ResolvedTrialResources
from expmgr.training.base import TrainingServiceError
from expmgr.training.files import is_trial_log
from expmgr.training.ray_group import check_group_fits, rank_environments


def test_ranks_are_numbered_per_node_in_rank_order_and_meet_at_rank_0s_node() -> None:
    places = [("10.0.0.1", "a"), ("10.0.0.2", "b"), ("10.0.0.1", "a")]
    envs = rank_environments(places, 29500)
    assert [(env["RANK"], env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"], env["GROUP_RANK"]) for env in envs] == [
        ("0", "0", "2", "0"), ("1", "0", "1", "1"), ("2", "1", "2", "0")]
    assert {(env["WORLD_SIZE"], env["GROUP_WORLD_SIZE"], env["MASTER_ADDR"], env["MASTER_PORT"]) for env in envs} == {
        ("3", "2", "10.0.0.1", "29500")}
    assert [env["EXPMGR_TRIAL_RANK"] for env in envs] == ["0", "1", "2"]


NODES = [{"NodeManagerAddress": "head", "Resources": {"CPU": 2.0, "GPU": 2.0}},
         {"NodeManagerAddress": "worker", "Resources": {"CPU": 2.0, "GPU": 2.0}}]


@pytest.mark.parametrize("workers, cpu, strategy", [
    (2, 1, "STRICT_SPREAD"), (2, 2, "STRICT_SPREAD"), (2, 1, "STRICT_PACK"), (4, 1, "PACK"), (4, 1, "SPREAD"),
])
def test_a_placement_the_nodes_can_hold_passes(workers: int, cpu: float, strategy: str) -> None:
    check_group_fits(ResolvedTrialPlacement(workers, ResolvedTrialResources(cpu=cpu), strategy), NODES)


@pytest.mark.parametrize("workers, cpu, strategy", [
    (3, 1, "STRICT_SPREAD"), (2, 1.5, "STRICT_PACK"), (3, 1.5, "PACK"), (5, 1, "SPREAD"), (1, 3, "PACK"),
])
def test_a_placement_the_nodes_can_never_hold_is_refused_naming_what_they_have(
        workers: int, cpu: float, strategy: str) -> None:
    with pytest.raises(TrainingServiceError) as info:
        check_group_fits(ResolvedTrialPlacement(workers, ResolvedTrialResources(cpu=cpu), strategy), NODES)
    assert str(info.value) == (f"the Ray cluster cannot place trialPlacement's {workers} workers of (cpu: {cpu:g}) "
                               f"with strategy {strategy}; its nodes have head: cpu 2; worker: cpu 2")


def test_workers_asking_for_nothing_are_refused() -> None:
    with pytest.raises(TrainingServiceError, match="resourcesPerWorker asks for nothing"):
        check_group_fits(ResolvedTrialPlacement(2, ResolvedTrialResources(cpu=0), "PACK"), NODES)


@pytest.mark.parametrize("name, served", [
    ("stdout", True), ("rank1.stdout", True), ("rank2.stderr", True), ("rank1023.trial.log", True),
    ("rank0.stdout", False), ("rank01.stdout", False), ("rank1024.stdout", False), ("rank1.parameter.json", False),
    ("rank.stdout", False), ("rank1.stdout.1", False), ("rank\u0661.stdout", False),
])
def test_a_ranks_logs_are_the_trial_logs_served_besides_the_trials_own(name: str, served: bool) -> None:
    assert is_trial_log(name) is served
