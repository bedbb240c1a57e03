"""The trial watchdog: ends every process of a trial when the trial ends, and every
trial's processes when the experiment process dies.

The local training service starts it (``command(SESSION)``: this file run by its path,
so that it imports the standard library alone, not the ``expmgr`` package) and writes to its stdin ``+<pgid> <marker>`` when a trial starts and ``-<pgid>`` when
it ends. Each trial runs in its own process group, and its environment carries
``EXPMGR_TRIAL_MARKER=<marker>`` (``SESSION/<trial id>/<attempt>``), which every process
it starts inherits, including one that leaves the group (``setsid``, a double fork).

- On ``-<pgid>`` it SIGKILLs this user's processes still carrying that trial's marker
  (found by reading ``/proc/<pid>/environ``): what the trial left running outside its
  group. Only the processes started after the trial can carry it, and pids are given out
  in turn: so it reads the environment of the pids given out since the trial's (between
  its pid and the last one given, ``/proc/sys/kernel/ns_last_pid``), not of every process
  of the machine, unless so many processes were started meanwhile that the pids may
  have come round (then it reads them all).
- When the pipe closes without a clean ``stop`` line, because the experiment process
  was SIGKILLed or crashed, it SIGKILLs every group still listed, then every process
  carrying a marker of this SESSION; on ``stop`` it does the latter only.

So no trial, nor anything it started, outlives its trial or its experiment, unless it
clears its environment, changes user, or runs where there is no ``/proc``. ``/proc`` is
read on those events only, never polled. It imports nothing but ``os``, ``signal``,
``sys`` and ``time`` (so it must be run by path, see ``command``), and runs in its own
session so that a Ctrl+C meant for the experiment does not reach it.
"""
from __future__ import annotations

import os
import signal
import sys
import time

TYPE_CHECKING = False  # typing itself is not imported when the watchdog runs
if TYPE_CHECKING:
    from typing import Callable, Iterable

MARKER_ENV = "EXPMGR_TRIAL_MARKER"
_SWEEP_PASSES = 20
"""Scans at most: each kills what the one before found, and what those forked meanwhile."""
_FIRST_PID = 300
"""Where Linux starts again when the pids come round (``RESERVED_PIDS``)."""


def command(session: str) -> list[str]:
    """How to start the watchdog for ``session``: this file by its path, with ``-I -S`` (no
    site-packages, no environment variables, not its folder on ``sys.path``), so that it
    imports the standard library only: about a third of the memory and start-up of
    ``python -m expmgr.training.watchdog``, which imports the ``expmgr`` package first."""
    path = os.path.abspath(__file__)
    if not os.path.isfile(path):  # imported from a zip: only the package's importer reaches it
        return [sys.executable, "-m", "expmgr.training.watchdog", session]
    return [sys.executable, "-I", "-S", path, session]


def trial_marker(session: str, trial_id: str, attempt: int) -> str:
    """The value of ``EXPMGR_TRIAL_MARKER`` for one attempt of a trial."""
    return f"{session}/{trial_id}/{attempt}"


def processes_started() -> int | None:
    """How many processes and threads the machine has started since it booted (``processes``
    in ``/proc/stat``); None if unknown."""
    try:
        stat = _read("/proc/stat")
    except OSError:
        return None
    start = stat.find(b"\nprocesses ")
    if start < 0:
        return None
    return int(stat[start + 11:stat.index(b"\n", start + 11)])


class StartedSince:
    """Which pids may belong to processes started after process ``pid``, which started when
    ``processes_started()`` was ``started``: those given out after it, in turn::

        since = StartedSince(trial_pid, processes_started())     # when the trial starts
        ...
        test = since.test()     # a pid -> bool test, or None: any pid may be one of them

    The test allows more than those (an older process whose pid lies in the range), never
    fewer. It is None when it cannot tell: no ``/proc`` to read, or so many processes
    started meanwhile (half of ``pid_max``) that the pids may have come round past ``pid``,
    or ``/proc`` is of another pid namespace than this process."""

    def __init__(self, pid: int, started: int | None) -> None:
        self.pid = pid
        self.started = started

    def test(self) -> Callable[[int], bool] | None:
        now = processes_started()
        try:
            last = int(_read("/proc/sys/kernel/ns_last_pid"))
            pid_max = int(_read("/proc/sys/kernel/pid_max"))
            if os.readlink("/proc/self") != str(os.getpid()):
                return None  # /proc shows another pid namespace than ns_last_pid's
        except (OSError, ValueError):
            return None
        # Counted from when the trial's "+" line came, a little after its start: the margin
        # of half the pids covers the processes started in between many times over.
        if self.started is None or now is None or now - self.started >= (pid_max - _FIRST_PID) // 2:
            return None
        return pids_given_between(self.pid, last)


def pids_given_between(first: int, last: int) -> Callable[[int], bool]:
    """Whether a pid lies from ``first`` to ``last`` in the order Linux gives them out
    (up to ``pid_max``, then again from the bottom)."""
    if first <= last:
        return lambda pid: first <= pid <= last
    return lambda pid: pid >= first or pid <= last  # they came round past pid_max


def marked_processes(value: str, *, prefix: bool = False, since: StartedSince | None = None) -> list[int]:
    """Pids of this user's processes (this one excepted) whose environment has
    ``EXPMGR_TRIAL_MARKER=value`` (or a value starting with ``value`` if ``prefix``);
    with ``since``, only among those started after that process (see ``StartedSince``)."""
    needle = f"\0{MARKER_ENV}={value}{'' if prefix else chr(0)}".encode()
    uid, own = os.getuid(), os.getpid()
    try:
        names = os.listdir("/proc")
    except OSError:  # no /proc: nothing to find (the documented limit)
        return []
    candidate = since.test() if since is not None else None
    found = []
    for name in names:
        if not name.isdigit() or int(name) == own or (candidate is not None and not candidate(int(name))):
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
            environ = _read(f"/proc/{name}/environ")
        except OSError:  # gone meanwhile, or not readable (another user, not dumpable)
            continue
        if needle in b"\0" + environ:
            found.append(int(name))
    return found


def _read(path: str) -> bytes:
    """The whole file, through bare file descriptors: a tenth of ``open()``'s cost, which
    counts when it is every process of the user."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def kill_marked(value: str, *, prefix: bool = False, since: StartedSince | None = None) -> int:
    """SIGKILL every process ``marked_processes`` finds, again until none is left;
    returns how many were killed."""
    killed: set[int] = set()
    for _ in range(_SWEEP_PASSES):
        found = marked_processes(value, prefix=prefix, since=since)
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)  # a killed process keeps its environment until it is really gone
    return len(killed)


def watch(lines: Iterable[str], session: str | None = None) -> int:
    groups: dict[int, tuple[str | None, StartedSince]] = {}
    for line in lines:
        line = line.strip()
        if line == "stop":
            if session:
                kill_marked(session + "/", prefix=True)
            return 0
        sign, _, rest = line.partition(" ")
        if sign[:1] not in ("+", "-") or not sign[1:].isdigit():
            continue
        pgid = int(sign[1:])
        if sign[0] == "+":
            groups[pgid] = (rest or None, StartedSince(pgid, processes_started()))
        else:
            marker, since = groups.pop(pgid, (None, None))
            if marker:
                kill_marked(marker, since=since)
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if session:
        kill_marked(session + "/", prefix=True)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(watch(sys.stdin, sys.argv[1] if len(sys.argv) > 1 else None))
