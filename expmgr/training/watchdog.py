"""The trial watchdog: ends every process of a trial when the trial ends, and every
trial's processes when the experiment process dies.

The local training service starts it (``command(SESSION)``: this file run by its path,
so that it imports the standard library alone, not the ``expmgr`` package) and writes to its stdin ``+<pgid> <marker> <process limit> <stderr path>`` when a trial starts and ``-<pgid>`` when
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
  was SIGKILLed or crashed, it appends a line saying so to each trial's stderr (its last
  output: where a resume ends that attempt) and SIGKILLs every group still listed, then every
  process carrying a marker of this SESSION; on ``stop`` it does the latter only.

- While a trial with a process limit (``trialProcessLimit``, not 0) runs, it counts each
  such trial's processes (those carrying its marker) every POLL_INTERVAL seconds; a trial
  with more than its limit (a fork bomb) has a line naming the limit appended to its
  ``stderr`` and ``over-limit <pgid>`` written to the watchdog's stdout (for the service),
  then every process SIGKILLed, as at its end: it ends FAILED (signal 9).

- With a reattach window (``command(SESSION, WINDOW, STATE_DIR)``, ``trainingService.reattachWindow``),
  a pipe that closes without ``stop`` does not end the trials at once: the watchdog writes when
  it closed to ``STATE_DIR/manager-gone``, tells each trial's stderr, and keeps them for WINDOW
  seconds (``wait_for_a_resume``). A resumed experiment that took trials over writes their
  pgids to ``STATE_DIR/adopted`` and sends SIGUSR1: the watchdog ends the others and exits.
  When the window passes first, it lists the trials in ``STATE_DIR/window-ended`` (a resume
  runs them again) and ends everything as without a window.

So no trial, nor anything it started, outlives its trial or its experiment (or its window), unless it
clears its environment, changes user, or runs where there is no ``/proc``. ``/proc`` is
read on those events, and polled only while a trial with a process limit runs. It imports
nothing but ``os``, ``select``, ``signal``, ``stat``, ``sys`` and ``time`` (so it must be run
by path, see ``command``), and runs in its own session so that a Ctrl+C meant for the
experiment does not reach it.
"""
from __future__ import annotations

import os
import select
import signal
import stat
import sys
import time

TYPE_CHECKING = False  # typing itself is not imported when the watchdog runs
if TYPE_CHECKING:
    from typing import Callable, Iterable, Iterator

MARKER_ENV = "EXPMGR_TRIAL_MARKER"
_SWEEP_PASSES = 20
"""Scans at most: each kills what the one before found, and what those forked meanwhile."""
_FIRST_PID = 300
"""Where Linux starts again when the pids come round (``RESERVED_PIDS``)."""
OVER_LIMIT = "over-limit"
"""What the watchdog writes to its stdout, with the trial's pgid, before it kills a trial over its limit."""
POLL_INTERVAL = 0.5
"""Seconds between two counts of the processes of trials with a process limit."""


def command(session: str, window: float = 0.0, state_dir: str | None = None) -> list[str]:
    """How to start the watchdog for ``session``: this file by its path, with ``-I -S`` (no
    site-packages, no environment variables, not its folder on ``sys.path``), so that it
    imports the standard library only: about a third of the memory and start-up of
    ``python -m expmgr.training.watchdog``, which imports the ``expmgr`` package first."""
    path = os.path.abspath(__file__)
    arguments = [session] + ([repr(window), state_dir] if window > 0 and state_dir else [])
    if not os.path.isfile(path):  # imported from a zip: only the package's importer reaches it
        return [sys.executable, "-m", "expmgr.training.watchdog", *arguments]
    return [sys.executable, "-I", "-S", path, *arguments]


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


class _Trial:
    """A running trial as the watchdog knows it, from its ``+`` line."""

    def __init__(self, marker: str | None, since: StartedSince, process_limit: int, stderr: str | None) -> None:
        self.marker = marker
        self.since = since
        self.process_limit = process_limit
        self.stderr = stderr
        self.over_limit = False


def _parse_start(rest: str) -> tuple[str | None, int, str | None]:
    """(marker, process limit, stderr path) of a ``+`` line's words after the pgid."""
    marker, _, rest = rest.partition(" ")
    limit, _, stderr = rest.partition(" ")
    return marker or None, int(limit) if limit.isdigit() else 0, stderr or None


