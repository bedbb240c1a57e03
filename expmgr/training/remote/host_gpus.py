"""The GPUs of one remote host, by the local service's rules (``training._gpus``: ``gpuIndices``,
``maxTrialNumberPerGpu``, ``useActiveGpu``), with ``nvidia-smi`` run on the host over SSH::

    gpus = await HostGpus.start(connection, machine, per_trial=1)   # RemoteHostError: no trial could run
    if gpus.scheduler.available():
        env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, gpus.scheduler.take("Xy3zQ")))
    changed = await gpus.refresh(own_groups={4242})   # the host's pgids of this experiment's trials

One command asks for the GPUs, their compute processes and every process's group on the host,
so that this experiment's own trials (and their children) never count as another's use.
"""
from __future__ import annotations

from dataclasses import replace

from expmgr.config import ResolvedLocalConfig, ResolvedRemoteMachine
from expmgr.training._gpus import NVIDIA_SMI_TIMEOUT, GpuScheduler, GpuSnapshot, _parse, usable_gpus
from expmgr.training.base import TrainingServiceError
from expmgr.training.remote.ssh import HostConnection, RemoteHostError

_SEPARATOR = "--expmgr-gpus--"
_REFUSED = "--expmgr-processes-refused--"
QUERY = (f"nvidia-smi --query-gpu=index,uuid --format=csv,noheader,nounits && echo {_SEPARATOR} && "
         f"(nvidia-smi --query-compute-apps=gpu_uuid,pid --format=csv,noheader,nounits || echo {_REFUSED}) && "
         f"echo {_SEPARATOR} && ps -e -o pid=,pgid=")
"""What the host is asked: its GPUs, their compute processes, and each process's group."""


async def query_host_gpus(connection: HostConnection) -> tuple[GpuSnapshot | None, dict[int, int]]:
    """The host's GPUs and their processes now, and each of its processes' group; (None, {})
    without nvidia-smi there, or when it cannot list the GPUs."""
    try:
        result = await connection.run(QUERY, timeout=NVIDIA_SMI_TIMEOUT)
    except RemoteHostError:
        return None, {}
    parts = result.stdout.split(f"{_SEPARATOR}\n")
    if result.exit_status != 0 or len(parts) != 3:
        return None, {}
    gpus, processes, listing = parts
    refused = processes.strip() == _REFUSED
    found = _parse(gpus, "" if refused else processes)
    groups = {}
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit():
            groups[int(fields[0])] = int(fields[1])
    return (replace(found, processes_known=False) if refused else found), groups


def _without_own(found: GpuSnapshot, groups: dict[int, int], own_groups: set[int]) -> GpuSnapshot:
    """``found`` without the processes of this experiment's trials (by their group on the host)."""
    others = {index: tuple(pid for pid in pids if groups.get(pid) not in own_groups)
              for index, pids in found.processes.items()}
    return replace(found, processes={index: pids for index, pids in others.items() if pids})


class HostGpus:
    """One host's GPU slots (see the module docstring)."""

    def __init__(self, connection: HostConnection, scheduler: GpuScheduler, watched: bool) -> None:
        self._connection = connection
        self.scheduler = scheduler
        self.watched = watched
        """Whether others' use of the GPUs is followed (``useActiveGpu: false`` and nvidia-smi answers)."""

    @classmethod
    async def start(cls, connection: HostConnection, machine: ResolvedRemoteMachine, per_trial: int) -> HostGpus:
        found, groups = await query_host_gpus(connection)
        rules = ResolvedLocalConfig(use_active_gpu=machine.use_active_gpu,
                                    max_trial_number_per_gpu=machine.max_trial_number_per_gpu,
                                    gpu_indices=machine.gpu_indices)
        try:
            usable = usable_gpus(per_trial, rules, found)
        except TrainingServiceError as error:  # its words say "this machine": the host's
            raise RemoteHostError(connection.name, str(error).replace("this machine", "this host")) from None
        scheduler = GpuScheduler(usable, rules, per_trial)
        if found is not None:
            scheduler.observe(_without_own(found, groups, set()), set())
        return cls(connection, scheduler, watched=found is not None and not machine.use_active_gpu)

    async def refresh(self, own_groups: set[int]) -> bool:
        """Ask the host again; True if that changed which GPUs are free."""
        found, groups = await query_host_gpus(self._connection)
        if found is None:
            return False
        return self.scheduler.observe(_without_own(found, groups, own_groups), set())
