"""Read-only serving of a finished experiment's store: the web UI and the REST routes,
nothing that writes (every write answers 409). Used by ``Experiment.view``::

    viewer = Viewer(paths, sockets, exp_id, access)
    viewer.start()
    viewer.wait()      # until stop() from another thread (a signal's exception in the main thread)
    viewer.stop()
"""
from __future__ import annotations

import socket
from typing import Awaitable, Callable

from expmgr.experiment.serving_thread import ServingThread
from expmgr.layout import ExperimentPaths
from expmgr.server.auth import Access
from expmgr.server.guard import ServerLimits
from expmgr.server.host import ExperimentHost
from expmgr.store import open_store


class Viewer(ServingThread):
    """A REST server over a read-only store, on its own event-loop thread."""

    def __init__(self, paths: ExperimentPaths, sockets: list[socket.socket], exp_id: str,
                 access: Access = Access(), limits: ServerLimits | None = None) -> None:
        super().__init__(thread_name=f"view-{exp_id}")
        self.paths = paths
        self.access = access
        self.limits = limits or ServerLimits.from_environment()
        self.port = sockets[0].getsockname()[1]
        self._sockets = sockets
        self._exp_id = exp_id

    async def _open(self) -> Callable[[], Awaitable[None]]:
        store = open_store(self.paths, readonly=True)
        host = ExperimentHost(store, self.paths, self._sockets, self.access, self.limits, read_only=True)
        host.start(None)

        async def close() -> None:
            await host.stop()
            store.close()
        return close
