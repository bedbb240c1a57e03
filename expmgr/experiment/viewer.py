"""Read-only serving of a finished experiment's store: the web UI and the REST routes,
nothing that writes (every write answers 409). Used by ``Experiment.view``::

    viewer = Viewer(paths, sockets)
    viewer.start()
    viewer.wait()      # until stop() from another thread (a signal's exception in the main thread)
    viewer.stop()
"""
from __future__ import annotations

import asyncio
import socket
import threading

from expmgr.experiment.interrupts import WakingEvent, wait_interruptibly
from expmgr.layout import ExperimentPaths
from expmgr.server.auth import Access
from expmgr.server.guard import ServerLimits
from expmgr.server.host import ExperimentHost
from expmgr.store import open_store


class Viewer:
    """A REST server over a read-only store, on its own event-loop thread."""

    def __init__(self, paths: ExperimentPaths, sockets: list[socket.socket], exp_id: str,
                 access: Access = Access(), limits: ServerLimits | None = None) -> None:
        self.paths = paths
        self.access = access
        self.limits = limits or ServerLimits.from_environment()
        self.port = sockets[0].getsockname()[1]
        self._sockets = sockets
        self._exp_id = exp_id
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._started = threading.Event()
        self._finished = WakingEvent()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name=f"view-{self._exp_id}", daemon=True)
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
        store = open_store(self.paths, readonly=True)
        host = ExperimentHost(store, self.paths, self._sockets, self.access, self.limits, read_only=True)
        host.start(None)
        self._stopped = asyncio.Event()
        self._started.set()
        try:
            await self._stopped.wait()
        finally:
            await host.stop()
            store.close()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the server stopped; False on timeout. In the main thread, signals'
        handlers run (and may raise) while it waits."""
        return wait_interruptibly(self._finished, timeout)

    def stop(self) -> None:
        """Stop serving and close the store; idempotent."""
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stopped.set)
            except RuntimeError:
                pass  # the loop closed in between
        if self._thread is not None:
            self._thread.join()
            self._thread = None
