"""Serving the built web UI (``expmgr/webui/``, built from ``ts/webui/``): ``GET /`` is its
``index.html``, never cached (and, with an access token, given only to holders of it);
``GET /assets/<file>`` its hashed assets, cached for a year (open: they hold no data).
Without a build, ``/`` says so::

    app = tornado.web.Application(api_routes + ui_routes())
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import tornado.web

from expmgr.server import auth

WEBUI_DIR = Path(__file__).resolve().parents[1] / "webui"

NOT_BUILT = b"""<!doctype html>
<html><head><meta charset="utf-8"><title>expmgr</title></head>
<body><h1>The web UI was not built</h1>
<p>This expmgr has no <code>expmgr/webui/index.html</code>. Build it with
<code>npm ci &amp;&amp; npm run build</code> in <code>ts/webui/</code>, or install an expmgr release,
which ships it. The REST API works without it: <a href="api/v1/nni/experiment">api/v1/nni/experiment</a>.</p>
</body></html>
"""


class IndexHandler(tornado.web.RequestHandler):
    def initialize(self, webui_dir: Path) -> None:
        self.index = webui_dir / "index.html"

    def prepare(self) -> None:
        auth.check(self, page=True)  # a ?token= link sets the cookie the page's requests carry

    def get(self) -> None:
        try:
            page = self.index.read_bytes()  # read each time: a rebuilt UI shows at once
        except FileNotFoundError:
            page = NOT_BUILT
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        self.set_header("Cache-Control", "no-cache")
        self.finish(page)


class AssetHandler(tornado.web.StaticFileHandler):
    """Assets have content hashes in their names: a changed asset is a new name."""

    def get_cache_time(self, path: str, modified: Any, mime_type: str) -> int:
        return 365 * 24 * 3600

    def set_extra_headers(self, path: str) -> None:
        self.set_header("Cache-Control", "public, max-age=31536000, immutable")


def ui_routes(webui_dir: Path | None = None) -> list[tuple[str, type, dict[str, Any]]]:
    """The routes of the UI in ``webui_dir`` (default: WEBUI_DIR, the installed build)."""
    webui_dir = webui_dir or WEBUI_DIR
    return [(r"/", IndexHandler, {"webui_dir": webui_dir}),
            (r"/assets/(.*)", AssetHandler, {"path": str(webui_dir / "assets")})]
