"""The remote training service (NNI's ``platform: remote``): trials on the machines of
``machineList``, reached by SSH, with no shared filesystem. docs/remote.md is the user's guide.

    service = create_remote_service(resolved, runner, paths, "127.0.0.1")
    await service.start()        # every host connected, code sent, agents up; else one-line error
    await service.launch(TrialLaunch(...))     # on the least-loaded connected host
    await service.stop(grace_period=5.0)

Each host (``_host.RemoteHost``) runs a host agent over one SSH session; the agent runs the
trials and sends their output, which its client writes into the manager's ``trials/<id>/``
folders, so the trial files are the local service's (``SharedTrialFolders``). A trial reports
to a port of its host's loopback forwarded to the manager's server. A host that drops loses its
running attempts (CRASHED: the runner retries them, elsewhere while it is away) and is
reconnected in the background with backoff; it takes trials again once back.

With ``reattachWindow`` each host's agent keeps its trials when the manager's connection goes
(the window, its watchdog's state in the host's ``watchdog/`` folder); a resume's service finds
them when it connects (``RemoteHost.kept``), and ``adopt`` takes one over by pid, start time and
the old session's marker (or its end, written meanwhile), without a round trip; ``end_adoption``
releases the old watchdogs. ``leave_running`` closes the connections without ``stop``.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import shlex
import signal as signals
from pathlib import Path
from typing import TYPE_CHECKING

from expmgr import trial as trial_api
from expmgr.config._limits import DEFAULT_TRIAL_PROCESS_LIMIT
from expmgr.layout import ExperimentPaths
from expmgr.rotation import UNBOUNDED, RotationLimits
from expmgr.training._folder import prepare_folder
from expmgr.training._process import UNBUFFERED_ENV
from expmgr.training.base import (SystemLaunchError, TrainingService, TrainingServiceError, TrialEvents,
                                  TrialLaunch, launch_error)
from expmgr.training.remote._host import RemoteHost
from expmgr.training.remote.files import RemoteTrialFiles
from expmgr.training.remote.agent_client import HostLaunch, host_trial_environment
from expmgr.training.remote.ssh import RemoteHostError

if TYPE_CHECKING:
    from expmgr.config import ResolvedConfig, ResolvedRemoteConfig

_SAME_PROCESS = 0.01
"""Seconds two start times of one pid may differ by (``_kept._SAME_PROCESS``)."""
RECONNECT_FIRST_DELAY = 0.5
RECONNECT_MAX_DELAY = 30.0
"""A host that dropped is tried again after 0.5 s, then twice as long each time, at most 30 s."""
_STOP_TIMEOUT = 30.0
"""How long ``stop`` waits, after SIGKILL, for the agents to tell the trials' ends."""
_log = logging.getLogger("nni.training.remote")