def count_marked(markers: set[str], since: list[StartedSince]) -> dict[str, int]:
    """How many of this user's processes carry each marker (each exact value), reading
    the pids any of ``since`` allows (every pid when one cannot tell)."""
    tests = [each.test() for each in since]
    candidate = None if any(test is None for test in tests) else tests
    counts = dict.fromkeys(markers, 0)
    key = f"\0{MARKER_ENV}=".encode()
    uid, own = os.getuid(), os.getpid()
    try:
        names = os.listdir("/proc")
    except OSError:
        return counts
    for name in names:
        if not name.isdigit() or int(name) == own:
            continue
        if candidate is not None and not any(test(int(name)) for test in candidate if test is not None):
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
            environ = b"\0" + _read(f"/proc/{name}/environ")
        except OSError:
            continue
        start = environ.find(key)
        if start < 0:
            continue
        start += len(key)
        end = environ.find(b"\0", start)
        value = environ[start:end if end >= 0 else len(environ)].decode(errors="replace")
        if value in counts:
            counts[value] += 1
    return counts


def _tell_trial(path: str, message: str) -> None:
    """Append ``message`` to the trial's stderr: one O_APPEND write, as its output's are;
    never through a symlink, into a FIFO or into a hard link a trial put there."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return
    try:
        status = os.fstat(fd)
        if stat.S_ISREG(status.st_mode) and status.st_nlink == 1:
            os.write(fd, message.encode())
    except OSError:
        pass
    finally:
        os.close(fd)


def enforce_process_limits(trials: dict[int, _Trial]) -> None:
    """Kill every trial with more processes than its limit, after telling it why."""
    limited = {pgid: trial for pgid, trial in trials.items()
               if trial.process_limit > 0 and trial.marker and not trial.over_limit}
    if not limited:
        return
    counts = count_marked({trial.marker for trial in limited.values() if trial.marker},
                          [trial.since for trial in limited.values()])
    for pgid, trial in limited.items():
        assert trial.marker is not None
        count = counts.get(trial.marker, 0)
        if count <= trial.process_limit:
            continue
        trial.over_limit = True
        try:  # before the kill: the service reads it when it sees the trial's end
            os.write(sys.stdout.fileno(), f"{OVER_LIMIT} {pgid}\n".encode())
        except (OSError, ValueError):  # no service to read it (gone, or stdout closed)
            pass
        if trial.stderr:
            _tell_trial(trial.stderr, f"expmgr: this trial had {count} processes, more than its limit of "
                                      f"{trial.process_limit} (trialProcessLimit): all of them were killed\n")
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        kill_marked(trial.marker, since=trial.since)


def watch(lines: Iterable[str | None], session: str | None = None, window: float = 0.0,
          state_dir: str | None = None) -> int:
    """Act on each line (see the module docstring); a None between lines (from
    ``stdin_lines``) is a poll: trials over their process limit are ended. With a ``window``
    (seconds), trials outlive their experiment process by that much, for a resume to adopt
    them (``wait_for_a_resume``)."""
    trials: dict[int, _Trial] = {}
    for line in lines:
        if line is None:
            enforce_process_limits(trials)
            continue
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
            marker, limit, stderr = _parse_start(rest)
            trials[pgid] = _Trial(marker, StartedSince(pgid, processes_started()), limit, stderr)
        else:
            trial = trials.pop(pgid, None)
            if trial is not None and trial.marker:
                kill_marked(trial.marker, since=trial.since)
    # Its last output is now: a resume ends such an attempt here, not when the resume came
    # (the time with no manager is no trial's run time).
    ended = ("expmgr: the experiment process ended without stopping this trial (killed, or crashed): all of its "
             "processes were killed\n")
    if window > 0 and state_dir and trials:
        adopted = wait_for_a_resume(trials, window, state_dir)
        if adopted is not None:   # the resumed experiment's watchdog watches those now
            _end_trials({pgid: trial for pgid, trial in trials.items() if pgid not in adopted},
                        "expmgr: the resumed experiment did not take this trial over: all of its processes were "
                        "killed\n")
            return 0
        ended = (f"expmgr: no resume took this trial over within its reattach window ({window:g} s): all of its "
                 f"processes were killed\n")
        # Said first: a resume reruns these, although their keepers write a (killed) end.
        _write_file(os.path.join(state_dir, WINDOW_ENDED_FILE), "".join(f"{pgid}\n" for pgid in trials))
    _end_trials(trials, ended, swept_session=session)
    if session:
        kill_marked(session + "/", prefix=True)
    return 0


def _end_trials(trials: dict[int, _Trial], message: str, *, swept_session: str | None = None) -> None:
    """Tell each trial why in its stderr and SIGKILL its group, and what it started outside the
    group, unless it is of ``swept_session``, whose marked processes the caller ends at once
    afterwards (a trial a resume took over carries the marker of the run that started it)."""
    for pgid, trial in trials.items():
        if trial.stderr:
            _tell_trial(trial.stderr, message)
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if trial.marker and not (swept_session and trial.marker.startswith(swept_session + "/")):
            kill_marked(trial.marker, since=trial.since)


MANAGER_GONE_FILE = "manager-gone"
"""In the watchdog's state folder: when it saw its experiment process end (seconds since the epoch)."""
WINDOW_ENDED_FILE = "window-ended"
"""In the watchdog's state folder: the pgids of the trials it ended when the window passed, one a line."""
ADOPTED_FILE = "adopted"
"""In the watchdog's state folder: the pgids a resumed experiment took over, one a line,
written before it sends the watchdog SIGUSR1."""
RELEASE_SIGNAL = signal.SIGUSR1


