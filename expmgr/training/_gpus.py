"""The local training service's GPUs, as NNI's local service gives them: which GPUs this
machine has (``nvidia-smi``), which of them trials may use (``gpuIndices``), which a trial
may be given now, and why a trial waits when none is::

    found = await query_gpus()                  # None: no nvidia-smi, or it failed
    gpus = GpuScheduler(usable_gpus(1, config, found), config, per_trial=1)
    gpus.observe(found, own_process_groups)     # again whenever nvidia-smi is asked again
    if gpus.available():
        visible = gpus.take("Xy3zQ")            # CUDA_VISIBLE_DEVICES of the trial
    else:
        print(gpus.waiting_reason())            # "waiting for a GPU: ..."
    gpus.release("Xy3zQ")

The rules (NNI 3.0's local service and its docs): a trial is given ``trialGpuNumber``
distinct GPUs among ``gpuIndices`` (all GPUs nvidia-smi lists when not given), each
running fewer than ``maxTrialNumberPerGpu`` of this experiment's trials; with
``useActiveGpu: false`` (the default) a GPU that runs a process of anyone else (another
experiment's trial, another user's program) is not given. The experiment's own trials'
processes never count against it (their GPUs are counted by ``maxTrialNumberPerGpu``).
Only compute (CUDA) processes are seen: ``nvidia-smi --query-compute-apps``.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from expmgr.training.base import TrainingServiceError

if TYPE_CHECKING:
    from expmgr.config import ResolvedLocalConfig

NVIDIA_SMI_TIMEOUT = 10.0
"""Seconds an nvidia-smi query may take before it counts as failed."""

_QUERY_GPUS = ["--query-gpu=index,uuid", "--format=csv,noheader,nounits"]
_QUERY_PROCESSES = ["--query-compute-apps=gpu_uuid,pid", "--format=csv,noheader,nounits"]


@dataclass(frozen=True)
class GpuSnapshot:
    """What nvidia-smi said at one moment."""

    indices: tuple[int, ...]
    """The GPUs it lists."""
    processes: dict[int, tuple[int, ...]] = field(default_factory=dict)
    """The pids of the compute processes on each GPU (by index); GPUs with none are left out."""
    processes_known: bool = True
    """False: nvidia-smi listed the GPUs but not their processes (``processes`` is empty)."""


def _parse(gpu_lines: str, process_lines: str) -> GpuSnapshot:
    by_uuid: dict[str, int] = {}
    for line in gpu_lines.splitlines():
        index, _, uuid = (part.strip() for part in line.partition(","))
        if index.isdigit():
            by_uuid[uuid] = int(index)
    processes: dict[int, list[int]] = {}
    for line in process_lines.splitlines():
        uuid, _, pid = (part.strip() for part in line.partition(","))
        if uuid in by_uuid and pid.isdigit():
            processes.setdefault(by_uuid[uuid], []).append(int(pid))
    return GpuSnapshot(tuple(sorted(by_uuid.values())),
                       {index: tuple(pids) for index, pids in processes.items()})


async def query_gpus() -> GpuSnapshot | None:
    """This machine's GPUs and their processes now; None without nvidia-smi or when it cannot
    list the GPUs. A GPU whose processes it cannot tell (a query some drivers refuse) is
    taken as running none: ``GpuSnapshot.processes_known`` is False then."""
    program = shutil.which("nvidia-smi")
    if program is None:
        return None
    gpus = await _run(program, _QUERY_GPUS)
    if gpus is None:
        return None
    processes = await _run(program, _QUERY_PROCESSES)
    found = _parse(gpus, processes or "")
    return found if processes is not None else replace(found, processes_known=False)


async def _run(program: str, arguments: list[str]) -> str | None:
    """What ``program arguments`` printed; None when it could not run, failed or took too long."""
    try:
        process = await asyncio.create_subprocess_exec(program, *arguments, stdout=subprocess.PIPE,
                                                       stderr=subprocess.DEVNULL)
    except OSError:
        return None
    try:
        out, _ = await asyncio.wait_for(process.communicate(), NVIDIA_SMI_TIMEOUT)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        return None
    return out.decode(errors="replace") if process.returncode == 0 else None


def _listed(indices: list[int] | tuple[int, ...]) -> str:
    return ", ".join(map(str, indices)) or "none"


def usable_gpus(per_trial: int, config: "ResolvedLocalConfig", found: GpuSnapshot | None) -> list[int]:
    """The GPUs trials may be given: ``gpuIndices`` (those nvidia-smi lists, when it answers),
    else every GPU it lists. Raises TrainingServiceError, one line naming the fields, when
    they are fewer than ``trialGpuNumber``: no trial could ever start."""
    configured = config.gpu_indices
    if configured is None:
        if found is None:
            raise TrainingServiceError(
                f"trialGpuNumber is {per_trial} but nvidia-smi finds no GPU on this machine (not installed, or "
                "no driver): no trial could ever start; leave trialGpuNumber out (or 0) to run trials without "
                "GPUs, or list the GPUs in trainingService.gpuIndices")
        if len(found.indices) < per_trial:
            raise TrainingServiceError(
                f"trialGpuNumber is {per_trial} but this machine has {len(found.indices)} GPU(s) "
                f"(nvidia-smi lists {_listed(found.indices)}): no trial could ever start; lower trialGpuNumber")
        return list(found.indices)
    usable = [index for index in configured if found is None or index in found.indices]
    if len(usable) < per_trial:
        seen = "" if found is None else f"; nvidia-smi lists {_listed(found.indices)}"
        raise TrainingServiceError(
            f"trialGpuNumber is {per_trial} but trainingService.gpuIndices {list(configured)} gives "
            f"{len(usable)} GPU(s) on this machine{seen}: no trial could ever start; lower trialGpuNumber "
            "or list more GPUs in gpuIndices")
    return usable


class GpuScheduler:
    """Which GPUs each running trial holds, and which are free; see the module docstring."""

    def __init__(self, usable: list[int], config: "ResolvedLocalConfig", per_trial: int) -> None:
        self._usable = usable
        self._per_gpu = config.max_trial_number_per_gpu
        self._use_active = config.use_active_gpu
        self._per_trial = per_trial
        self._held: dict[str, list[int]] = {}
        self._trials_on = {index: 0 for index in usable}
        self._used_elsewhere: frozenset[int] = frozenset()
        """GPUs running a process that is not one of this experiment's trials."""
        self._unlisted: frozenset[int] = frozenset()
        """GPUs of gpuIndices that nvidia-smi stopped listing."""

    def observe(self, found: GpuSnapshot, own_groups: set[int]) -> bool:
        """Take what nvidia-smi said; ``own_groups``: the process groups of this experiment's
        running trials. True if that changed which GPUs are free, or why one is not."""
        before = (self._unlisted, self._used_elsewhere)
        self._unlisted = frozenset(index for index in self._usable if index not in found.indices)
        self._used_elsewhere = frozenset(index for index, pids in found.processes.items()
                                         if any(not _in_groups(pid, own_groups) for pid in pids))
        return (self._unlisted, self._used_elsewhere) != before

    def _free(self) -> list[int]:
        """The GPUs one more trial may be given, the least used first."""
        free = [index for index in self._usable
                if self._trials_on[index] < self._per_gpu and index not in self._unlisted
                and (self._use_active or index not in self._used_elsewhere)]
        return sorted(free, key=lambda index: self._trials_on[index])

    def available(self) -> bool:
        return len(self._free()) >= self._per_trial

    def take(self, trial_id: str) -> list[int]:
        chosen = sorted(self._free()[: self._per_trial])
        if len(chosen) < self._per_trial:
            raise TrainingServiceError(f"trial {trial_id}: {self.waiting_reason()}")
        for index in chosen:
            self._trials_on[index] += 1
        self._held[trial_id] = chosen
        return chosen

    def hold(self, trial_id: str, indices: list[int]) -> None:
        """A trial already runs on ``indices`` (one a resume took over): they count as taken."""
        held = [index for index in indices if index in self._trials_on]
        for index in held:
            self._trials_on[index] += 1
        self._held[trial_id] = held

    def release(self, trial_id: str) -> None:
        for index in self._held.pop(trial_id, []):
            self._trials_on[index] -= 1

    def waiting_reason(self) -> str | None:
        """Why a trial cannot be given its GPUs now, naming each GPU and the field that keeps
        it; None when it can."""
        free = self._free()
        if len(free) >= self._per_trial:
            return None
        why = []
        for index in self._usable:
            if index in free:
                why.append(f"GPU {index} is free")
            elif index in self._unlisted:
                why.append(f"GPU {index} is not listed by nvidia-smi")
            elif self._trials_on[index] >= self._per_gpu:
                why.append(f"GPU {index} runs {self._trials_on[index]} trial(s) of this experiment "
                           f"(maxTrialNumberPerGpu: {self._per_gpu})")
            else:
                why.append(f"GPU {index} is used by another process (useActiveGpu: false)")
        return f"waiting for a GPU: a trial needs {self._per_trial} (trialGpuNumber); " + "; ".join(why)


def _in_groups(pid: int, groups: set[int]) -> bool:
    """Whether process ``pid`` runs in one of the process groups ``groups`` (a process
    this machine cannot see, e.g. one of another container, is not)."""
    try:
        return os.getpgid(pid) in groups
    except OSError:
        return False
