"""A trial's stdout and stderr, carried from pipes into its files by one thread per
training service, so that each file is bounded (rotated, ``expmgr.rotation``) without the
trial knowing, and what the trial wrote before it died, however it died, still arrives
(the kernel keeps a pipe's bytes for its reader)::

    pump = OutputPump(limits, on_error=report)      # report(message): once per file
    pump.start()
    output = pump.open(files.stdout, files.stderr)  # OSError if a file cannot be opened
    process = spawn_trial(command, cwd, env, output.stdout, output.stderr)
    output.close_child_ends()                       # the trial holds its ends now
    ...
    await output.drained(timeout)                   # both pipes at their end, files closed
    pump.stop()

A file that cannot be written (a full disk) holds its bytes in memory, up to
``MAX_PENDING`` per stream, and the pump retries each ``RETRY_INTERVAL``; past that it
stops reading the pipe, so the trial waits in its next write until there is room again
instead of losing output or failing. Each such file is reported once through ``on_error``.
"""
from __future__ import annotations

import asyncio
import fcntl
import os
import selectors
import threading
from pathlib import Path
from typing import Callable

from expmgr.rotation import RotatingWriter, RotationLimits

PIPE_SIZE = 1024 * 1024
READ_SIZE = PIPE_SIZE
MAX_PENDING = 1024 * 1024
"""Bytes held per stream while its file cannot be written; past this the pipe is not read."""
RETRY_INTERVAL = 1.0


