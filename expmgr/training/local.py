"""The local training service: each trial runs ``trialCommand`` in its own
process group (session) on this machine, its output streams in its trial
folder, and its end noticed the moment its process exits (no polling). A
watchdog process (``watchdog.py``) ends whatever a trial left running, in its
group or not, when the trial ends, and every trial when the experiment dies.
"""
from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal as signals
import subprocess
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from expmgr import trial as trial_api
from expmgr.layout import ExperimentPaths
from expmgr.rotation import UNBOUNDED, RotationLimits
from expmgr.training._gpus import GpuScheduler, query_gpus, usable_gpus
from expmgr.training._folder import SharedTrialFolders, prepare_folder
from expmgr.training._output import OutputPump, TrialOutput
from expmgr.training._process import exit_of as _exit_of, kill_group as _kill_group
from expmgr.training._process import process_start_time as _process_start_time, spawn_trial, trial_environment
from expmgr.training.base import TrainingService, TrainingServiceError, TrialEvents, TrialLaunch, launch_error
from expmgr.training.watchdog import MARKER_ENV, OVER_LIMIT, trial_marker
from expmgr.training.watchdog import command as watchdog_command
from expmgr.training.warm import WarmStarter, WarmTrial

if TYPE_CHECKING:
    from expmgr.config import ResolvedConfig, ResolvedLocalConfig

OUTPUT_DRAIN_TIMEOUT = 5.0
"""Seconds an ended trial's exit waits for its output to be written (see _wait_for_exit)."""
GPU_POLL_INTERVAL = 3.0
"""Seconds between two nvidia-smi queries for the GPUs other processes use (``useActiveGpu:
false``); NNI's local service asks at most every 10 s."""


