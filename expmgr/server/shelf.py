"""``expctl ui``'s server: the experiments page for a whole registry (home.py), and each
ended experiment opened read-only under ``<prefix>/experiments/<id>/``, its app (the web
UI and REST routes over its store, as ``expctl view`` serves it) made when first asked
for; at most ``MAX_OPEN`` are open at once (the least recently used is closed)::

    shelf = Shelf(site, guard, token, limits)
    app = make_home_app(site, shelf, guard, token)          # on the server's event loop
    ...
    await shelf.close()
"""
from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tornado.httputil
import tornado.routing
import tornado.web

from expmgr.server import lifecycle
from expmgr.engine.errors import RefusalKind
from expmgr.layout import ExperimentPaths
from expmgr.server import auth
from expmgr.server.guard import Guard, GuardedApplication, ServerLimits
from expmgr.server.home import SHELF_PATH, ExperimentRecords, HomeSite, check_experiment_id, home_routes
from expmgr.server.live import LiveHub
from expmgr.server.refusals import RequestError, send_refusal
from expmgr.server.rest import make_app
from expmgr.server.static import IndexHandler, ui_routes
from expmgr.store import Store, StoreError, open_store
from expmgr.store.registry import Registry, RegistryError

MAX_OPEN = 8
"""Ended experiments served read-only at once; opening another closes the least recently used."""
HOME_MODE_META = b'<meta name="expmgr-mode" content="home" />'
"""Tells the page it is the experiments page of ``expctl ui`` (no single experiment)."""

_log = logging.getLogger("expmgr.ui")


@dataclass
class _Opened:
    app: tornado.web.Application
    store: Store
    hub: LiveHub


class Shelf(tornado.routing.Router):
    """Routes ``<prefix>/experiments/<id>/...`` to that experiment's read-only app, made
    on first use; a running experiment is sent to its own server instead."""

    def __init__(self, site: HomeSite, token: str | None, limits: ServerLimits, webui_dir: Path | None = None,
                 max_open: int = MAX_OPEN) -> None:
        self.site = site
        self.token = token
        self.limits = limits
        self.webui_dir = webui_dir
        self.max_open = max_open
        self.guard: Guard | None = None
        self.home_app: tornado.web.Application | None = None
        """The app that routes here (make_home_app sets both): its guard and delegates serve every request."""
        self._opened: OrderedDict[str, _Opened] = OrderedDict()
        self._closing: set[asyncio.Task] = set()
        self._path = re.compile(re.escape(site.url_prefix + SHELF_PATH) + r"/([^/]*)(/.*)?$")

    @property
    def open_ids(self) -> list[str]:
        """The experiments served now, least recently used first."""
        return list(self._opened)

    def find_handler(self, request: tornado.httputil.HTTPServerRequest, **kwargs: Any) -> Any:
        match = self._path.match(request.path)
        if match is None:
            return None
        exp_id, rest = match.group(1), match.group(2)
        try:
            check_experiment_id(exp_id)
            entry = Registry(self.site.home).get(exp_id)
        except RequestError as error:
            return self._refusal(request, error)
        except RegistryError as error:
            return self._refusal(request, RequestError(RefusalKind.UNAVAILABLE, str(error)))
        if entry is None:
            self._close(exp_id)
            return self._refusal(request, RequestError(RefusalKind.NOT_FOUND, f"id: no experiment {exp_id!r} in "
                                                                               f"{Registry(self.site.home).path}"))
        if lifecycle.is_serving(entry):  # resumed meanwhile: its own server shows it live
            self._close(exp_id)
            return self._redirect(request, self.site.open_link(exp_id, live=True) or "/")
        if rest is None:
            return self._redirect(request, f"{request.path}/")
        opened = self._opened.get(exp_id)
        if opened is None:
            try:
                opened = self._open(exp_id, Path(entry.dir))
            except StoreError as error:
                return self._refusal(request, RequestError(RefusalKind.UNAVAILABLE, str(error)))
        self._opened.move_to_end(exp_id)
        return tornado.web.Application.find_handler(opened.app, request)  # the home app's guard wraps it

    def _open(self, exp_id: str, folder: Path) -> _Opened:
        paths = ExperimentPaths(folder)
        store = open_store(paths, readonly=True)
        hub = LiveHub(store, paths, read_only=True, limits=self.limits)
        hub.start()
        assert self.guard is not None, "make_home_app sets the guard"
        app = make_app(store, paths, None, hub, self.guard, self.webui_dir, token=self.token,
                       url_prefix=f"{self.site.url_prefix}{SHELF_PATH}/{exp_id}", home_site=self.site)
        opened = self._opened[exp_id] = _Opened(app, store, hub)
        while len(self._opened) > self.max_open:
            self._close(next(iter(self._opened)))
        return opened

    def _close(self, exp_id: str) -> None:
        opened = self._opened.pop(exp_id, None)
        if opened is not None:
            task = asyncio.get_running_loop().create_task(_close_opened(opened))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        """Close every open experiment (its live connections, its store); idempotent."""
        for exp_id in list(self._opened):
            self._close(exp_id)
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    def _refusal(self, request: tornado.httputil.HTTPServerRequest, error: RequestError) -> Any:
        assert self.home_app is not None, "make_home_app sets the app"
        return self.home_app.get_handler_delegate(request, _RefusalHandler, {"error": error})

    def _redirect(self, request: tornado.httputil.HTTPServerRequest, url: str) -> Any:
        assert self.home_app is not None, "make_home_app sets the app"
        return self.home_app.get_handler_delegate(request, _RedirectHandler, {"url": url, "permanent": False})


async def _close_opened(opened: _Opened) -> None:
    try:
        await opened.hub.stop()
    finally:
        opened.store.close()


class _RefusalHandler(tornado.web.RequestHandler):
    def initialize(self, error: RequestError) -> None:
        self.error = error

    def prepare(self) -> None:
        auth.check(self)
        send_refusal(self, self.error)


class _RedirectHandler(tornado.web.RedirectHandler):
    """A redirect for clients let in only: whether an experiment exists is not said to others."""

    def prepare(self) -> None:
        auth.check(self)


class HomeIndexHandler(IndexHandler):
    """The web UI's page, told it is the experiments page of ``expctl ui``."""

    def finish(self, chunk: Any = None) -> Any:
        if isinstance(chunk, bytes) and b"<head>" in chunk:
            chunk = chunk.replace(b"<head>", b"<head>" + HOME_MODE_META, 1)
        return super().finish(chunk)


def make_home_app(site: HomeSite, shelf: Shelf, guard: Guard, webui_dir: Path | None = None, *,
                  token: str | None = None) -> tornado.web.Application:
    """The experiments page of ``site``'s registry, its REST routes and ``shelf``, each behind
    ``guard``, under ``site.url_prefix``; with a ``token``, every request must carry it."""
    shelf.guard = guard
    prefix = site.url_prefix
    ui = [(path, HomeIndexHandler if path == "/" else handler, kwargs) for path, handler, kwargs in ui_routes(webui_dir)]
    served = home_routes(site, ExperimentRecords()) + ui
    redirect = [(re.escape(prefix), tornado.web.RedirectHandler, {"url": f"{prefix}/"})] if prefix else []
    rules = ([(re.escape(prefix) + path, *rest) for path, *rest in served] + redirect
             + [(tornado.routing.PathMatches(re.escape(prefix + SHELF_PATH) + r"/.*"), shelf)])
    app = GuardedApplication(rules, guard, websocket_ping_interval=20, **auth.settings(token, prefix))
    shelf.home_app = app
    return app
