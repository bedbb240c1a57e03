"""Compressed answers: gzip for the clients that accept it (browsers, ``curl --compressed``).

The first load of a large experiment is the answer that counts (``changes``: about 21 MB of
JSON for 10,000 trials of 20 results, 4.5 MB gzipped). Tornado's transform compresses on the
event loop at level 6, which took 4 s of a loaded 2-core machine for that answer, holding every
websocket and tail meanwhile; so answers are compressed at level 1 (3.7 times faster, 13 %
larger), and the ``changes`` answer off the event loop::

    Application(routes, transforms=TRANSFORMS)               # every answer over 1 KiB, level 1
    leave_uncompressed(handler)                              # but this one (a live tail)
    body, encoding = await compress_off_loop(handler, text)  # a large answer, on a thread
"""
from __future__ import annotations

import asyncio
import gzip

import tornado.web

LEVEL = 1
"""zlib's fastest level: JSON of trials compresses 4.7 times at it (5.4 at level 6)."""


class FastGZipContentEncoding(tornado.web.GZipContentEncoding):
    """Tornado's gzip transform (``compress_response=True``) at level ``LEVEL``. It skips an
    answer that already has a Content-Encoding, so the ones compressed off the loop pass as they are."""

    GZIP_LEVEL = LEVEL


TRANSFORMS = [FastGZipContentEncoding]
"""The Application's ``transforms``: what ``compress_response=True`` installs, at LEVEL."""


def leave_uncompressed(handler: tornado.web.RequestHandler) -> None:
    """Answer this request as it is, whatever the client accepts (call from ``prepare``)."""
    handler._transforms = [t for t in handler._transforms if not isinstance(t, tornado.web.GZipContentEncoding)]


def accepts_gzip(handler: tornado.web.RequestHandler) -> bool:
    return "gzip" in handler.request.headers.get("Accept-Encoding", "")


async def compress_off_loop(handler: tornado.web.RequestHandler, text: str) -> bytes:
    """``text`` as the body of ``handler``'s answer: gzipped on a worker thread (with the
    headers that say so) when the client accepts it and it is large, else as UTF-8."""
    data = text.encode()
    if len(data) < FastGZipContentEncoding.MIN_LENGTH or not accepts_gzip(handler):
        return data
    handler.set_header("Content-Encoding", "gzip")  # Vary: the transform adds it to every answer
    return await asyncio.to_thread(gzip.compress, data, LEVEL)