def _enlarge(pipe: int) -> None:
    """A 1 MiB pipe rather than 64 KiB: a trial printing fast is woken, and the pump reads,
    16 times less often (the kernel caps it at /proc/sys/fs/pipe-max-size)."""
    try:
        fcntl.fcntl(pipe, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    except (AttributeError, OSError):
        pass  # not Linux, or a lower cap: the default size works too


class _Stream:
    """One pipe and the file it goes to."""

    def __init__(self, read_end: int, writer: RotatingWriter, output: TrialOutput) -> None:
        self.read_end = read_end
        self.writer = writer
        self.output = output
        self.pending = b""
        self.at_end = False
        self.failed = False  # reported once
        self.reading = True


class TrialOutput:
    """The pipes of one trial attempt; see the module docstring."""

    def __init__(self, pump: OutputPump, stdout: int, stderr: int) -> None:
        self._pump = pump
        self.stdout = stdout
        """The write end the trial gets as its stdout."""
        self.stderr = stderr
        self._open = 2
        self._done = threading.Event()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = []
        self._lock = threading.Lock()

    def close_child_ends(self) -> None:
        """Close this process's copies of the trial's ends: the pipes then end when the
        trial (and every process that inherited them) has closed its own."""
        for fd in (self.stdout, self.stderr):
            try:
                os.close(fd)
            except OSError:
                pass
        self.stdout = self.stderr = -1

    async def drained(self, timeout: float) -> bool:
        """Wait until both pipes ended and the files were written and closed; False if
        ``timeout`` passed first (a process the trial left still holds a pipe open: the
        pump goes on carrying its output)."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            if self._done.is_set():
                return True
            self._waiters.append((loop, future))
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout)
            return True
        except asyncio.TimeoutError:
            return False

    def is_drained(self) -> bool:
        return self._done.is_set()

    def _stream_ended(self) -> None:
        self._open -= 1
        if self._open:
            return
        with self._lock:
            self._done.set()
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            try:
                loop.call_soon_threadsafe(_settle, future)
            except RuntimeError:  # that loop is closed: nobody waits any more
                pass


def _settle(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


class OutputPump:
    """The thread that carries every trial's output of one training service."""

    def __init__(self, limits: RotationLimits, on_error: Callable[[str], None] | None = None) -> None:
        self._limits = limits
        self._on_error = on_error or (lambda message: None)
        self._selector = selectors.DefaultSelector()
        self._streams: dict[int, _Stream] = {}
        self._new: list[_Stream] = []
        self._lock = threading.Lock()
        self._wake_read, self._wake_write = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._thread: threading.Thread | None = None
        self._stopping = False

    def start(self) -> None:
        if self._thread is None:
            self._selector.register(self._wake_read, selectors.EVENT_READ)
            self._thread = threading.Thread(target=self._run, name="trial-output", daemon=True)
            self._thread.start()

    def open(self, stdout: Path, stderr: Path) -> TrialOutput:
        """Pipes for one attempt whose output goes to ``stdout`` and ``stderr`` (appended);
        OSError when a file cannot be opened (nothing is left open then)."""
        writers = [RotatingWriter(stdout, self._limits), RotatingWriter(stderr, self._limits)]
        pipes: list[tuple[int, int]] = []
        try:
            for writer in writers:
                writer.fileno()  # opened now, so that a launch fails on a folder it cannot write
            for _ in writers:
                pipes.append(os.pipe2(os.O_CLOEXEC))
                _enlarge(pipes[-1][1])
        except OSError:
            for writer in writers:
                writer.close()
            for read_end, write_end in pipes:
                os.close(read_end)
                os.close(write_end)
            raise
        output = TrialOutput(self, pipes[0][1], pipes[1][1])
        streams = [_Stream(read_end, writer, output) for (read_end, _), writer in zip(pipes, writers)]
        for stream in streams:
            os.set_blocking(stream.read_end, False)
        with self._lock:
            self._new.extend(streams)
        self._wake()
        return output

    def stop(self, timeout: float = 10.0) -> None:
        """Carry what the pipes still hold, then end the thread; idempotent. Pipes still
        open after ``timeout`` (a process that outlived its trial) are closed unread."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stopping = True
        self._wake()
        thread.join(timeout)
        # The thread is gone (or stuck in a write to a hung disk, then it is a daemon).
        if not thread.is_alive():
            for stream in list(self._streams.values()):
                self._finish(stream)
            self._selector.close()
            os.close(self._wake_read)
            os.close(self._wake_write)

    def _wake(self) -> None:
        try:
            os.write(self._wake_write, b"x")
        except BlockingIOError:
            pass  # already woken

    def _run(self) -> None:
        while True:
            with self._lock:
                new, self._new = self._new, []
            for stream in new:
                self._streams[stream.read_end] = stream
                self._selector.register(stream.read_end, selectors.EVENT_READ, stream)
            waiting = any(stream.pending for stream in self._streams.values())
            if self._stopping and not self._streams and not new:
                return
            events = self._selector.select(RETRY_INTERVAL if waiting or self._stopping else None)
            for key, _ in events:
                if key.data is None:
                    try:
                        os.read(self._wake_read, 4096)
                    except BlockingIOError:
                        pass
                    continue
                self._read(key.data)
            for stream in list(self._streams.values()):
                if stream.pending:
                    self._flush(stream)
            if self._stopping and not events:
                # Only processes that outlived their trial still hold the pipes that are left.
                for stream in list(self._streams.values()):
                    self._finish(stream)
                return

    def _read(self, stream: _Stream) -> None:
        try:
            data = os.read(stream.read_end, READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            stream.at_end = True
            self._set_reading(stream, False)
            if not stream.pending:
                self._finish(stream)
            return
        stream.pending += data
        self._flush(stream)

    def _flush(self, stream: _Stream) -> None:
        try:
            while stream.pending:
                stream.pending = stream.pending[stream.writer.write_some(stream.pending):]
        except OSError as error:
            if not stream.failed:
                stream.failed = True
                self._on_error(f"cannot write {stream.writer.path}: {error.strerror or error}; its output is "
                               f"held (up to {MAX_PENDING // 1024} KiB, then the trial waits) until it can be")
            self._set_reading(stream, len(stream.pending) < MAX_PENDING and not stream.at_end)
            return
        if stream.failed:
            stream.failed = False
            self._on_error(f"{stream.writer.path} can be written again; no output was lost")
        if stream.at_end:
            self._finish(stream)
        else:
            self._set_reading(stream, True)

    def _set_reading(self, stream: _Stream, reading: bool) -> None:
        if reading == stream.reading or stream.read_end not in self._streams:
            return
        stream.reading = reading
        if reading:
            self._selector.register(stream.read_end, selectors.EVENT_READ, stream)
        else:
            self._selector.unregister(stream.read_end)

    def _finish(self, stream: _Stream) -> None:
        if self._streams.pop(stream.read_end, None) is None:
            return
        if stream.reading:
            self._selector.unregister(stream.read_end)
        os.close(stream.read_end)
        stream.writer.close()
        stream.output._stream_ended()
