"""Starting and watching one trial process, as every service that runs trials as processes
does it (the local service here, the Ray service's actor on its node): the command rules,
the trial's own session, its exit noticed without polling, its whole group signalled."""
from __future__ import annotations

import asyncio
import functools
import os
import shlex
import subprocess
import threading

from expmgr.trial import ENV_ACCESS_TOKEN


_SHELL_SYNTAX = set(";&|<>()`$\n*?[]{}~=#!")


@functools.lru_cache(maxsize=16)
def command_argv(command: str) -> tuple[str, ...]:
    """How to run ``trialCommand``: a simple command runs directly, so the trial's own
    process gets the signals and its exit status (a signal stays a signal, not the
    shell's 128+n); anything using shell syntax runs under ``/bin/sh -c`` as written."""
    if _SHELL_SYNTAX.isdisjoint(command):
        try:
            argv = tuple(shlex.split(command))
        except ValueError:
            argv = ()
        if argv:
            return argv
    return ("/bin/sh", "-c", command)


def spawn_trial(command: str, cwd: str | os.PathLike[str], env: dict[str, str], stdout: int,
                stderr: int) -> subprocess.Popen:
    """Start ``command`` in its own session, writing to the descriptors ``stdout`` and
    ``stderr`` (the pipes of its OutputPump); raises OSError if it cannot be started."""
    spawn = functools.partial(subprocess.Popen, cwd=cwd, env=trial_environment(env), stdin=subprocess.DEVNULL,
                              stdout=stdout, stderr=stderr, start_new_session=True)
    try:
        return spawn(list(command_argv(command)))
    except FileNotFoundError:  # let the shell say "not found" in stderr, exit 127
        return spawn(["/bin/sh", "-c", command])


UNBUFFERED_ENV = "PYTHONUNBUFFERED"


def trial_environment(env: dict[str, str]) -> dict[str, str]:
    """``env`` without the server's access token (a trial has its own token, for its reports
    only), and with Python's output unbuffered, unless it says otherwise (a ``PYTHONUNBUFFERED``
    of its own, even empty, is the user's choice): a Python trial's prints then reach its
    stdout file as they are made, and none is lost in a buffer when the trial is killed.
    Its Python children inherit it; other programs buffer as they do (docs/logging.md)."""
    env = {name: value for name, value in env.items() if name != ENV_ACCESS_TOKEN}
    env.setdefault(UNBUFFERED_ENV, "1")
    return env


def exit_of(process: subprocess.Popen) -> asyncio.Future:
    """A future of the process's return code, set the moment it exits: the event
    loop watches a pidfd, so no thread and no polling per trial."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(returncode: int) -> None:
        if not future.done():
            future.set_result(returncode)

    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # not Linux 5.3+: a thread blocks in wait()
        threading.Thread(target=lambda: loop.call_soon_threadsafe(settle, process.wait()),
                         name=f"wait-{process.pid}", daemon=True).start()
        return future

    def on_exit() -> None:
        returncode = process.poll()
        if returncode is not None:
            loop.remove_reader(pidfd)
            os.close(pidfd)
            settle(returncode)

    loop.add_reader(pidfd, on_exit)
    return future


def process_start_time(pid: int | None) -> float | None:
    """When process ``pid`` started (seconds since the epoch), or None if it is gone: its
    start in clock ticks after boot (``/proc/<pid>/stat``) plus the boot time (``btime`` in
    ``/proc/stat``), as ``psutil.Process.create_time()`` computes it, at a fifth of its cost
    (it is read at every launch); psutil's where there is no ``/proc``."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
        with open("/proc/stat", "rb") as file:
            boot = file.read()
    except FileNotFoundError:
        # Gone; or no /proc on this system, where psutil knows another way.
        return None if os.path.isdir("/proc/self") else _psutil_start_time(pid)
    except OSError:
        return _psutil_start_time(pid)
    try:
        # The command name (in parentheses) may hold spaces and ")": fields count from the last ")".
        ticks = int(stat[stat.rindex(b")") + 2:].split()[19])
        btime_at = boot.index(b"\nbtime ") + 7
        booted = float(boot[btime_at:boot.index(b"\n", btime_at)])
    except ValueError:
        return _psutil_start_time(pid)
    return ticks / _CLOCK_TICKS + booted


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _psutil_start_time(pid: int) -> float | None:
    import psutil
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def kill_group(pgid: int, signum: int) -> bool:
    try:
        os.killpg(pgid, signum)
        return True
    except (ProcessLookupError, PermissionError):
        return False
