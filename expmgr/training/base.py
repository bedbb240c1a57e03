"""The training-service interface: the trial runner hands it trials to run, and it
tells the runner what became of them through a :class:`TrialEvents` listener. A service
is two halves, as asyncio's transport and protocol are: process control (this
``TrainingService``: launch, signal, stop) and the trial's files (its ``files``, a
``files.TrialFiles``: output, reports, checkpoint), which the server and the CLI also
read, without a service, through ``expmgr.training.trial_files``::

    service = create_training_service(resolved, runner, paths)   # expmgr.training; the runner: TrialEvents
    await service.start()
    if service.has_capacity():
        await service.launch(TrialLaunch(...))
    service.signal("Xy3zQ", signal.SIGTERM)
    for line_number, line in service.files.unsent_reports("Xy3zQ"): ...
    await service.stop(grace_period=5.0)

The runner knows nothing of where a trial runs: processes, hosts and the files of a
trial (its folder, its parameter.json, its output, its metrics.jsonl, its checkpoint
folder) are the service's, made where the trial runs. This is
the contract a new training service implements; ``tests/training/test_contract.py`` is
the suite it must pass (docs/architecture.md, "Training services").
"""
from __future__ import annotations

import abc
import errno
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from expmgr.training.files import TrialFiles


class TrainingServiceError(Exception):
    """A trial could not be launched, or the service cannot run with this config."""


class SystemLaunchError(TrainingServiceError):
    """A launch failed for a reason outside the trial: the machine's (no free file
    descriptor, a full, read-only or failing disk, no memory, no process left) or its
    experiment folder's (missing, not writable). The trial never ran, so nothing says it
    would fail: the runner leaves it WAITING, pauses launching and tries again (see
    ``launch_error``, the one rule that tells the two apart)."""


SYSTEM_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOSPC, errno.EROFS, errno.EDQUOT,
                           errno.ENOMEM, errno.EAGAIN, errno.EIO})
"""OSError numbers that are the machine's trouble wherever a launch meets them."""
_FOLDER_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.ENOENT})
"""Also the system's when met making the trial's folder or its files (the experiment's
folder was removed or made unwritable); met starting the command (a code directory that
is gone, a program that cannot be run), they are the trial's."""


def launch_error(trial_id: str, error: OSError, *, in_trial_folder: bool) -> TrainingServiceError:
    """The error a service raises from ``launch()`` for ``error``, met while making the
    trial's folder and files (``in_trial_folder``) or while starting its command: a
    SystemLaunchError when the cause is outside the trial, else a TrainingServiceError
    (the attempt ends FAILED). A command that is not found is neither: the shell runs it
    and exits 127, the trial's own failure."""
    kind = SystemLaunchError if is_system_error(error, in_trial_folder=in_trial_folder) else TrainingServiceError
    return kind(f"cannot start trial {trial_id}: {error}")


def is_system_error(error: BaseException, *, in_trial_folder: bool) -> bool:
    """Whether ``error``, met launching a trial, is outside the trial (see ``launch_error``)."""
    return isinstance(error, OSError) and (
        error.errno in SYSTEM_ERRNOS or (in_trial_folder and error.errno in _FOLDER_ERRNOS))


@dataclass(frozen=True)
class TrialLaunch:
    """One attempt of one trial, as the runner asks for it. The service makes the trial's
    folder where the trial runs (``layout.TrialFolder``: the manager reads it through the
    service's ``files``, there or from a copy), writes ``parameter_record`` into it as parameter.json at the first
    attempt, and adds the folder's variable (``trial.ENV_TRIAL_DIR``) to ``env``."""

    trial_id: str
    attempt: int
    command: str
    code_directory: Path
    parameter_record: dict[str, Any]
    """What ``trial.get_next_parameter()`` reads: NNI's ``{parameter_id, parameter_source,
    parameters, parameter_index}``."""
    env: dict[str, str] = field(default_factory=dict)
    """The trial's variables besides its folder's: ids, token, where the manager is."""


