"""Kept trials (``trainingService.reattachWindow``): the local service's side of trials that
may outlive the experiment process. Each runs under a keeper (``keeper.py``), which carries
its output and writes its end to its folder; the watchdog keeps them for the window when
the experiment process dies, and tells when that was. A resume finds each kept trial that is
still running, or its end, takes it over, and then releases the dead run's watchdog::

    previous = WatchdogRecord.read(state_dir)          # the dead run's watchdog, before ours
    WatchdogRecord(pid, started).write(state_dir)
    trial = await spawn_kept(command, code_dir, env, folder, attempt, stdout, stderr, limits, stderr_fd)
    found = keeper_of(pid, pid_started, trial_id, attempt)   # on resume: (keeper, marker) or None
    trial = KeptTrial.adopted(pid, found[0] if found else None)
    release(previous, adopted_pgids, state_dir)        # that watchdog ends the others, and exits
"""
from __future__ import annotations

import asyncio
import errno
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from expmgr.rotation import RotationLimits
from expmgr.training._process import command_argv, exit_of, process_start_time, trial_environment
from expmgr.training.keeper import KEEPER_MARKER_ENV, command as keeper_command
from expmgr.training.watchdog import ADOPTED_FILE, MANAGER_GONE_FILE, MARKER_ENV, RELEASE_SIGNAL, WINDOW_ENDED_FILE
from expmgr.training.watchdog import trial_marker

KEEPER_START_TIMEOUT = 60.0
"""Seconds a keeper may take to say it started its trial (an interpreter start, under load)."""
_WATCHDOG_FILE = "current"
KEEPING_FORMAT = "1"
"""The version of what a run leaves for the next to adopt its trials (this file, the keeper's
markers and status file, the watchdog's state files): a run adopts only trials of a run with the
same one, and reruns the others. Changed with any of them."""
_SAME_PROCESS = 0.01
"""Seconds two start times of one pid may differ by (``/proc`` counts in clock ticks)."""


def status_file(folder: Path, attempt: int) -> Path:
    """Where the keeper of ``attempt`` writes its trial's end."""
    return folder / f".exit-status-{attempt}"


@dataclass(frozen=True)
class WatchdogRecord:
    """A run's watchdog, as it told its successor (``<experiment>/watchdog/current``): found again
    by pid and start time."""

    pid: int
    started: float

    @classmethod
    def read(cls, state_dir: Path) -> WatchdogRecord | None:
        """The record a run left, if it is of this KEEPING_FORMAT (None: nothing to adopt)."""
        try:
            keeping_format, pid, started = (state_dir / _WATCHDOG_FILE).read_text().split()
            if keeping_format != KEEPING_FORMAT:
                return None
            return cls(int(pid), float(started))
        except (OSError, ValueError):
            return None

    def write(self, state_dir: Path) -> None:
        temporary = state_dir / f"{_WATCHDOG_FILE}.tmp"
        temporary.write_text(f"{KEEPING_FORMAT} {self.pid} {self.started!r}\n")
        os.replace(temporary, state_dir / _WATCHDOG_FILE)

    def alive(self) -> bool:
        started = process_start_time(self.pid)
        return started is not None and abs(started - self.started) <= _SAME_PROCESS


def take_manager_gone(state_dir: Path) -> tuple[float | None, set[int]]:
    """What the dead run's watchdog wrote (then forgotten): when it saw its experiment process
    end (None if it did not say), and the trial groups it ended when the window passed."""
    gone: float | None = None
    ended: set[int] = set()
    try:
        gone = float((state_dir / MANAGER_GONE_FILE).read_text())
    except (OSError, ValueError):
        pass
    try:
        ended = {int(word) for word in (state_dir / WINDOW_ENDED_FILE).read_text().split() if word.isdigit()}
    except OSError:
        pass
    for name in (MANAGER_GONE_FILE, WINDOW_ENDED_FILE, ADOPTED_FILE):
        (state_dir / name).unlink(missing_ok=True)
    return gone, ended


class KeptTrial:
    """A trial under its keeper: ``pid`` is the trial's (its process group's), ``exited`` is set
    when the keeper has gone (its return code, None if unknown), after it wrote the trial's end
    to its status file. The keeper is this process's child, or a dead run's (adopted: its
    end seen through a pidfd)."""

    def __init__(self, pid: int, exited: asyncio.Future) -> None:
        self.pid = pid
        self.exited = exited

    @classmethod
    def adopted(cls, pid: int, keeper: int | None) -> KeptTrial:
        """The trial ``pid`` a dead run left under keeper ``keeper`` (None: both ended)."""
        loop = asyncio.get_running_loop()
        exited: asyncio.Future[int | None] = loop.create_future()
        try:
            if keeper is None:
                raise ProcessLookupError
            pidfd = os.pidfd_open(keeper)
        except ProcessLookupError:   # it ended already
            exited.set_result(None)
            return cls(pid, exited)

        def on_exit() -> None:
            loop.remove_reader(pidfd)
            os.close(pidfd)
            if not exited.done():
                exited.set_result(None)
        loop.add_reader(pidfd, on_exit)
        return cls(pid, exited)


