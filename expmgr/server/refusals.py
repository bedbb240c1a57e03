"""Refusals as HTTP answers: the engine says which kind (expmgr.engine.errors), this module
alone says which status (``STATUS_OF_KIND``), and every refused request, a REST route's
(rest.py) or a websocket upgrade's (live.py), is answered ``{"error": message}`` by
``send_refusal``::

    send_refusal(handler, RequestError(RefusalKind.TOO_MANY, "too many websockets"))  # 429
"""
from __future__ import annotations

import json

import tornado.web

from expmgr.engine.errors import Refusal, RefusalKind

STATUS_OF_KIND: dict[RefusalKind, int] = {
    RefusalKind.INVALID: 400,
    RefusalKind.FORBIDDEN: 403,
    RefusalKind.NOT_FOUND: 404,
    RefusalKind.CONFLICT: 409,
    RefusalKind.TOO_MANY: 429,
    RefusalKind.FAILED: 500,
    RefusalKind.UNAVAILABLE: 503,
}
"""The HTTP status of each kind of refusal: the one place the server picks statuses for them."""
READ_ONLY = ("this experiment is served read-only (it has ended, or expctl view serves it); it cannot be "
             "changed and takes no reports")
"""Why a write (a CONFLICT) is refused while no search runs: every route's, and a trial's report on either channel."""


class RequestError(Refusal):
    """A request the server refuses itself (a bad query argument, a read-only view, too
    many websockets); raised by a handler and answered as any Refusal."""


def send_refusal(handler: tornado.web.RequestHandler, refusal: Refusal) -> None:
    """Answer the request ``{"error": message}`` with the status of the refusal's kind."""
    handler.set_status(STATUS_OF_KIND[refusal.kind])
    handler.set_header("Content-Type", "application/json; charset=UTF-8")
    handler.finish(json.dumps({"error": str(refusal)}))
