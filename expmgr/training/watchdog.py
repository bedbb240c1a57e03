"""The trial watchdog: ends every process of a trial when the trial ends, and every
trial's processes when the experiment process dies.

The local training service starts it (``python -m expmgr.training.watchdog SESSION``)
and writes to its stdin ``+<pgid> <marker>`` when a trial starts and ``-<pgid>`` when
it ends. Each trial runs in its own process group, and its environment carries
``EXPMGR_TRIAL_MARKER=<marker>`` (``SESSION/<trial id>/<attempt>``), which every process
it starts inherits, including one that leaves the group (``setsid``, a double fork).

- On ``-<pgid>`` it SIGKILLs this user's processes still carrying that trial's marker
  (found by reading ``/proc/<pid>/environ``): what the trial left running outside its
  group.
- When the pipe closes without a clean ``stop`` line, because the experiment process
  was SIGKILLed or crashed, it SIGKILLs every group still listed, then every process
  carrying a marker of this SESSION; on ``stop`` it does the latter only.

So no trial, nor anything it started, outlives its trial or its experiment, unless it
clears its environment, changes user, or runs where there is no ``/proc``. ``/proc`` is
read on those events only, never polled. It imports nothing but ``os``, ``signal``,
``sys`` and ``time``, and runs in its own session so that a Ctrl+C meant for the
experiment does not reach it.
"""
from __future__ import annotations

import os
import signal
import sys
import time
from typing import Iterable

MARKER_ENV = "EXPMGR_TRIAL_MARKER"
_SWEEP_PASSES = 20
"""Scans at most: each kills what the one before found, and what those forked meanwhile."""


def trial_marker(session: str, trial_id: str, attempt: int) -> str:
    """The value of ``EXPMGR_TRIAL_MARKER`` for one attempt of a trial."""
    return f"{session}/{trial_id}/{attempt}"


def marked_processes(value: str, *, prefix: bool = False) -> list[int]:
    """Pids of this user's processes (this one excepted) whose environment has
    ``EXPMGR_TRIAL_MARKER=value`` (or a value starting with ``value`` if ``prefix``)."""
    needle = f"\0{MARKER_ENV}={value}{'' if prefix else chr(0)}".encode()
    uid, own = os.getuid(), os.getpid()
    try:
        names = os.listdir("/proc")
    except OSError:  # no /proc: nothing to find (the documented limit)
        return []
    found = []
    for name in names:
        if not name.isdigit() or int(name) == own:
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


def kill_marked(value: str, *, prefix: bool = False) -> int:
    """SIGKILL every process ``marked_processes`` finds, again until none is left;
    returns how many were killed."""
    killed: set[int] = set()
    for _ in range(_SWEEP_PASSES):
        found = marked_processes(value, prefix=prefix)
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
    groups: dict[int, str | None] = {}
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
            groups[pgid] = rest or None
        else:
            marker = groups.pop(pgid, None)
            if marker:
                kill_marked(marker)
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
