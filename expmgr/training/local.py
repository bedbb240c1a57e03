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
import shutil
import signal as signals
import subprocess
import traceback
from typing import TYPE_CHECKING

from expmgr import trial as trial_api
from expmgr.layout import ExperimentPaths
from expmgr.rotation import UNBOUNDED, RotationLimits
from expmgr.training._folder import SharedTrialFolders, prepare_folder
from expmgr.training._output import OutputPump, TrialOutput
from expmgr.training._process import exit_of as _exit_of, kill_group as _kill_group
from expmgr.training._process import process_start_time as _process_start_time, spawn_trial
from expmgr.training.base import TrainingService, TrainingServiceError, TrialEvents, TrialLaunch, launch_error
from expmgr.training.watchdog import MARKER_ENV, OVER_LIMIT, trial_marker
from expmgr.training.watchdog import command as watchdog_command

if TYPE_CHECKING:
    from expmgr.config import ResolvedLocalConfig

OUTPUT_DRAIN_TIMEOUT = 5.0
"""Seconds an ended trial's exit waits for its output to be written (see _wait_for_exit)."""


def detect_gpus() -> list[int]:
    """Indices of the GPUs nvidia-smi sees; empty without a driver."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return []
    return [int(line) for line in out.split() if line.strip().isdigit()]


class _GpuSlots:
    """Which GPUs each running trial holds, within ``maxTrialNumberPerGpu``."""

    def __init__(self, indices: list[int], per_gpu: int, per_trial: int) -> None:
        self._free = {index: per_gpu for index in indices}
        self._per_trial = per_trial
        self._held: dict[str, list[int]] = {}

    def available(self) -> bool:
        return sum(1 for slots in self._free.values() if slots > 0) >= self._per_trial

    def take(self, trial_id: str) -> list[int]:
        chosen = sorted((i for i, slots in self._free.items() if slots > 0),
                        key=lambda i: -self._free[i])[: self._per_trial]
        if len(chosen) < self._per_trial:
            raise TrainingServiceError(f"trial {trial_id} needs {self._per_trial} GPU(s); none is free")
        for index in chosen:
            self._free[index] -= 1
        self._held[trial_id] = chosen
        return chosen

    def release(self, trial_id: str) -> None:
        for index in self._held.pop(trial_id, []):
            self._free[index] += 1


class LocalTrainingService(SharedTrialFolders, TrainingService):
    """Trials as local processes; see the module docstring."""

    def __init__(self, config: "ResolvedLocalConfig", trial_gpu_number: int | None, events: TrialEvents,
                 paths: ExperimentPaths, manager_host: str = "127.0.0.1",
                 log_limits: RotationLimits = UNBOUNDED) -> None:
        self._config = config
        self._paths = paths
        self._manager_host = manager_host
        self._gpus_per_trial = trial_gpu_number or 0
        self._set_visible_devices = trial_gpu_number is not None
        self._events = events
        self._processes: dict[str, subprocess.Popen] = {}
        self._waiters: set[asyncio.Task] = set()
        self._gpu_slots: _GpuSlots | None = None
        self._base_env: dict[str, str] = {}
        self._watchdog: subprocess.Popen | None = None
        self._pending_over_limit: set[int] = set()
        """Pgids the watchdog said it killed for their process limit (see _over_process_limit)."""
        self._session = ""
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
        # Read once: copying os.environ decodes every variable, on every launch.
        self._base_env = dict(os.environ)
        # PATH stays the user's (as NNI leaves it), so `python3` is their environment's;
        # `import nni` and `import expmgr` reach any interpreter through TRIAL_PATH.
        self._base_env["PYTHONPATH"] = trial_api.trial_pythonpath(self._base_env.get("PYTHONPATH"))
        if self._gpus_per_trial == 0:
            return
        configured = self._config.gpu_indices
        indices = list(configured) if configured is not None else detect_gpus()
        if len(indices) < self._gpus_per_trial:
            raise TrainingServiceError(
                f"trialGpuNumber is {self._gpus_per_trial} but only {len(indices)} GPU(s) are available "
                f"(gpuIndices: {None if configured is None else list(configured)})")
        self._gpu_slots = _GpuSlots(indices, self._config.max_trial_number_per_gpu, self._gpus_per_trial)

    def has_capacity(self) -> bool:
        return self._gpu_slots is None or self._gpu_slots.available()

    async def launch(self, trial: TrialLaunch) -> None:
        marker = trial_marker(self._session, trial.trial_id, trial.attempt)
        files = self._files(trial.trial_id)
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
            process = spawn_trial(trial.command, trial.code_directory, env, output.stdout, output.stderr)
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

    async def _wait(self, trial: TrialLaunch, process: subprocess.Popen, output: TrialOutput) -> None:
        try:
            await self._wait_for_exit(trial, process, output)
        except Exception:  # a task's exception would be lost, the trial left RUNNING
            self._events.service_failed(traceback.format_exc())

    async def _wait_for_exit(self, trial: TrialLaunch, process: subprocess.Popen, output: TrialOutput) -> None:
        returncode = await _exit_of(process)
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
        for trial_id in list(self._processes):
            self.signal(trial_id, signum)
        waiters = set(self._waiters)
        if waiters:
            _, still_running = await asyncio.wait(waiters, timeout=grace_period)
            if still_running:
                for trial_id in list(self._processes):
                    self.signal(trial_id, signals.SIGKILL)
                await asyncio.wait(still_running)
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
