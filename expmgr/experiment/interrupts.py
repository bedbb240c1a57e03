"""SIGTERM and SIGUSR1 as exceptions in the main thread, as SIGINT is KeyboardInterrupt,
a blocking wait that lets them arrive without polling, and a section they cannot split:
``Experiment.run()`` and a blocking ``Experiment.view()`` catch them to stop (or, on a
preemption notice, to stop resumable)::

    ended = WakingEvent()                     # set by another thread
    previous = signal.signal(signal.SIGTERM, raise_stop_signal)
    try:
        with signals_deferred():              # signals wait until its end
            start_what_must_be_stopped()
        wait_interruptibly(ended)             # blocks; raises StopSignal on SIGTERM
    except (KeyboardInterrupt, StopSignal):
        ...
"""
from __future__ import annotations

import contextlib
import math
import os
import select
import signal
import threading
import time
from typing import Any, Iterator

_EVENT_BYTE = b"\0"
"""What ``WakingEvent.set`` writes to a waiter's pipe; the signal module writes signal
numbers (never 0), which are passed on to the wakeup fd that was set before the wait."""


class StopSignal(BaseException):
    """Raised in the main thread by SIGTERM during ``run()``, like KeyboardInterrupt by SIGINT."""


class PreemptSignal(BaseException):
    """Raised in the main thread by SIGUSR1 (a preemption notice) while the experiment runs."""


class KeepTrialsSignal(BaseException):
    """Raised in the main thread by SIGUSR2 (``expctl stop --keep-trials``) while the experiment runs."""


def raise_preempt_signal(signum: int, frame: Any) -> None:
    raise PreemptSignal()


def raise_keep_trials_signal(signum: int, frame: Any) -> None:
    raise KeepTrialsSignal()


def raise_stop_signal(signum: int, frame: Any) -> None:
    raise StopSignal()


DEFERRED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)
"""The signals an experiment acts on (stop, stop, preemption notice, stop leaving the trials running)."""


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGUSR1 until the end of the block, then deliver them, in
    order, to the handlers that were in place before: a section that starts something that
    must be stopped (threads, trials) is not split by one, so whoever handles it finds the
    thing started, or not started at all. A second SIGINT during the block raises
    KeyboardInterrupt at once: the user's way out of a section that hangs. Outside the
    main thread (where no signal handler runs) it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: Any) -> None:
        if signum == signal.SIGINT and signal.SIGINT in held:
            raise KeyboardInterrupt
        held.append(signum)

    # A handler set from C (getsignal: None) could not be put back: such a signal is not held.
    previous_handlers = {signum: signal.signal(signum, hold) for signum in DEFERRED_SIGNALS
                         if signal.getsignal(signum) is not None}
    try:
        yield
    finally:
        for signum, handler in previous_handlers.items():
            signal.signal(signum, handler)
        for held_signal in held:
            signal.raise_signal(held_signal)  # its handler runs (and may raise) as this block ends


class WakingEvent(threading.Event):
    """A ``threading.Event`` that ``wait_interruptibly`` can wait for in the main thread:
    ``set()`` also writes to the pipe of each such waiter."""

    def __init__(self) -> None:
        super().__init__()
        self._waiter_pipes: set[int] = set()
        self._pipes_lock = threading.Lock()
        """Held while writing, so that a waiter's pipe is not closed in between."""

    def set(self) -> None:
        super().set()
        with self._pipes_lock:
            for pipe in self._waiter_pipes:
                try:
                    os.write(pipe, _EVENT_BYTE)
                except OSError:
                    pass  # full (the waiter is awake already)

    def _add_waiter_pipe(self, pipe: int) -> None:
        with self._pipes_lock:
            self._waiter_pipes.add(pipe)

    def _remove_waiter_pipe(self, pipe: int) -> None:
        with self._pipes_lock:
            self._waiter_pipes.discard(pipe)


def wait_interruptibly(event: WakingEvent, timeout: float | None = None) -> bool:
    """``event.wait(timeout)``, except that in the main thread signals wake it as well: their
    Python handlers run here (SIGINT's KeyboardInterrupt, ``raise_stop_signal``'s StopSignal
    come out of this call) even when Linux delivers the signal to another thread, which does
    not wake a main thread blocked in ``Event.wait``. It does not poll: it blocks in poll(2)
    on a pipe that is the signal module's wakeup fd and that ``event.set()`` writes to, so a
    signal or the event arriving just before it blocks is not missed. The wakeup fd set
    before is restored after (and is passed the signals that came meanwhile). True when
    ``event`` is set, False on timeout."""
    if threading.current_thread() is not threading.main_thread():
        return event.wait(timeout)
    read_end, write_end = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        previous_wakeup_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    except ValueError:  # the main thread of a subinterpreter: no signals here
        os.close(read_end)
        os.close(write_end)
        return event.wait(timeout)
    event._add_waiter_pipe(write_end)
    try:
        pipe = select.poll()  # not select(): no limit on the fd's number in a process with many files open
        pipe.register(read_end, select.POLLIN)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not event.is_set():
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            pipe.poll(None if remaining is None else math.ceil(remaining * 1000))  # a raising handler raises here
            _pass_on_signals(read_end, previous_wakeup_fd)
        return True
    finally:
        event._remove_waiter_pipe(write_end)
        # Restored before the pipe is closed: the signal module never writes to a closed fd.
        signal.set_wakeup_fd(previous_wakeup_fd)
        _pass_on_signals(read_end, previous_wakeup_fd)
        os.close(read_end)
        os.close(write_end)


def _pass_on_signals(read_end: int, previous_wakeup_fd: int) -> None:
    """Empty the pipe; the signal numbers in it go to the previous wakeup fd, if any (an
    asyncio loop of the main thread learns of its signals that way)."""
    while True:
        try:
            data = os.read(read_end, 512)
        except BlockingIOError:
            return
        signals = data.replace(_EVENT_BYTE, b"")
        if signals and previous_wakeup_fd != -1:
            try:
                os.write(previous_wakeup_fd, signals)
            except OSError:
                pass  # full or closed: its owner was not waiting for them
        if len(data) < 512:
            return