class RemoteTrainingService(TrainingService):
    """See the module docstring."""

    def __init__(self, config: "ResolvedRemoteConfig", code_directory: Path, events: TrialEvents,
                 paths: ExperimentPaths, manager_host: str = "127.0.0.1",
                 log_limits: RotationLimits = UNBOUNDED, trial_gpu_number: int | None = None) -> None:
        self._config = config
        self._code_directory = Path(code_directory)
        self._events = events
        self._paths = paths
        self._manager_host = manager_host
        self.files: RemoteTrialFiles = RemoteTrialFiles(paths)
        self.files.attach(self)
        # The experiment's own choice of Python's output buffering reaches the hosts' trials.
        self._forwarded_env = {name: os.environ[name] for name in (UNBUFFERED_ENV,) if name in os.environ}
        self._trial_gpu_number = trial_gpu_number
        self._hosts = [RemoteHost(machine, experiment_id=paths.root.name, events=_HostEvents(self),
                                  folder_of=self.files.folder_of, on_gone=self._host_gone,
                                  trial_gpu_number=trial_gpu_number, on_gpus_changed=self._capacity_changed,
                                  log_limits=log_limits, log=_log, reattach_window=config.reattach_window)
                       for machine in config.machines]
        self._placed: dict[str, RemoteHost] = {}
        """Trial id -> the host its running attempt was launched on."""
        self._last_host: dict[str, RemoteHost] = {}
        """Trial id -> the host it last ran on (its checkpoint is there)."""
        self._signal_at_start: dict[str, int] = {}
        self._idle = asyncio.Event()
        self._reconnecting: dict[RemoteHost, asyncio.Task] = {}
        self._started = False
        self._stopping = False
        self._adopted: dict[RemoteHost, list[int]] = {}
        """The pids this run took over, by host (told to the old watchdogs by ``end_adoption``)."""
        self._adopting = True
        """Until ``end_adoption``: the hosts' kept trials may be adopted."""

    # -- start and stop --------------------------------------------------------

    async def start(self) -> None:
        results = await asyncio.gather(*(host.connect(self._code_directory) for host in self._hosts),
                                       return_exceptions=True)
        failures = [result for result in results if isinstance(result, BaseException)]
        if failures:
            await asyncio.gather(*(host.close(timeout=5.0) for host in self._hosts), return_exceptions=True)
            for failure in failures:
                if not isinstance(failure, RemoteHostError):
                    raise failure
            raise TrainingServiceError("cannot start the remote training service: "
                                       + "; ".join(str(failure) for failure in failures))
        # A resume: what the kept trials reported while no manager ran is stored at their takeover.
        await asyncio.gather(*(host.catch_up_reports() for host in self._hosts if host.kept.session is not None))
        self._started = True
        self._idle.set()

    async def leave_running(self) -> bool:
        """With ``reattachWindow``: close every host's connection without ``stop``; each agent
        keeps its trials for the window, for a resume to ``adopt``."""
        if self._config.reattach_window <= 0:
            return False
        self._started = False
        for task in self._reconnecting.values():
            task.cancel()
        self._reconnecting.clear()
        await asyncio.gather(*(host.leave() for host in self._hosts), return_exceptions=True)
        for trial_id in list(self._placed):
            host = self._placed.pop(trial_id)
            if host.gpus is not None:
                host.gpus.scheduler.release(trial_id)
        self._signal_at_start.clear()
        self._idle.set()
        return True

    def adopt(self, trial_id: str, attempt: int, pid: int, pid_started: float) -> bool:
        """Found in what a host's new agent said the run before left there (``RemoteHost.kept``):
        still running as that attempt of the old session, or ended with its end written."""
        if not self._adopting:
            return False
        for host in self._hosts:
            kept, client = host.kept, host.client
            if kept.session is None or client is None or pid in kept.window_ended:
                continue
            running = next((each for each in kept.processes if each.pid == pid and each.trial_id == trial_id
                            and each.attempt == attempt and abs(each.started - pid_started) <= _SAME_PROCESS), None)
            if running is None and (trial_id, attempt) not in kept.statuses:
                continue
            self._placed[trial_id] = self._last_host[trial_id] = host
            host.running.add(trial_id)
            self._idle.clear()
            if running is not None:
                host.trial_pids[trial_id] = pid
                self._adopted.setdefault(host, []).append(pid)
                if host.gpus is not None:   # its GPUs are not given to another trial
                    host.gpus.scheduler.hold(trial_id, list(running.gpus))
            client.adopt(trial_id, attempt, pid, pid_started, host.trial_folder(trial_id))
            return True
        return False

    def end_adoption(self) -> None:
        self._adopting = False
        for host in self._hosts:
            if host.kept.session is not None and host.client is not None:
                host.client.release(self._adopted.get(host, []))

    def manager_gone_at(self) -> float | None:
        """The earliest time a host's old watchdog saw its manager's connection go."""
        return min((host.kept.gone_at for host in self._hosts if host.kept.gone_at is not None), default=None)

    async def stop(self, grace_period: float, signum: int = signals.SIGTERM) -> None:
        if not self._started:
            return
        self._started, self._stopping = False, True
        for task in self._reconnecting.values():
            task.cancel()
        self._reconnecting.clear()
        for trial_id in list(self._placed):
            self.signal(trial_id, signum)
        if self._placed and signum != signals.SIGKILL:
            await _wait_event(self._idle, grace_period)
        if self._placed:
            for trial_id in list(self._placed):
                self.signal(trial_id, signals.SIGKILL)
            await _wait_event(self._idle, _STOP_TIMEOUT)
        # The agents kill what is left (an attempt not started yet) and tell each end.
        await asyncio.gather(*(host.close(timeout=_STOP_TIMEOUT) for host in self._hosts), return_exceptions=True)
        self._stopping = False

    # -- trials ----------------------------------------------------------------

    def has_capacity(self) -> bool:
        """A connected host takes trials (``trialConcurrency``, the runner's, is the limit),
        when it has the GPUs a trial asks for (``trialGpuNumber``)."""
        return self._started and any(host.has_room() for host in self._hosts)

    def waiting_reason(self) -> str | None:
        """With ``trialGpuNumber``: why no connected host can give a trial its GPUs now."""
        if not self._trial_gpu_number or not self._started or self.has_capacity():
            return None
        reasons = [f"host {host.label}: {host.gpus.scheduler.waiting_reason()}"
                   for host in self._hosts if host.connected and host.gpus is not None]
        return "; ".join(reasons) or None

    async def launch(self, trial: TrialLaunch) -> None:
        host = self._choose_host(trial.trial_id)
        if host is None:
            raise SystemLaunchError(f"cannot start trial {trial.trial_id}: no remote host is connected")
        # Its GPUs are taken at once: another launch may run while this one awaits the host.
        gpus = host.gpus
        visible = None if gpus is None else ",".join(map(str, gpus.scheduler.take(trial.trial_id)))
        try:
            await self._launch_on(host, trial, visible)
        except BaseException:
            if gpus is not None and self._placed.get(trial.trial_id) is not host:
                gpus.scheduler.release(trial.trial_id)
            raise

    async def _launch_on(self, host: RemoteHost, trial: TrialLaunch, visible: str | None) -> None:
        try:  # the local copy: parameter.json beside the output the agent sends
            prepare_folder(self.files.folder_of(trial.trial_id), trial.parameter_record)
        except OSError as error:
            raise launch_error(trial.trial_id, error, in_trial_folder=True) from error
        try:
            manager_port = trial.env.get(trial_api.ENV_MANAGER_PORT)
            manager = trial.env.get(trial_api.ENV_MANAGER_HOST, self._manager_host)
            report_port = await host.report_port(manager, int(manager_port)) if manager_port else 0
            code = await host.code_folder(trial.code_directory)
        except (RemoteHostError, OSError) as error:
            raise SystemLaunchError(f"cannot start trial {trial.trial_id} on host {host.label}: {error}") from None
        await self._bring_checkpoint(trial.trial_id, host)
        client = host.client
        if client is None:  # dropped while the code was sent
            raise SystemLaunchError(f"cannot start trial {trial.trial_id}: host {host.label} is not connected")
        trial_dir = host.trial_folder(trial.trial_id)
        env = host_trial_environment({**self._forwarded_env, **trial.env}, report_port=report_port,
                                     trial_dir=trial_dir, code_directory=code)
        if visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible
        elif self._trial_gpu_number is not None:
            env["CUDA_VISIBLE_DEVICES"] = ""  # trialGpuNumber: 0 keeps trials off the GPUs, as locally
        self._placed[trial.trial_id] = host
        self._last_host[trial.trial_id] = host
        host.running.add(trial.trial_id)
        self._idle.clear()
        await client.launch(HostLaunch(trial.trial_id, trial.attempt, trial.command, cwd=code, trial_dir=trial_dir,
                                       env=env, parameters=json.dumps(trial.parameter_record),
                                       process_limit=DEFAULT_TRIAL_PROCESS_LIMIT))

    async def _bring_checkpoint(self, trial_id: str, host: RemoteHost) -> None:
        """A trial that last ran on another host still connected gets its checkpoint copied
        (a retry, a requeue, PBT's next trial); from a host that is gone it starts without."""
        last = self._last_host.get(trial_id)
        if last is None or last is host:
            return
        if not last.connected:
            _log.warning("trial %s runs on host %s without its checkpoint: host %s, where it is, is not "
                         "connected", trial_id, host.label, last.label)
            return
        try:
            await last.copy_checkpoint_to(host, trial_id)
        except RemoteHostError as error:
            _log.warning("trial %s runs on host %s without its checkpoint: %s", trial_id, host.label, error)

    def _choose_host(self, trial_id: str) -> RemoteHost | None:
        """The host the trial last ran on, if connected (its checkpoint is there); else the
        connected host running the fewest trials (the first of ``machineList`` among equals)."""
        connected = [host for host in self._hosts if host.has_room()]
        last = self._last_host.get(trial_id)
        if last is not None and last in connected:
            return last
        return min(connected, key=lambda host: len(host.running), default=None)

    def signal(self, trial_id: str, signum: int) -> bool:
        """A trial launched but not started yet gets the signal the moment it starts."""
        host = self._placed.get(trial_id)
        if host is None or host.client is None:
            return False
        if not host.client.signal(trial_id, signum):
            self._signal_at_start[trial_id] = signum
        return True

    def manager_host(self) -> str:
        return self._manager_host

    def end_leftover(self, trial_id: str, pid: int, pid_started: float) -> bool:
        """Nothing to end: a pid of a host is never looked for here; the host's watchdog ended
        the trial when its manager's connection went away."""
        return False

    # -- checkpoints (RemoteTrialFiles asks) -------------------------------------

    def _host_of(self, trial_id: str) -> RemoteHost | None:
        """The host the trial runs or last ran on; else the first connected one."""
        return self._last_host.get(trial_id) or next((host for host in self._hosts if host.connected), None)

    def checkpoint_dir(self, trial_id: str) -> str | None:
        """On the host the trial last ran on (else the first connected host): where its next
        attempt runs when that host is still connected (``launch`` prefers it)."""
        host = self._host_of(trial_id)
        return host.checkpoint_folder(trial_id) if host is not None and host.folder else None

    async def copy_checkpoint(self, source_trial: str, target_trial: str) -> None:
        """On the source's host, and the target then prefers that host (launched on another,
        its checkpoint is copied there then)."""
        host = self._host_of(source_trial)
        if host is None or not host.connected:
            return
        source, target = (f"{host.trial_folder(trial)}/checkpoint" for trial in (source_trial, target_trial))
        await host.run(f"if [ -d {shlex.quote(source)} ]; then rm -rf {shlex.quote(target)} && "
                       f"mkdir -p {shlex.quote(host.trial_folder(target_trial))} && "
                       f"cp -a {shlex.quote(source)} {shlex.quote(target)}; fi")
        self._last_host[target_trial] = host

    # -- the hosts' events -----------------------------------------------------

    def _capacity_changed(self) -> None:
        self._events.capacity_changed()

    def _ended(self, trial_id: str) -> None:
        host = self._placed.pop(trial_id, None)
        if host is not None:
            host.running.discard(trial_id)
            host.trial_pids.pop(trial_id, None)
            if host.gpus is not None:
                host.gpus.scheduler.release(trial_id)
        self._signal_at_start.pop(trial_id, None)
        if not self._placed:
            self._idle.set()

    def _host_gone(self, host: RemoteHost) -> None:
        """Its attempts were told lost by its client; try it again for new trials."""
        if self._stopping or not self._started:
            return
        _log.warning("host %s dropped: its running trials are lost; reconnecting", host.label)
        if host not in self._reconnecting:
            self._reconnecting[host] = asyncio.get_running_loop().create_task(self._reconnect(host))

    async def _reconnect(self, host: RemoteHost) -> None:
        delay = RECONNECT_FIRST_DELAY
        try:
            while self._started:
                try:
                    await host.connect(self._code_directory)
                    break
                except RemoteHostError as error:
                    _log.warning("host %s: reconnecting failed (again in %g s): %s", host.label, delay, error)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECONNECT_MAX_DELAY)
        finally:
            self._reconnecting.pop(host, None)
        if self._started and host.kept.session is not None and host.client is not None:
            # Its trials of before the drop were told lost (and are run again): with a window its
            # old agent kept them; its watchdog ends them now.
            host.client.release([])
        if self._started:
            _log.info("host %s is back: it takes trials again", host.label)
            self._events.capacity_changed()