async def spawn_kept(command: str, code_directory: Path, env: dict[str, str], folder: Path, attempt: int,
                     stdout: Path, stderr: Path, limits: RotationLimits, keeper_stderr: int) -> KeptTrial:
    """Start the trial under its keeper, each in a session of its own; returns once the keeper
    said it started the trial. OSError when the trial could not be started (the keeper's
    errno and message) or the keeper could not."""
    kept_env = trial_environment(env)
    kept_env[KEEPER_MARKER_ENV] = kept_env.pop(MARKER_ENV)
    status = status_file(folder, attempt)
    status.unlink(missing_ok=True)
    keeper = subprocess.Popen(
        keeper_command(str(status), str(stdout), str(stderr), limits.as_env(), command, command_argv(command)),
        cwd=code_directory, env=kept_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=keeper_stderr,
        start_new_session=True)
    assert keeper.stdout is not None   # started with stdout=PIPE
    loop = asyncio.get_running_loop()
    reading = loop.run_in_executor(None, keeper.stdout.readline)
    try:
        line = await asyncio.wait_for(asyncio.shield(reading), KEEPER_START_TIMEOUT)
    except (asyncio.TimeoutError, asyncio.CancelledError) as stopped:
        # Killed first: the read in the executor ends with it (EOF), then the pipe can close. A
        # trial it started meanwhile carries this run's marker: the watchdog ends it at stop.
        keeper.kill()
        await asyncio.wait({reading})
        keeper.stdout.close()
        if isinstance(stopped, asyncio.CancelledError):
            raise
        line = b""
    else:
        keeper.stdout.close()
    words = line.split(maxsplit=2)
    if words[:1] == [b"started"] and len(words) == 2 and words[1].isdigit():
        return KeptTrial(int(words[1]), exit_of(keeper))
    if keeper.poll() is None:
        keeper.kill()
    await loop.run_in_executor(None, keeper.wait)
    if line.startswith(b"error "):
        try:
            number, message, filename = json.loads(line[6:])
            failed = OSError(int(number), str(message), filename)
        except (ValueError, TypeError):
            failed = OSError(errno.EIO, f"the trial's keeper could not start it: {line[6:200]!r}")
        raise failed
    raise OSError(errno.EIO, f"the trial's keeper ended before it started the trial (exit {keeper.returncode}; "
                             f"its stderr is the trial's)")


def keeper_of(pid: int, pid_started: float, trial_id: str, attempt: int) -> tuple[int, str] | None:
    """(the pid of its keeper, its marker) if trial process ``pid`` (started at ``pid_started``)
    still runs as that attempt, under its keeper: found by pid, start time and markers (the
    trial's and its keeper's the same, of that attempt, in whichever run's session started it:
    a trial taken over once may be taken over again), never by name. None otherwise."""
    started = process_start_time(pid)
    if started is None or abs(started - pid_started) > _SAME_PROCESS:
        return None
    marker = _environment_value(pid, MARKER_ENV)
    if marker is None or not marker.endswith(trial_marker("", trial_id, attempt)):
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
        keeper = int(stat[stat.rindex(b")") + 2:].split()[1])   # the parent: fields count from the last ")"
    except (OSError, ValueError, IndexError):
        return None
    return (keeper, marker) if _environment_value(keeper, KEEPER_MARKER_ENV) == marker else None


def visible_gpus(pid: int) -> list[int]:
    """The GPU indices process ``pid`` was given (its ``CUDA_VISIBLE_DEVICES``); [] if none or unreadable."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            variables = file.read().split(b"\0")
    except OSError:
        return []
    for variable in variables:
        if variable.startswith(b"CUDA_VISIBLE_DEVICES="):
            return [int(word) for word in variable[21:].split(b",") if word.strip().isdigit()]
    return []


def _environment_value(pid: int, name: str) -> str | None:
    """The value of variable ``name`` in process ``pid``'s environment (as it was started), or None."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            environ = b"\0" + file.read()
    except OSError:
        return None
    key = f"\0{name}=".encode()
    start = environ.find(key)
    if start < 0:
        return None
    start += len(key)
    end = environ.find(b"\0", start)
    return environ[start:end if end >= 0 else len(environ)].decode(errors="replace")


def release(previous: WatchdogRecord, adopted: list[int], state_dir: Path) -> None:
    """Tell the dead run's watchdog that these trials' groups are watched by this run's now: it
    ends the others it still keeps, and exits."""
    if not previous.alive():
        return
    temporary = state_dir / f"{ADOPTED_FILE}.tmp"
    temporary.write_text("".join(f"{pgid}\n" for pgid in adopted))
    os.replace(temporary, state_dir / ADOPTED_FILE)
    try:
        os.kill(previous.pid, RELEASE_SIGNAL)
    except (ProcessLookupError, PermissionError):
        pass

