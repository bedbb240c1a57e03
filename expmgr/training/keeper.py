"""The trial keeper: the parent of one trial of a local experiment with a reattach window
(``trainingService.reattachWindow``), so that the trial can outlive the experiment process
for a resume to take it over (docs/fault-tolerance.md)::

    python -I -S keeper.py STATUS STDOUT STDERR LIMITS COMMAND -- ARGV...

The local service starts it (``command()``) in a session of its own. It starts ``ARGV``
(``/bin/sh -c COMMAND`` when ARGV's program is not found, as ``spawn_trial`` does) as its
child in a new session, which is the trial's process group as without a keeper: the
service's signals go to that group, and the keeper, outside it, outlives even a SIGKILL of
the trial to carry what the trial printed. The trial gets the keeper's environment with
``EXPMGR_KEEPER_MARKER`` as ``EXPMGR_TRIAL_MARKER`` (so the keeper is not one of the trial's
processes for the watchdog). The keeper writes ``started <pid>`` (or ``error [errno,
message, file]``, JSON) on its stdout and closes it: the experiment process may die from then on
without the trial or the keeper noticing.

It carries the trial's stdout and stderr from pipes into the files ``STDOUT`` and ``STDERR``
(rotated at ``LIMITS``, ``RotationLimits.as_env``), as the service's output pump does for
trials without a keeper; a file that cannot be written holds the keeper's reading, so the
trial waits in its next write rather than losing output. When the trial has exited and its
output is carried (or ``DRAIN_TIMEOUT`` passed, for a process that escaped with the pipes), it
writes ``{"returncode": N}`` (negative: the signal) to ``STATUS`` atomically and exits 0:
whoever manages the experiment then, this process or a resumed one, reads the trial's end
there.

It imports the standard library and ``expmgr.rotation`` alone.
"""
from __future__ import annotations

import errno
import json
import os
import selectors
import signal
import subprocess
import sys
import time

TYPE_CHECKING = False  # typing itself is not imported when the keeper runs
if TYPE_CHECKING:
    from expmgr.rotation import RotatingWriter

KEEPER_MARKER_ENV = "EXPMGR_KEEPER_MARKER"
MARKER_ENV = "EXPMGR_TRIAL_MARKER"
DRAIN_TIMEOUT = 5.0
"""Seconds the output pipes are read after the trial exited (others may hold them)."""
RETRY_INTERVAL = 1.0
_CAUGHT = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""Caught, not ignored: the trial's ``exec`` resets a handler to the default, not SIG_IGN."""


def command(status: str, stdout: str, stderr: str, limits: str, trial_command: str,
            argv: tuple[str, ...]) -> list[str]:
    """How to start a keeper: this file by its path with ``-I -S`` (the standard library and
    ``expmgr.rotation``, found from this file's place, not the user's environment)."""
    path = os.path.abspath(__file__)
    return [sys.executable, "-I", "-S", path, status, stdout, stderr, limits, trial_command, "--", *argv]