class TrialEvents(Protocol):
    """What a training service tells the runner; called on the runner's event loop.

    Each attempt (a trial id and attempt number whose ``launch()`` returned) is told, in
    this order, either

    - ``trial_started``, then exactly one of ``trial_exited`` or ``trial_lost``: its output
      (stdout, stderr, trial.log, metrics.jsonl) is in its ``TrialFiles`` by the time the
      end is told, so whoever reads them then sees all of it; or
    - ``trial_launch_failed`` alone: it never ran.

    Nothing is told of an attempt after its end, and an attempt whose ``launch()`` raised
    is told nothing. ``capacity_changed`` and ``service_failed`` belong to no attempt
    and come at any time. ``tests/training/test_contract.py`` checks this order for every
    service (``Recorder.check_order``).
    """

    def trial_started(self, trial_id: str, attempt: int, pid: int | None, *,
                      pid_started: float | None = None, host: str | None = None) -> None:
        """The attempt runs: as process ``pid`` (started at ``pid_started``, seconds since the
        epoch, so that a resume can tell it from a later process with that pid) on ``host``."""

    def trial_exited(self, trial_id: str, attempt: int, exit_code: int | None, signal: int | None,
                     preempted: bool = False, *, failed: bool = False) -> None:
        """The attempt's process ended: with ``exit_code``, or killed by ``signal``; ``preempted``:
        the service knows its node was taken away (PREEMPTED, run again first, whatever the
        exit; a trial's own ``mark_preempting()`` is read from its files instead); ``failed``:
        the service killed it for a fault of the trial's own (over its process limit), so
        it FAILED, not CRASHED, whatever the signal."""

    def trial_launch_failed(self, trial_id: str, attempt: int, reason: str, system: bool = False) -> None:
        """An attempt whose ``launch()`` returned could not be started after all (a remote
        service's placement failed), told instead of ``trial_started``; it ends FAILED as
        if ``launch()`` had raised, or, with ``system`` (``is_system_error``: no free
        descriptor, a full disk on its node), the trial waits as after a SystemLaunchError."""

    def trial_lost(self, trial_id: str, attempt: int, reason: str, preempted: bool = False) -> None:
        """The attempt can no longer be reached: with ``preempted`` its node was taken away
        (PREEMPTED, run again first), otherwise a lost node (CRASHED)."""

    def capacity_changed(self) -> None:
        """What ``has_capacity()`` answers may have changed for a reason other than a trial's
        end (another process freed or took a GPU): the runner asks again."""

    def service_failed(self, error: str) -> None:
        """The service itself broke (``error`` is its traceback): the experiment ends in ERROR."""


class TrainingService(abc.ABC):
    """Runs trials as processes; ``stop()`` is idempotent and leaves none behind."""

    files: TrialFiles
    """The files of this service's trials, where it makes them (set by the service; the
    same as ``trial_files(paths, platform)`` gives without the service)."""

    @abc.abstractmethod
    async def start(self) -> None: ...

    @abc.abstractmethod
    def has_capacity(self) -> bool:
        """Whether one more trial could be launched now (GPUs, slots)."""

    def waiting_reason(self) -> str | None:
        """Why ``has_capacity()`` is False, when trials are to wait for it as NNI's do: the
        runner then creates trials up to ``trialConcurrency`` anyway, keeps them WAITING with
        this reason (the web UI and ``expctl trial ls`` show it) and starts them in order as
        capacity comes (``TrialEvents.capacity_changed``). None (this default): a trial is
        not created until there is capacity."""
        return None

    @abc.abstractmethod
    async def launch(self, trial: TrialLaunch) -> None:
        """Start an attempt, in the trial's folder made ready (see TrialLaunch); its end is
        reported through ``TrialEvents.trial_exited``. Raises TrainingServiceError if it
        cannot, SystemLaunchError (``launch_error``) when the cause is not the trial's."""

    @abc.abstractmethod
    def signal(self, trial_id: str, signum: int) -> bool:
        """Send ``signum`` to the trial's whole process group; False if it is not running."""

    @abc.abstractmethod
    async def stop(self, grace_period: float, signum: int = 15) -> None:
        """Send ``signum`` (SIGTERM; SIGUSR1 for a preemption) to every running trial,
        SIGKILL what is left after ``grace_period`` seconds, and wait until all have
        exited (their exits are reported)."""

    @abc.abstractmethod
    def manager_host(self) -> str:
        """The host trials reach the manager's server at (the runner adds port, prefix, token)."""

    @abc.abstractmethod
    def end_leftover(self, trial_id: str, pid: int, pid_started: float) -> bool:
        """On resume: end a trial process that outlived its manager, found by pid and start
        time (never by name); True if one was found and ended."""

    def adopt(self, trial_id: str, attempt: int, pid: int, pid_started: float) -> bool:
        """On resume, before ``end_leftover``: take over an attempt that ran on while no manager
        did (``reattachWindow``), still running or ended meanwhile, found by pid, start time and
        marker; its end comes as ``trial_exited`` as if this run had launched it. False when
        there is none to take over (a service that cannot keep trials: always)."""
        return False

    async def leave_running(self) -> bool:
        """Instead of ``stop``, for ``expctl stop --keep-trials``: let go of the running trials,
        which keep running for a resume to ``adopt`` (their ends are no longer told); False,
        with nothing done, when this service cannot keep trials (then ``stop`` them)."""
        return False

    def end_adoption(self) -> None:
        """On resume, after every ``adopt``: whatever kept the dead run's trials ends those not
        adopted, and stops keeping the others (this run's watchdog has them now)."""

    def manager_gone_at(self) -> float | None:
        """When the dead run's experiment process was seen to end (by the watchdog that kept
        its trials), or None if unknown: the resume's measure of the time away."""
        return None
