"""A server on an event-loop thread of its own, served until ``stop()``: the shape of
``Experiment.view``'s Viewer and ``expctl ui``'s HomeServer. A subclass opens what it
serves on the loop (``_open``) and returns how to close it::

    class Viewer(ServingThread):
        async def _open(self) -> Callable[[], Awaitable[None]]:
            host = ExperimentHost(...); host.start(None)
            return host.stop
"""
from __future__ import annotations

import asyncio
import threading
from typing import Awaitable, Callable

from expmgr.experiment.interrupts import WakingEvent, wait_interruptibly


class ServingThread:
    """Start (returns once it serves, or failed to), wait, stop (idempotent)."""

    def __init__(self, thread_name: str) -> None:
        self._thread_name = thread_name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._started = threading.Event()
        self._finished = WakingEvent()
        self._thread: threading.Thread | None = None

    async def _open(self) -> Callable[[], Awaitable[None]]:
        """Open and start serving, on the loop; what closes it all again."""
        raise NotImplementedError

    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name=self._thread_name, daemon=True)
        self._thread.start()
        self._started.wait()

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        finally:
            loop.close()
            self._started.set()
            self._finished.set()

    async def _main(self) -> None:
        close = await self._open()
        self._stopped = asyncio.Event()
        self._started.set()
        try:
            await self._stopped.wait()
        finally:
            await close()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the server stopped; False on timeout. In the main thread, signals'
        handlers run (and may raise) while it waits."""
        return wait_interruptibly(self._finished, timeout)

    def stop(self) -> None:
        """Stop serving and close what was opened; idempotent."""
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stopped.set)
            except RuntimeError:
                pass  # the loop closed in between
        if self._thread is not None:
            self._thread.join()
            self._thread = None