def wait_for_a_resume(trials: dict[int, _Trial], window: float, state_dir: str) -> set[int] | None:
    """The experiment process is gone: keep its trials for up to ``window`` seconds. A resumed
    experiment that adopts them writes ADOPTED_FILE and sends RELEASE_SIGNAL (blocked since this
    watchdog began, so none is lost): the pgids it took over are returned. None when the
    window passed first. Meanwhile a trial that ends has what it left behind ended, as at its
    ``-`` line, and process limits hold."""
    _write_file(os.path.join(state_dir, MANAGER_GONE_FILE), repr(time.time()))
    for trial in trials.values():
        if trial.stderr:
            _tell_trial(trial.stderr, f"expmgr: the experiment process ended without stopping this trial (killed, "
                                      f"or crashed): it runs on for up to {window:g} s (reattachWindow) for "
                                      f"`expctl resume` to take it over\n")
    deadline = time.monotonic() + window
    while (left := deadline - time.monotonic()) > 0:
        if signal.sigtimedwait([RELEASE_SIGNAL], min(left, POLL_INTERVAL)) is not None:
            try:
                text = _read(os.path.join(state_dir, ADOPTED_FILE)).decode(errors="replace")
            except OSError:
                text = ""
            return {int(word) for word in text.split() if word.isdigit()}
        for pgid in [pgid for pgid in trials if not _group_alive(pgid)]:
            trial = trials.pop(pgid)
            if trial.marker:
                kill_marked(trial.marker, since=trial.since)
        enforce_process_limits(trials)
    return None


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _write_file(path: str, text: str) -> None:
    temporary = f"{path}.{os.getpid()}"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except OSError:
        pass   # a resume then counts the time away from the trials' last output


def stdin_lines(fd: int, interval: float = POLL_INTERVAL) -> Iterator[str | None]:
    """The lines read from ``fd``, with a None at least every ``interval`` seconds (a
    poll), until it closes."""
    pending = b""
    next_poll = time.monotonic() + interval
    while True:
        ready, _, _ = select.select([fd], [], [], max(0.0, next_poll - time.monotonic()))
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                if pending:
                    yield pending.decode(errors="replace")
                return
            *complete, pending = (pending + chunk).split(b"\n")
            for line in complete:
                yield line.decode(errors="replace")
        if time.monotonic() >= next_poll:
            yield None
            next_poll = time.monotonic() + interval


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, [RELEASE_SIGNAL])   # taken by sigtimedwait, never lost
    arguments = sys.argv[1:]
    sys.exit(watch(stdin_lines(sys.stdin.fileno()), arguments[0] if arguments else None,
                   float(arguments[1]) if len(arguments) > 2 else 0.0, arguments[2] if len(arguments) > 2 else None))
