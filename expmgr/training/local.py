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
from expmgr.layout import ExperimentPaths, TrialFolder
from expmgr.rotation import UNBOUNDED, RotationLimits
from expmgr.training._kept import KeptTrial, WatchdogRecord, keeper_of, release, spawn_kept, status_file, visible_gpus
from expmgr.training._kept import take_manager_gone
from expmgr.training._gpus import GpuScheduler, query_gpus, usable_gpus
from expmgr.training._folder import SharedTrialFolders, prepare_folder
from expmgr.training._output import OutputPump, TrialOutput
from expmgr.training._process import exit_of as _exit_of, kill_group as _kill_group
from expmgr.training._process import process_start_time as _process_start_time, spawn_trial, trial_environment
from expmgr.training.base import TrainingService, TrainingServiceError, TrialEvents, TrialLaunch, launch_error
from expmgr.training.keeper import read_status
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
                 log_limits: RotationLimits = UNBOUNDED, report_socket: Path | None = None,
                 trial_command: tuple[str, Path] | None = None) -> None:
        self._config = config
        self._trial_command = trial_command
        """The experiment's trial command and code directory: a warm template is started for them
        with the service (before the first trial asks for it)."""
        self.files: SharedTrialFolders = SharedTrialFolders(paths)
        self._manager_host = manager_host
        self._report_socket = report_socket
        """The server's Unix socket for reports (EXPMGR_MANAGER_SOCKET), None: HTTP alone."""
        self._gpus_per_trial = trial_gpu_number or 0
        self._set_visible_devices = trial_gpu_number is not None
        self._events = events
        self._processes: dict[str, subprocess.Popen | WarmTrial | KeptTrial] = {}
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
        self._log_limits = log_limits
        self._state_dir = paths.root / "watchdog"
        """The watchdogs' files: this run's (WatchdogRecord), what a dead run's watchdog wrote."""
        self._previous_watchdog: WatchdogRecord | None = None
        """The watchdog of the run before this one, until its kept trials are adopted (a resume)."""
        self._adopted: list[int] = []
        self._manager_gone_at: float | None = None
        self._ended_by_window: set[int] = set()
        """The trial groups the dead run's watchdog ended when its window passed: run again."""
        # The experiment's folder is named after it: this logger's records are its own.
        self._log = logging.getLogger(f"nni.{paths.root.name}.training")

    async def start(self) -> None:
        # Marks this service's trial processes (watchdog.py); random, so that another
        # experiment's, or an earlier run's, are never taken for ours.
        self._session = secrets.token_hex(8)
        self._output.start()
        self._state_dir.mkdir(mode=0o700, exist_ok=True)
        self._previous_watchdog = WatchdogRecord.read(self._state_dir)
        self._manager_gone_at, self._ended_by_window = take_manager_gone(self._state_dir)
        self._watchdog = subprocess.Popen(
            watchdog_command(self._session, self._config.reattach_window, str(self._state_dir)),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
            text=True)
        WatchdogRecord(self._watchdog.pid, _process_start_time(self._watchdog.pid) or 0.0).write(self._state_dir)
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
        if self._warm is not None and self._trial_command is not None:
            command, code_directory = self._trial_command
            self._warm.prestart(command, str(code_directory), trial_environment(self._base_env))
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
            process: subprocess.Popen | WarmTrial | KeptTrial
            if self._config.reattach_window > 0:
                keeper_stderr = os.open(files.stderr, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
                in_trial_folder = False
                process = await self._spawn_kept(trial, env, files, keeper_stderr)
            else:
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
        waiter = asyncio.get_running_loop().create_task(self._wait(trial.trial_id, trial.attempt, process, output))
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

    async def _spawn_kept(self, trial: TrialLaunch, env: dict[str, str], files: TrialFolder,
                          keeper_stderr: int) -> KeptTrial:
        """The trial under its keeper (``reattachWindow``), which writes its output and its end;
        the keeper's own errors go to the trial's stderr (``keeper_stderr``, closed here)."""
        try:
            return await spawn_kept(trial.command, trial.code_directory, env, files.root, trial.attempt,
                                    files.stdout, files.stderr, self._log_limits, keeper_stderr)
        finally:
            os.close(keeper_stderr)

    async def _wait(self, trial_id: str, attempt: int, process: subprocess.Popen | WarmTrial | KeptTrial,
                    output: TrialOutput | None) -> None:
        try:
            await self._wait_for_exit(trial_id, attempt, process, output)
        except Exception:  # a task's exception would be lost, the trial left RUNNING
            self._events.service_failed(traceback.format_exc())

    async def _wait_for_exit(self, trial_id: str, attempt: int, process: subprocess.Popen | WarmTrial | KeptTrial,
                             output: TrialOutput | None) -> None:
        returncode = await self._returncode(trial_id, attempt, process)
        # The trial's process is gone; children it left in its group go with it.
        _kill_group(process.pid, signals.SIGKILL)
        self._tell_watchdog(f"-{process.pid}")
        # Its last output reaches its files before its end is told: whoever reads them then
        # (a test, `expctl log`, the UI) sees all of it. Held longer only by a process that
        # escaped the group, which the watchdog is ending now. (A keeper carried it already.)
        if output is not None:
            await output.drained(OUTPUT_DRAIN_TIMEOUT)
        self._processes.pop(trial_id, None)
        if self._gpu_slots is not None:
            self._gpu_slots.release(trial_id)
        if returncode < 0:
            over_limit = process.pid in self._over_process_limit()
            self._pending_over_limit.discard(process.pid)
            self._events.trial_exited(trial_id, attempt, None, -returncode, failed=over_limit)
        else:
            self._events.trial_exited(trial_id, attempt, returncode, None)

    async def _returncode(self, trial_id: str, attempt: int,
                          process: subprocess.Popen | WarmTrial | KeptTrial) -> int:
        """The trial's return code (negative: its signal), once it ended: a kept trial's is in its
        keeper's status file (none: the keeper was killed, and the trial is killed with its group)."""
        if isinstance(process, WarmTrial):
            return await process.exited
        if isinstance(process, KeptTrial):
            await process.exited
            kept = read_status(str(status_file(self.files.folder_of(trial_id).root, attempt)))
            return -signals.SIGKILL if kept is None else kept
        return await _exit_of(process)

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

    async def leave_running(self) -> bool:
        if self._config.reattach_window <= 0:
            return False
        watch, self._gpu_watch = self._gpu_watch, None
        if watch is not None:
            watch.cancel()
        waiters = set(self._waiters)
        for waiter in waiters:   # their trials' ends are the next run's to see
            waiter.cancel()
        await asyncio.gather(*waiters, *([watch] if watch is not None else []), return_exceptions=True)
        self._processes.clear()
        await asyncio.get_running_loop().run_in_executor(None, self._output.stop)
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None:   # its pipe closes without "stop": it keeps the trials for the window
            assert watchdog.stdin is not None  # started with stdin=PIPE
            watchdog.stdin.close()
            if watchdog.stdout is not None:
                watchdog.stdout.close()
        return True

    def adopt(self, trial_id: str, attempt: int, pid: int, pid_started: float) -> bool:
        previous = self._previous_watchdog
        if previous is None or pid in self._ended_by_window:
            return False
        folder = self.files.folder_of(trial_id)
        found = keeper_of(pid, pid_started, trial_id, attempt)
        if found is None and read_status(str(status_file(folder.root, attempt))) is None:
            return False   # not kept, or ended without its keeper's word: a rerun, as without a window
        kept = KeptTrial.adopted(pid, found[0] if found else None)
        if found is not None:
            keeper, marker = found
            self._processes[trial_id] = kept
            if self._gpu_slots is not None:   # its GPUs are not given to another trial
                self._gpu_slots.hold(trial_id, visible_gpus(pid))
            self._adopted.append(pid)
            self._tell_watchdog(f"+{pid} {marker} {self._config.trial_process_limit} {folder.stderr}")
        waiter = asyncio.get_running_loop().create_task(self._wait(trial_id, attempt, kept, None))
        self._waiters.add(waiter)
        waiter.add_done_callback(self._waiters.discard)
        return True

    def end_adoption(self) -> None:
        previous, self._previous_watchdog = self._previous_watchdog, None
        if previous is not None:
            release(previous, self._adopted, self._state_dir)

    def manager_gone_at(self) -> float | None:
        return self._manager_gone_at

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
                                report_socket=report_socket,
                                trial_command=(config.trial_command, config.trial_code_directory))
