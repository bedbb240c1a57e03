"""The trials' reports from a host to the manager's server: the port a trial reports to on its
host's loopback is served here, through the SSH connection (``HostConnection.serve_remote_port``),
and each connection to it is relayed to the server after two checks::

    port = await connection.serve_remote_port(ReportRelay("127.0.0.1", 8080))

Only a report passes: ``POST <prefix>/api/v1/expmgr/trials/<id>/metrics`` with no ``Origin`` (what
the trial API sends; the server checks its token, 403/409 and duplicates as for a local
trial). Its ``Host`` header names the host's port, which the server refuses (it answers only
to its own addresses): it is rewritten to the server's, and the connection is closed after the
answer. Anything else gets a 403 here. A host has at most ``MAX_OPEN`` connections relayed at
once (each holds an SSH channel and a connection to the server); more are answered 503 at once.
"""
from __future__ import annotations

import asyncio
import re
from typing import Any

MAX_HEAD = 16 * 1024
"""Bytes of a request's start line and headers, at most (the trial API's are a few hundred)."""
_REPORT_LINE = re.compile(rb"POST (/[!-~]*)?/api/v1/expmgr/trials/[A-Za-z0-9_-]{1,64}/metrics HTTP/1\.[01]")
_READ = 65536
HEAD_TIMEOUT = 30.0
"""Seconds a connection has to send its request head (the server's header timeout): a host's
connection that says nothing is not kept, with its SSH channel, for ever."""
MAX_OPEN = 64
"""Connections one host may have relayed at once: a trial sends one report at a time and
waits for its answer, so this is many times what a host's trials need."""


class ReportRelay:
    """One host's relay (a connection handler): ``relay_report`` for each connection, at most
    ``max_open`` at once."""

    def __init__(self, manager_host: str, manager_port: int, max_open: int = MAX_OPEN,
                 head_timeout: float = HEAD_TIMEOUT) -> None:
        self._manager = (manager_host, manager_port)
        self._max_open = max_open
        self._head_timeout = head_timeout
        self.open = 0

    async def __call__(self, reader: Any, writer: Any) -> None:
        if self.open >= self._max_open:
            writer.write(_answer(503, f"this host has {self.open} reports relayed already; the report "
                                      f"is kept in metrics.jsonl"))
            writer.close()
            return
        self.open += 1
        try:
            await relay_report(reader, writer, *self._manager, head_timeout=self._head_timeout)
        finally:
            self.open -= 1


async def relay_report(reader: Any, writer: Any, manager_host: str, manager_port: int,
                       head_timeout: float = HEAD_TIMEOUT) -> None:
    """Relay one connection from a host (``reader``, ``writer``: byte streams) to the server."""
    try:
        try:
            head, rest = await asyncio.wait_for(_read_head(reader), head_timeout)
        except asyncio.TimeoutError:
            writer.write(_answer(408, f"no request head within {head_timeout:g} s"))
            return
        refusal = _refusal(head)
        if refusal is not None:
            writer.write(_answer(403 if head else 400, refusal))
            return
        server_reader, server_writer = await asyncio.open_connection(manager_host, manager_port)
        try:
            server_writer.write(_with_host(head, manager_host, manager_port) + rest)
            await server_writer.drain()
            await asyncio.gather(_pipe(reader, server_writer), _pipe(server_reader, writer))
        finally:
            server_writer.close()
    except (ConnectionError, OSError, asyncio.IncompleteReadError) as error:
        writer.write(_answer(502, f"relaying the report failed: {error}; the report is kept in metrics.jsonl"))
    except Exception:  # a host's bad request must never reach the loop's exception handler
        writer.write(_answer(400, "malformed request"))
    finally:
        writer.close()


async def _read_head(reader: Any) -> tuple[bytes, bytes]:
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        if len(buffer) > MAX_HEAD:
            return b"", b""
        chunk = await reader.read(_READ)
        if not chunk:
            return b"", b""
        buffer += chunk
    head, rest = buffer.split(b"\r\n\r\n", 1)
    return head, rest


def _refusal(head: bytes) -> str | None:
    if not head:
        return "an HTTP request head was expected (at most 16 KiB)"
    lines = head.split(b"\r\n")
    if not _REPORT_LINE.fullmatch(lines[0]):
        return "only a trial's metric report is relayed to the manager from a host"
    if any(line.lower().startswith(b"origin:") for line in lines[1:]):
        return "requests from web pages are refused"
    return None


def _with_host(head: bytes, host: str, port: int) -> bytes:
    """The head for the server: its Host, and one request per connection (as the trial API sends)."""
    name = f"[{host}]" if ":" in host else host
    lines = [line for line in head.split(b"\r\n") if not line.lower().startswith((b"host:", b"connection:"))]
    lines[1:1] = [f"Host: {name}:{port}".encode(), b"Connection: close"]
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def _pipe(source: Any, sink: Any) -> None:
    while chunk := await source.read(_READ):
        sink.write(chunk)
        await sink.drain()
    try:
        sink.write_eof()
    except (OSError, RuntimeError, AttributeError):
        pass


def _answer(status: int, message: str) -> bytes:
    body = ('{"error": "%s"}' % message.replace("\\", "\\\\").replace('"', '\\"')).encode()
    return (f"HTTP/1.1 {status} Relay\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\n\r\n").encode() + body