class LocalTrainingService(TrainingService):
    """Trials as local processes; see the module docstring."""

    def __init__(self, config: "ResolvedLocalConfig", trial_gpu_number: int | None, events: TrialEvents,
                 paths: ExperimentPaths, manager_host: str = "127.0.0.1",
                 log_limits: RotationLimits = UNBOUNDED, report_socket: Path | None = None) -> None:
        self._config = config
        self.files: SharedTrialFolders = SharedTrialFolders(paths)
        self._manager_host = manager_host
        self._report_socket = report_socket
        """The server's Unix socket for reports (EXPMGR_MANAGER_SOCKET), None: HTTP alone."""
        self._gpus_per_trial = trial_gpu_number or 0
        self._set_visible_devices = trial_gpu_number is not None
        self._events = events
        self._processes: dict[str, subprocess.Popen | WarmTrial] = {}
        self._waiters: set[asyncio.Task] = set()
        self._gpu_slots: GpuScheduler | None = None
        self._gpu_watch: asyncio.Task | None = None
        self._base_env: dict[str, str] = {}
        self._watchdog: subprocess.Popen | None = None
        self._pending_over_limit: set[int] = set()
        """Pgids the watchdog said it killed for their process limit (see _over_process_limit)."""
        self._session = ""
        self._log_dir = paths.log_dir
        self._warm: WarmStarter | None = None
        """Forks Python trials from a template (``trialWarmStart``), None when off."""
        self._output = OutputPump(log_limits, on_error=self._output_trouble)
        # The experiment's folder is named after it: this logger's records are its own.
        self._log = logging.getLogger(f"nni.{paths.root.name}.training")

    async def start(self) -> None:
        # Marks this service's trial processes (watchdog.py); random, so that another
        # experiment's, or an earlier run's, are never taken for ours.
        self._session = secrets.token_hex(8)
        self._output.start()
        self._watchdog = subprocess.Popen(
            watchdog_command(self._session), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True, text=True)
        assert self._watchdog.stdout is not None
        os.set_blocking(self._watchdog.stdout.fileno(), False)  # read when a trial ends, never waited on
        if self._config.warm_start is not None:
            # `auto` (no module listed) learns what to preload from the first trial that succeeds.
            self._warm = WarmStarter(self._config.warm_start, self._session, self._log, self._log_dir,
                                     learn=not self._config.warm_start)
        # Read once: copying os.environ decodes every variable, on every launch.
        self._base_env = dict(os.environ)
        # PATH stays the user's (as NNI leaves it), so `python3` is their environment's;
        # `import nni` and `import expmgr` reach any interpreter through TRIAL_PATH.
        self._base_env["PYTHONPATH"] = trial_api.trial_pythonpath(self._base_env.get("PYTHONPATH"))
        # This experiment's socket, never one this process inherited (a manager run by a trial).
        self._base_env.pop(trial_api.ENV_MANAGER_SOCKET, None)
        if self._report_socket is not None:
            self._base_env[trial_api.ENV_MANAGER_SOCKET] = str(self._report_socket)
        if self._gpus_per_trial == 0:
            return
        found = await query_gpus()
        usable = usable_gpus(self._gpus_per_trial, self._config, found)  # raises if no trial could ever run
        if found is not None and self._config.gpu_indices is not None and len(usable) < len(self._config.gpu_indices):
            self._log.warning("trainingService.gpuIndices lists GPU(s) nvidia-smi does not: trials use %s",
                              ", ".join(map(str, usable)))
        self._gpu_slots = GpuScheduler(usable, self._config, self._gpus_per_trial)
        if self._config.use_active_gpu:
            return  # other processes do not count: nvidia-smi need not be asked again
        if found is None:
            self._log.warning("nvidia-smi cannot be run: the GPUs of gpuIndices are given to trials whatever "
                              "else uses them (useActiveGpu: false cannot be honoured)")
            return
        if not found.processes_known:
            self._log.warning("nvidia-smi lists the GPUs but not the processes using them: trials are given "
                              "GPUs whatever else uses them (useActiveGpu: false cannot be honoured)")
        self._gpu_slots.observe(found, set(self._own_groups()))
        self._gpu_watch = asyncio.get_running_loop().create_task(self._watch_gpus())

    def _own_groups(self) -> list[int]:
        """The process groups of the running trials (each trial's process leads its own)."""
        return [process.pid for process in self._processes.values()]

    async def _watch_gpus(self) -> None:
        """Ask nvidia-smi which GPUs other processes use, every GPU_POLL_INTERVAL seconds, and
        tell the runner when that frees a GPU or takes one."""
        try:
            while True:
                await asyncio.sleep(GPU_POLL_INTERVAL)
                found = await query_gpus()
                if found is not None and self._gpu_slots is not None \
                        and self._gpu_slots.observe(found, set(self._own_groups())):
                    self._events.capacity_changed()
        except asyncio.CancelledError:
            raise
        except Exception:  # a task's exception would be lost, trials left waiting for ever
            self._events.service_failed(traceback.format_exc())

    def has_capacity(self) -> bool:
        return self._gpu_slots is None or self._gpu_slots.available()

    def waiting_reason(self) -> str | None:
        return None if self._gpu_slots is None else self._gpu_slots.waiting_reason()

    async def launch(self, trial: TrialLaunch) -> None:
        marker = trial_marker(self._session, trial.trial_id, trial.attempt)
        files = self.files.folder_of(trial.trial_id)
        own_env = {**trial.env, trial_api.ENV_TRIAL_DIR: str(files.root)}
        env = {**self._base_env, **own_env, **trial_api.nni_environment(own_env, str(trial.code_directory)),
               MARKER_ENV: marker}
        if self._gpu_slots is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, self._gpu_slots.take(trial.trial_id)))
        elif self._set_visible_devices:
            env["CUDA_VISIBLE_DEVICES"] = ""  # trialGpuNumber: 0 keeps trials off the GPUs
        output: TrialOutput | None = None
        in_trial_folder = True  # an OSError there is the system's (launch_error), not the trial's
        try:
            prepare_folder(files, trial.parameter_record)
            output = self._output.open(files.stdout, files.stderr)
            in_trial_folder = False
            process = await self._spawn(trial, env, output)
        except OSError as error:
            if self._gpu_slots is not None:
                self._gpu_slots.release(trial.trial_id)
            raise launch_error(trial.trial_id, error, in_trial_folder=in_trial_folder) from error
        finally:
            if output is not None:
                output.close_child_ends()  # the trial holds its own; the pipes end with it
        self._processes[trial.trial_id] = process
        # The watchdog counts its processes against the limit, and says so in its stderr when over.
        self._tell_watchdog(f"+{process.pid} {marker} {self._config.trial_process_limit} {files.stderr}")
        self._events.trial_started(trial.trial_id, trial.attempt, process.pid,
                                   pid_started=_process_start_time(process.pid), host=self._manager_host)
        waiter = asyncio.get_running_loop().create_task(self._wait(trial, process, output))
        self._waiters.add(waiter)
        waiter.add_done_callback(self._waiters.discard)

    async def _spawn(self, trial: TrialLaunch, env: dict[str, str], output: TrialOutput) -> subprocess.Popen | WarmTrial:
        """The trial forked from its warm template when it can be, else started cold."""
        if self._warm is not None:
            warm = await self._warm.spawn(trial.command, str(trial.code_directory), trial_environment(env),
                                          output.stdout, output.stderr, env[MARKER_ENV])
            if warm is not None:
                return warm
        return spawn_trial(trial.command, trial.code_directory, env, output.stdout, output.stderr)

    async def _wait(self, trial: TrialLaunch, process: subprocess.Popen | WarmTrial, output: TrialOutput) -> None:
        try:
            await self._wait_for_exit(trial, process, output)
        except Exception:  # a task's exception would be lost, the trial left RUNNING
            self._events.service_failed(traceback.format_exc())

    async def _wait_for_exit(self, trial: TrialLaunch, process: subprocess.Popen | WarmTrial,
                             output: TrialOutput) -> None:
        returncode = await (process.exited if isinstance(process, WarmTrial) else _exit_of(process))
        # The trial's process is gone; children it left in its group go with it.
        _kill_group(process.pid, signals.SIGKILL)
        self._tell_watchdog(f"-{process.pid}")
        # Its last output reaches its files before its end is told: whoever reads them then
        # (a test, `expctl log`, the UI) sees all of it. Held longer only by a process that
        # escaped the group, which the watchdog is ending now.
        await output.drained(OUTPUT_DRAIN_TIMEOUT)
        self._processes.pop(trial.trial_id, None)
        if self._gpu_slots is not None:
            self._gpu_slots.release(trial.trial_id)
        if returncode < 0:
            over_limit = process.pid in self._over_process_limit()
            self._pending_over_limit.discard(process.pid)
            self._events.trial_exited(trial.trial_id, trial.attempt, None, -returncode, failed=over_limit)
        else:
            self._events.trial_exited(trial.trial_id, trial.attempt, returncode, None)

    def signal(self, trial_id: str, signum: int) -> bool:
        process = self._processes.get(trial_id)
        return process is not None and _kill_group(process.pid, signum)

    async def stop(self, grace_period: float, signum: int = signals.SIGTERM) -> None:
        watch, self._gpu_watch = self._gpu_watch, None
        if watch is not None:
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)
        for trial_id in list(self._processes):
            self.signal(trial_id, signum)
        waiters = set(self._waiters)
        if waiters:
            _, still_running = await asyncio.wait(waiters, timeout=grace_period)
            if still_running:
                for trial_id in list(self._processes):
                    self.signal(trial_id, signals.SIGKILL)
                await asyncio.wait(still_running)
        if self._warm is not None:
            await self._warm.stop()
        await asyncio.get_running_loop().run_in_executor(None, self._output.stop)
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None:
            self._tell(watchdog, "stop")
            assert watchdog.stdin is not None  # started with stdin=PIPE
            watchdog.stdin.close()
            try:
                watchdog.wait(timeout=5)  # it exits at once on "stop"
            except subprocess.TimeoutExpired:
                watchdog.kill()
                watchdog.wait()
            if watchdog.stdout is not None:
                watchdog.stdout.close()

    def manager_host(self) -> str:
        return self._manager_host

    def _output_trouble(self, message: str) -> None:
        """From the output pump's thread: a trial's file cannot be written (or can again)."""
        self._log.warning("trial output: %s", message)

    def end_leftover(self, trial_id: str, pid: int, pid_started: float) -> bool:
        """Kill the group of ``pid`` if it is still the process that started at ``pid_started``
        (the watchdog normally prevents leftovers)."""
        started = _process_start_time(pid)
        if started is None or abs(started - pid_started) > 0.01:
            return False  # gone, or the pid now belongs to another process
        if not _kill_group(pid, signals.SIGKILL):
            return False
        import psutil
        try:
            psutil.Process(pid).wait(timeout=10)
        except (psutil.Error, ChildProcessError):
            pass
        return True

    def _over_process_limit(self) -> set[int]:
        """The pgids of the trials the watchdog killed for their process limit, as it told
        (it writes before it kills, so a trial's line is here by the time its end is seen)."""
        watchdog = self._watchdog
        if watchdog is None or watchdog.stdout is None:
            return set()
        try:
            text = os.read(watchdog.stdout.fileno(), 65536).decode(errors="replace")
        except (BlockingIOError, OSError):
            text = ""
        self._pending_over_limit.update(int(words[1]) for words in map(str.split, text.splitlines())
                                        if len(words) == 2 and words[0] == OVER_LIMIT and words[1].isdigit())
        return self._pending_over_limit

    def _tell_watchdog(self, line: str) -> None:
        if self._watchdog is not None:
            self._tell(self._watchdog, line)

    @staticmethod
    def _tell(watchdog: subprocess.Popen, line: str) -> None:
        stdin = watchdog.stdin
        assert stdin is not None  # started with stdin=PIPE
        try:
            stdin.write(line + "\n")
            stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # a dead watchdog must not stop the experiment


def create_local_service(config: "ResolvedConfig", events: TrialEvents, paths: ExperimentPaths,
                         manager_host: str, report_socket: Path | None = None) -> LocalTrainingService:
    """The local platform's service factory (``config.PLATFORMS["local"].service``); its
    trials send their reports to ``report_socket`` when there is one."""
    from expmgr.config import ResolvedConfig, ResolvedLocalConfig
    if not isinstance(config.training_service, ResolvedLocalConfig):
        raise TrainingServiceError(f"not a local config: platform {config.training_service.platform!r}")
    return LocalTrainingService(config.training_service, config.trial_gpu_number, events, paths,
                                manager_host=manager_host, log_limits=config.log_limits,
                                report_socket=report_socket)
