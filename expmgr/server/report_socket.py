"""The trial channel of local trials over a Unix socket, ``<experiment>/reports.sock``: the
same reports, tokens and answers as the HTTP route (trial_reports.take_report answers both),
without HTTP's parsing, guard and handler on the manager's loop. One report per connection::

    -> b"<trial id> <token> <length>\\n" + <length> bytes: the report (its metrics.jsonl line)
    <- b"<status> <JSON>\\n"            b'200 {"ok": true}\\n', b'403 {"error": "no running trial ..."}\\n'

The local training service tells its trials the path (EXPMGR_MANAGER_SOCKET); a trial that
cannot reach it sends over HTTP (expmgr/trial.py). Every byte is a client's: a header that is
not one line of at most HEADER_MAX bytes with three fields is a 400, a length over the report
route's limit a 413 (answered before the body is read, which is then dropped as it comes
for a while, as the HTTP guard does), a connection still open after
CONNECTION_TIMEOUT seconds is closed whatever it sent, and at most MAX_CONNECTIONS are open at
once (connections.Listener closes the next ones unread). The socket is 0600 in the experiment's
0700 folder: only its owner (and root) can connect, and each report still needs its trial's
token. ExperimentHost (host.py) starts and stops it with the HTTP server::

    reports = ReportSocket(paths.report_socket, guard)
    reports.path                    # what trials are told; None when the path is too long for AF_UNIX
    reports.start(search)           # on the loop; search() is the runner now (None: read-only)
    ...
    await reports.stop()            # idempotent: closes it and its connections, removes the file
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import stat
from pathlib import Path
from typing import Any, Callable

import tornado.iostream
import tornado.tcpserver

from expmgr.engine.serving import ServedSearch
from expmgr.layout import PRIVATE_FILE_MODE
from expmgr.server.connections import Listener
from expmgr.server.guard import LINGER_BYTES, LINGER_SECONDS, Guard
from expmgr.server.trial_reports import take_report

HEADER_MAX = 256
"""The longest header line, its newline included."""
CONNECTION_TIMEOUT = 30.0
"""Seconds a connection may take from its accept to its answer."""
MAX_CONNECTIONS = 256
"""Connections open at once; the next ones are closed as soon as they are accepted."""
MAX_PATH_BYTES = 107
"""The longest path a Unix socket can be bound to (sun_path's 108 bytes, less its NUL)."""

_log = logging.getLogger("nni.manager")


class HeaderError(ValueError):
    """A header that is not ``<trial id> <token> <length>``; the message says what is wrong."""


def parse_header(line: bytes) -> tuple[str, str, int]:
    """(trial id, token, body length) of a header line (without its newline); HeaderError
    when it is not three ASCII fields separated by single spaces, the last one a number."""
    fields = line.split(b" ")
    if len(fields) != 3:
        raise HeaderError(f"header: expected '<trial id> <token> <length>', got {len(fields)} field(s)")
    trial_id, token, length = fields
    if not trial_id or not trial_id.isascii() or not token.isascii():
        raise HeaderError("header: the trial id and the token are ASCII text, the trial id not empty")
    if not length.isdigit() or len(length) > 19:  # bytes.isdigit: ASCII digits alone
        raise HeaderError("header: the length is a number of bytes (at most 19 digits)")
    return trial_id.decode(), token.decode(), int(length)


class _Connections(tornado.tcpserver.TCPServer):
    """What the Listener hands each accepted connection to: one exchange task each."""

    def __init__(self, exchange: Callable[[tornado.iostream.IOStream], Any], max_buffer_size: int) -> None:
        super().__init__(max_buffer_size=max_buffer_size, read_chunk_size=max_buffer_size)
        self._exchange = exchange

    def handle_stream(self, stream: tornado.iostream.IOStream, address: Any) -> None:
        self._exchange(stream)


class ReportSocket:
    """The report socket of one experiment's server; see the module docstring."""

    def __init__(self, path: Path, guard: Guard) -> None:
        too_long = len(os.fsencode(path)) > MAX_PATH_BYTES
        self.path: Path | None = None if too_long else path
        """Where trials are told to send their reports; None: over HTTP alone (the path is too long)."""
        self._wanted = path
        self._guard = guard
        self._limit = guard.limits.max_report_body
        self._search: Callable[[], ServedSearch | None] = lambda: None
        self._listener: Listener | None = None
        self._bound: tuple[int, int] | None = None
        """(device, inode) of the socket file made, so that stop() removes only that one."""
        self._exchanges: dict[asyncio.Task, tornado.iostream.IOStream] = {}

    def start(self, search: Callable[[], ServedSearch | None]) -> None:
        """Accept reports for ``search()`` (the runner at the time of each report), on the
        current loop. A stale socket file (a crashed run's) is replaced; when the socket
        cannot be made, one line says so and trials send over HTTP."""
        if self.path is None:
            _log.info("no report socket: %s is longer than the %d bytes of a Unix socket's path; trials send "
                      "their reports over HTTP", self._wanted, MAX_PATH_BYTES)
            return
        self._search = search
        try:
            sock = _listening_socket(self.path)
            info = os.lstat(self.path)
        except OSError as error:
            _log.warning("no report socket at %s (%s); trials send their reports over HTTP", self.path,
                         error.strerror or error)
            return
        self._bound = (info.st_dev, info.st_ino)
        # Room for the header and the largest body, so a read never fails for its size.
        connections = _Connections(self._exchange, max_buffer_size=HEADER_MAX + self._limit + 64 * 1024)
        self._listener = Listener(connections, [sock], MAX_CONNECTIONS)
        self._listener.start()

    async def stop(self) -> None:
        """Accept no more, close the open connections (their trials send over HTTP) and
        remove the socket file; idempotent."""
        listener, self._listener = self._listener, None
        if listener is None:
            return
        listener.stop()
        for stream in list(self._exchanges.values()):
            stream.close()
        await asyncio.gather(*self._exchanges, return_exceptions=True)
        assert self.path is not None and self._bound is not None
        try:
            info = os.lstat(self.path)
            if (info.st_dev, info.st_ino) == self._bound:
                os.unlink(self.path)
        except FileNotFoundError:
            pass

    def _exchange(self, stream: tornado.iostream.IOStream) -> None:
        task = asyncio.ensure_future(self._answer(stream))
        self._exchanges[task] = stream
        task.add_done_callback(self._exchanges.pop)

    async def _answer(self, stream: tornado.iostream.IOStream) -> None:
        """Read one report from ``stream``, answer it and close; nothing a client sends
        (or does not send) raises out of here."""
        timer = asyncio.get_running_loop().call_later(CONNECTION_TIMEOUT, stream.close)
        try:
            status, answer, whole = await self._take(stream)
            await stream.write(b"%d %s\n" % (status, json.dumps(answer).encode()))
            if not whole:
                await _linger(stream)
        except tornado.iostream.StreamClosedError:
            pass  # the client left, its time ran out, or the server stops
        except Exception:  # a bug of ours: that report's problem, never the experiment's
            _log.exception("the report socket failed on a report")
        finally:
            timer.cancel()
            stream.close()

    async def _take(self, stream: tornado.iostream.IOStream) -> tuple[int, dict[str, Any], bool]:
        """(status, answer, whether the request was read whole) of the request on ``stream``."""
        received = b""
        while (end := received.find(b"\n")) < 0:
            if len(received) >= HEADER_MAX:
                return 400, {"error": f"header: no newline in its first {HEADER_MAX} bytes"}, False
            received += await stream.read_bytes(HEADER_MAX - len(received), partial=True)
        try:
            trial_id, token, length = parse_header(received[:end])
        except HeaderError as error:
            return 400, {"error": str(error)}, False
        if length > self._limit:
            return 413, {"error": self._guard.too_large(length, "max_report_body")}, False
        body = received[end + 1:]
        if len(body) > length:
            return 400, {"error": f"body: more than the {length} bytes the header says"}, False
        if len(body) < length:
            body += await stream.read_bytes(length - len(body))
        return (*take_report(self._search(), trial_id, token, body), True)


async def _linger(stream: tornado.iostream.IOStream) -> None:
    """After an answer given before the request was read whole: the end of the answer (EOF)
    sent, what the client still sends is dropped (never kept), at most LINGER_BYTES for
    LINGER_SECONDS, as the HTTP guard does after a 413; so a client that sends its whole
    report before it reads reads the answer, not a reset connection."""
    try:
        stream.socket.shutdown(socket.SHUT_WR)
    except OSError:  # the client is gone already
        return
    timer = asyncio.get_running_loop().call_later(LINGER_SECONDS, stream.close)
    try:
        dropped = 0
        while dropped < LINGER_BYTES:
            dropped += len(await stream.read_bytes(64 * 1024, partial=True))
    finally:
        timer.cancel()


def _listening_socket(path: Path) -> socket.socket:
    """A Unix socket listening at ``path``, mode 0600 before it listens; a socket file left
    there (by a run that died) is replaced, anything else there is an error."""
    try:
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            raise FileExistsError(f"{path} exists and is not a socket")
        os.unlink(path)
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(os.fspath(path))
        try:
            os.chmod(path, PRIVATE_FILE_MODE)  # no one connects before listen()
            sock.listen(socket.SOMAXCONN)
        except BaseException:
            os.unlink(path)
            raise
    except BaseException:
        sock.close()
        raise
    return sock
