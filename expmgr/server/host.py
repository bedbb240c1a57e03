"""Serving a tornado app on listening sockets, started and stopped as one: the guard in
front of every route, the HTTP server, the listener that caps connections, and what must
close with them (an experiment's live hub and report socket, ``expctl ui``'s shelf). The
manager, the viewer and ``expctl ui``'s home server each run one on their loop::

    host = ExperimentHost(store, paths, sockets, access, limits, read_only=False)
    runner = TrialRunner(..., on_store_unwritable=host.hub.tell_store_unwritable)
    # (its local trials are told host.report_socket)
    host.start(runner)        # on the loop: the hub follows the store, the sockets accept
    ...
    await host.stop()         # idempotent: stop accepting, close the hub, drop connections
"""
from __future__ import annotations

import socket
from pathlib import Path
from typing import Awaitable, Callable

import tornado.httpserver
import tornado.web

from expmgr.engine.serving import ServedSearch
from expmgr.layout import ExperimentPaths
from expmgr.server.auth import Access
from expmgr.server.connections import Listener, connection_cap, raise_open_files_limit
from expmgr.server.guard import Guard, ServerLimits, allowed_hosts
from expmgr.server.live import LiveHub
from expmgr.server.report_socket import ReportSocket
from expmgr.server.rest import make_app, served_search
from expmgr.store import Store


class ServerHost:
    """An app served on ``sockets`` behind a guard built for them and ``limits``."""

    def __init__(self, sockets: list[socket.socket], limits: ServerLimits) -> None:
        self.guard = Guard(allowed_hosts([s.getsockname()[:2] for s in sockets]), limits)
        self._sockets = sockets
        self._server: tornado.httpserver.HTTPServer | None = None
        self._listener: Listener | None = None
        self._closing: Callable[[], Awaitable[object]] | None = None

    def start(self, app: tornado.web.Application, closing: Callable[[], Awaitable[object]] | None = None) -> None:
        """Accept connections for ``app`` (call on the loop that serves it); ``closing`` is
        awaited by ``stop()`` after the sockets stopped accepting and before the open
        connections are dropped (a hub pushes its last changes to its websockets then)."""
        self._server = tornado.httpserver.HTTPServer(app, **self.guard.server_settings())
        listener = Listener(self._server, self._sockets, connection_cap(raise_open_files_limit()))
        listener.start()
        self._listener, self._closing = listener, closing

    async def stop(self) -> None:
        """Stop accepting, await ``closing``, drop the open connections; idempotent."""
        listener, self._listener = self._listener, None
        if listener is None:
            return
        listener.stop()
        if self._closing is not None:
            await self._closing()
        assert self._server is not None
        await self._server.close_all_connections()


class ExperimentHost:
    """One experiment's server: the REST app and its live hub over ``store``, writable
    (the manager's, given the runner) or read-only (the viewer's, ``runner`` None)."""

    def __init__(self, store: Store, paths: ExperimentPaths, sockets: list[socket.socket], access: Access,
                 limits: ServerLimits, *, read_only: bool) -> None:
        self.hub = LiveHub(store, paths, read_only=read_only, limits=limits)
        """Built first: the runner is told where to report an unwritable store."""
        self.app: tornado.web.Application | None = None
        self._store = store
        self._paths = paths
        self._access = access
        self._host = ServerHost(sockets, limits)
        self._reports = None if read_only else ReportSocket(paths.report_socket, self._host.guard)

    @property
    def report_socket(self) -> Path | None:
        """Where local trials send their reports once it started (EXPMGR_MANAGER_SOCKET);
        None when they use HTTP alone (read-only, or a path too long for a Unix socket)."""
        return None if self._reports is None else self._reports.path

    def start(self, runner: ServedSearch | None) -> tornado.web.Application:
        """Follow the store and accept connections (on the loop that serves them); the app."""
        self.hub.start()
        app = self.app = make_app(self._store, self._paths, runner, self.hub, self._host.guard,
                                  token=self._access.token, url_prefix=self._access.url_prefix)
        self._host.start(app, closing=self.hub.stop)
        if self._reports is not None:  # reports go to the search the routes serve, read per report
            self._reports.start(lambda: served_search(app))
        return app

    async def stop(self) -> None:
        """Stop accepting (the report socket removed), push the hub's last changes and close
        it, drop the connections; idempotent."""
        if self._reports is not None:
            await self._reports.stop()
        await self._host.stop()