class _HostEvents:
    """An agent client's listener: the service's bookkeeping, then the runner's ``TrialEvents``."""

    def __init__(self, service: RemoteTrainingService) -> None:
        self._service = service

    def trial_started(self, trial_id: str, attempt: int, pid: int | None, *,
                      pid_started: float | None = None, host: str | None = None) -> None:
        service = self._service
        host_of_trial = service._placed.get(trial_id)
        if host_of_trial is not None and pid is not None:
            host_of_trial.trial_pids[trial_id] = pid
        service._events.trial_started(trial_id, attempt, pid, pid_started=pid_started, host=host)
        pending = service._signal_at_start.pop(trial_id, None)
        if pending is not None:
            service.signal(trial_id, pending)

    def trial_exited(self, trial_id: str, attempt: int, exit_code: int | None, signal: int | None, *,
                     failed: bool = False) -> None:
        self._service._ended(trial_id)
        self._service._events.trial_exited(trial_id, attempt, exit_code, signal, failed=failed)

    def trial_launch_failed(self, trial_id: str, attempt: int, reason: str, system: bool = False) -> None:
        self._service._ended(trial_id)
        self._service._events.trial_launch_failed(trial_id, attempt, reason, system=system)

    def trial_lost(self, trial_id: str, attempt: int, reason: str, preempted: bool = False) -> None:
        self._service._ended(trial_id)
        self._service._events.trial_lost(trial_id, attempt, reason, preempted=preempted)


async def _wait_event(event: asyncio.Event, timeout: float) -> None:
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except asyncio.TimeoutError:
        pass


def create_remote_service(config: "ResolvedConfig", events: TrialEvents, paths: ExperimentPaths,
                          manager_host: str, report_socket: Path | None = None) -> RemoteTrainingService:
    """The remote platform's service factory (``config.PLATFORMS["remote"].service``). The
    manager's ``report_socket`` is not given to a host's trials: they report through the
    host's relay over its connection."""
    from expmgr.config import ResolvedRemoteConfig
    if not isinstance(config.training_service, ResolvedRemoteConfig):
        raise TrainingServiceError(f"not a remote config: platform {config.training_service.platform!r}")
    return RemoteTrainingService(config.training_service, config.trial_code_directory, events, paths,
                                 manager_host=manager_host, log_limits=config.log_limits,
                                 trial_gpu_number=config.trial_gpu_number)
