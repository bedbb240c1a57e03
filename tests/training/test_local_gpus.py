"""The local service's GPU rules (expmgr/training/_gpus.py) without processes: which GPUs
exist and may be used, which a trial is given, and the reason it waits. The same rules run
end to end, with a stand-in nvidia-smi, in tests/experiment/test_gpus.py."""
from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from expmgr.config import ResolvedLocalConfig
from expmgr.training import TrainingServiceError
from expmgr.training._gpus import GpuScheduler, GpuSnapshot, _parse, query_gpus, usable_gpus
from tests.helpers.fake_nvidia_smi import FakeNvidiaSmi

OTHER_PROCESS = 2 ** 22 + 1
"""A pid above Linux's highest (4194304): no process here, so never one of the experiment's trials."""


def test_nvidia_smis_processes_are_put_on_their_gpus_by_uuid():
    found = _parse("0, GPU-aaa\n1, GPU-bbb\n", "GPU-bbb, 41\nGPU-bbb, 42\nGPU-zzz, 43\n")
    assert found == GpuSnapshot((0, 1), {1: (41, 42)}), "a process of a GPU not listed is left out"


def test_a_gpu_another_process_uses_is_given_only_with_use_active_gpu():
    found = GpuSnapshot((0, 1), {0: (OTHER_PROCESS,)})
    strict = GpuScheduler([0, 1], ResolvedLocalConfig(use_active_gpu=False), per_trial=1)
    strict.observe(found, own_groups=set())
    assert strict.take("a") == [1]
    assert not strict.available()
    assert strict.waiting_reason() == (
        "waiting for a GPU: a trial needs 1 (trialGpuNumber); GPU 0 is used by another process (useActiveGpu: "
        "false); GPU 1 runs 1 trial(s) of this experiment (maxTrialNumberPerGpu: 1)")
    lenient = GpuScheduler([0, 1], ResolvedLocalConfig(use_active_gpu=True), per_trial=1)
    lenient.observe(found, own_groups=set())
    assert sorted(lenient.take("a") + lenient.take("b")) == [0, 1]


def test_the_processes_of_the_experiments_own_trials_never_make_a_gpu_busy():
    gpus = GpuScheduler([0], ResolvedLocalConfig(max_trial_number_per_gpu=2), per_trial=1)
    assert gpus.take("a") == [0]
    # This test's process stands for trial a's: its process group is one of the trials'.
    assert not gpus.observe(GpuSnapshot((0,), {0: (os.getpid(),)}), own_groups={os.getpgid(0)})
    assert gpus.take("b") == [0], "maxTrialNumberPerGpu 2: a second trial shares it"
    assert gpus.observe(GpuSnapshot((0,), {0: (os.getpid(),)}), own_groups=set()), "someone else's now"
    gpus.release("b")
    assert gpus.waiting_reason() == ("waiting for a GPU: a trial needs 1 (trialGpuNumber); "
                                     "GPU 0 is used by another process (useActiveGpu: false)")


def test_a_trial_gets_the_least_used_gpus_and_gives_them_back():
    gpus = GpuScheduler([0, 1, 2], ResolvedLocalConfig(max_trial_number_per_gpu=2), per_trial=2)
    assert gpus.take("a") == [0, 1]
    assert gpus.take("b") == [0, 2], "GPU 2 (no trial) first, then the lowest index of those with one"
    assert gpus.take("c") == [1, 2]
    assert not gpus.available(), "maxTrialNumberPerGpu 2: each GPU runs two trials"
    gpus.release("a")
    assert gpus.take("d") == [0, 1]


def test_a_gpu_nvidia_smi_stops_listing_is_not_given():
    gpus = GpuScheduler([0, 1], ResolvedLocalConfig(use_active_gpu=True), per_trial=2)
    assert gpus.observe(GpuSnapshot((0,)), own_groups=set())
    assert gpus.waiting_reason() == ("waiting for a GPU: a trial needs 2 (trialGpuNumber); GPU 0 is free; "
                                     "GPU 1 is not listed by nvidia-smi")


@pytest.mark.parametrize("indices, found, usable", [
    (None, GpuSnapshot((0, 1, 2)), [0, 1, 2]),
    ((2, 0), GpuSnapshot((0, 1, 2)), [2, 0]),
    ((0, 5), GpuSnapshot((0, 1)), [0]),
    ((4, 5), None, [4, 5]),   # no nvidia-smi: gpuIndices is taken at its word
])
def test_the_usable_gpus_are_gpu_indices_that_nvidia_smi_lists_or_all_it_lists(indices, found, usable):
    assert usable_gpus(1, ResolvedLocalConfig(gpu_indices=indices), found) == usable


def test_fewer_usable_gpus_than_a_trial_needs_is_an_error_naming_the_fields():
    with pytest.raises(TrainingServiceError, match=r"^trialGpuNumber is 3 but trainingService.gpuIndices \[0, 1\] "
                                                   r"gives 2 GPU\(s\) on this machine: no trial could ever start"):
        usable_gpus(3, ResolvedLocalConfig(gpu_indices=(0, 1)), None)


def test_nvidia_smi_is_asked_for_the_gpus_and_their_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    gpus = FakeNvidiaSmi(tmp_path, monkeypatch)
    gpus.show([0, 1], processes={1: [41]})
    assert asyncio.run(query_gpus()) == GpuSnapshot((0, 1), {1: (41,)})
    gpus.show([0, 1], refuse_processes=True)
    assert asyncio.run(query_gpus()) == GpuSnapshot((0, 1), {}, processes_known=False), \
        "GPUs listed but not their processes: still GPUs, said to be unknown"
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert asyncio.run(query_gpus()) is None