def read_status(path: str) -> int | None:
    """The trial's return code its keeper wrote to ``path``, or None (not written, or not ours)."""
    try:
        with open(path, "rb") as file:
            status = json.loads(file.read(4096))
    except (OSError, ValueError):
        return None
    code = status.get("returncode") if isinstance(status, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def _caught(signum: int, frame: object) -> None:
    """The keeper lives on to see its trial's end: the trial is the one to stop."""


class _Stream:
    def __init__(self, read_end: int, writer: RotatingWriter) -> None:
        self.read_end = read_end
        self.writer = writer
        self.pending = b""
        self.at_end = False


def _start(command_text: str, argv: list[str], env: dict[str, str], out: int, err: int) -> subprocess.Popen:
    spawn = dict(stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, start_new_session=True)
    try:
        return subprocess.Popen(argv, **spawn)  # type: ignore[call-overload]
    except FileNotFoundError:   # let the shell say "not found" in stderr, exit 127
        return subprocess.Popen(["/bin/sh", "-c", command_text], **spawn)  # type: ignore[call-overload]


def _carry(streams: list[_Stream], trial: subprocess.Popen) -> int:
    """Move the pipes' bytes into the files until both pipes end (or DRAIN_TIMEOUT after the
    trial's exit); the trial's return code."""
    selector = selectors.DefaultSelector()
    for stream in streams:
        os.set_blocking(stream.read_end, False)
        selector.register(stream.read_end, selectors.EVENT_READ, stream)
    try:   # the trial's exit wakes the loop at once
        selector.register(os.pidfd_open(trial.pid), selectors.EVENT_READ, None)
    except (AttributeError, OSError):
        pass   # before Linux 5.3: noticed within the select timeout
    returncode: int | None = None
    drain_until = None
    while True:
        open_streams = [stream for stream in streams if not stream.at_end or stream.pending]
        if returncode is None:
            returncode = trial.poll()
            if returncode is not None:
                drain_until = time.monotonic() + DRAIN_TIMEOUT
        if not open_streams and returncode is not None:
            return returncode
        if drain_until is not None and time.monotonic() >= drain_until:
            assert returncode is not None
            return returncode
        timeout = RETRY_INTERVAL
        if drain_until is not None:
            timeout = min(timeout, max(0.0, drain_until - time.monotonic()))
        for key, _ in selector.select(timeout):
            stream = key.data
            if stream is None:   # the trial's pidfd: it exited
                selector.unregister(key.fd)
                continue
            try:
                data = os.read(stream.read_end, 1 << 20)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                stream.at_end = True
                selector.unregister(stream.read_end)
                continue
            stream.pending += data
            selector.unregister(stream.read_end)   # read again once written
        for stream in streams:
            try:
                while stream.pending:
                    stream.pending = stream.pending[stream.writer.write_some(stream.pending):]
            except OSError:
                continue   # a full disk: the trial waits on its pipe until there is room
            if not stream.at_end and stream.read_end not in selector.get_map():
                selector.register(stream.read_end, selectors.EVENT_READ, stream)


def _write_status(path: str, returncode: int) -> None:
    temporary = f"{path}.{os.getpid()}"
    with open(temporary, "w", encoding="ascii") as file:
        file.write(json.dumps({"returncode": returncode}))
    os.replace(temporary, path)


def main(args: list[str]) -> int:
    status, stdout_path, stderr_path, limits_text, command_text = args[:5]
    argv = args[6:]
    for signum in _CAUGHT:
        signal.signal(signum, _caught)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from expmgr.rotation import UNBOUNDED, RotatingWriter, RotationLimits
    limits = RotationLimits.from_env(limits_text) or UNBOUNDED
    env = dict(os.environ)
    env[MARKER_ENV] = env.pop(KEEPER_MARKER_ENV, "")
    pipes = [os.pipe2(os.O_CLOEXEC), os.pipe2(os.O_CLOEXEC)]
    try:
        trial = _start(command_text, argv, env, pipes[0][1], pipes[1][1])
    except OSError as error:
        why = json.dumps([error.errno or errno.EIO, error.strerror or str(error), error.filename])
        os.write(1, f"error {why}\n".encode())
        return 2
    for _, write_end in pipes:
        os.close(write_end)
    try:
        os.write(1, f"started {trial.pid}\n".encode())
    except OSError:
        pass   # the experiment process is gone already: the trial runs on all the same
    os.close(1)
    os.open(os.devnull, os.O_WRONLY)   # fd 1 again, so nothing else lands there
    streams = [_Stream(pipes[0][0], RotatingWriter(stdout_path, limits)),
               _Stream(pipes[1][0], RotatingWriter(stderr_path, limits))]
    returncode = _carry(streams, trial)
    for stream in streams:
        stream.writer.close()
    _write_status(status, returncode)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
