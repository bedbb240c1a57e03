"""``expctl ui``'s server on its own event-loop thread: the experiments page of a whole
registry, ended experiments opened read-only in it (expmgr.server.shelf), behind the same
access token, guard and connection limit as an experiment's server::

    server = HomeServer(home, sockets, access)
    server.start()
    server.wait()      # until stop() from another thread (a signal's exception in the main thread)
    server.stop()
"""
from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path

from expmgr.experiment.interrupts import WakingEvent, wait_interruptibly
from expmgr.server.auth import Access
from expmgr.server.guard import ServerLimits
from expmgr.server.host import ServerHost
from expmgr.server.home import HomeSite
from expmgr.server.shelf import Shelf, make_home_app


class HomeServer:
    """The experiments page of the registry in ``home``, served on ``sockets``."""

    def __init__(self, home: Path, sockets: list[socket.socket], access: Access = Access(),
                 limits: ServerLimits | None = None, webui_dir: Path | None = None) -> None:
        self.home = home
        self.access = access
        self.limits = limits or ServerLimits.from_environment()
        self.port: int = sockets[0].getsockname()[1]
        self.webui_dir = webui_dir
        self.shelf: Shelf | None = None
        self._sockets = sockets
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._started = threading.Event()
        self._finished = WakingEvent()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name="expmgr-ui", daemon=True)
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
        site = HomeSite(self.home, self.access.url_prefix, shelf=True)
        host = ServerHost(self._sockets, self.limits)
        shelf = self.shelf = Shelf(site, self.access.token, self.limits, self.webui_dir)
        host.start(make_home_app(site, shelf, host.guard, self.webui_dir, token=self.access.token),
                   closing=shelf.close)
        self._stopped = asyncio.Event()
        self._started.set()
        try:
            await self._stopped.wait()
        finally:
            await host.stop()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the server stopped; False on timeout. In the main thread, signals'
        handlers run (and may raise) while it waits."""
        return wait_interruptibly(self._finished, timeout)

    def stop(self) -> None:
        """Stop serving and close every experiment opened; idempotent."""
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stopped.set)
            except RuntimeError:
                pass  # the loop closed in between
        if self._thread is not None:
            self._thread.join()
            self._thread = None
