"""``expctl ui``'s server on its own event-loop thread: the experiments page of a whole
registry, ended experiments opened read-only in it (expmgr.server.shelf), behind the same
access token, guard and connection limit as an experiment's server::

    server = HomeServer(home, sockets, access)
    server.start()
    server.wait()      # until stop() from another thread (a signal's exception in the main thread)
    server.stop()
"""
from __future__ import annotations

import socket
from pathlib import Path
from typing import Awaitable, Callable

from expmgr.experiment.serving_thread import ServingThread
from expmgr.server.auth import Access
from expmgr.server.guard import ServerLimits
from expmgr.server.host import ServerHost
from expmgr.server.home import HomeSite
from expmgr.server.shelf import Shelf, make_home_app


class HomeServer(ServingThread):
    """The experiments page of the registry in ``home``, served on ``sockets``; ``stop()``
    also closes every experiment opened."""

    def __init__(self, home: Path, sockets: list[socket.socket], access: Access = Access(),
                 limits: ServerLimits | None = None, webui_dir: Path | None = None) -> None:
        super().__init__(thread_name="expmgr-ui")
        self.home = home
        self.access = access
        self.limits = limits or ServerLimits.from_environment()
        self.port: int = sockets[0].getsockname()[1]
        self.webui_dir = webui_dir
        self.shelf: Shelf | None = None
        self._sockets = sockets

    async def _open(self) -> Callable[[], Awaitable[None]]:
        site = HomeSite(self.home, self.access.url_prefix, shelf=True)
        host = ServerHost(self._sockets, self.limits)
        shelf = self.shelf = Shelf(site, self.access.token, self.limits, self.webui_dir)
        host.start(make_home_app(site, shelf, host.guard, self.webui_dir, token=self.access.token),
                   closing=shelf.close)
        return host.stop
