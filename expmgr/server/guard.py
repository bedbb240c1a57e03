"""The checks every request to an experiment's server passes before a handler runs and
before its body is read (docs/security.md says why): the ``Host`` header names this
server (no DNS rebinding), an ``Origin`` header is this server's own, a state-changing
request (POST, PUT, DELETE, PATCH) is ``application/json`` (a DELETE without a body may send
no Content-Type, as NNI's client does), and the body fits its route's
limit. Refusals are ``{"error": ...}`` with 403, 415 or 413 (which closes the connection
without reading the body)::

    guard = Guard(allowed_hosts([s.getsockname()[:2] for s in sockets]), ServerLimits.from_environment())
    app = GuardedApplication(routes, guard)                 # routes: tornado's (path, handler, kwargs)
    server = tornado.httpserver.HTTPServer(app, **guard.server_settings())

A handler class picks its body limit by naming a field of ServerLimits in ``body_limit``
(default ``max_body``).
"""
from __future__ import annotations

import ipaddress
import json
import os
import socket
import sys
from dataclasses import dataclass, field, fields
from typing import Any, Mapping, cast
from urllib.parse import urlsplit

import psutil
import tornado.http1connection
import tornado.httputil
import tornado.ioloop
import tornado.web

from expmgr.server.budget import ByteBudget, Reservation
from expmgr.trial import MAX_REPORT_BYTES

KiB = 1024
MiB = 1024 * KiB
STATE_CHANGING = frozenset({"POST", "PUT", "DELETE", "PATCH"})
LINGER_BYTES = 64 * MiB
LINGER_SECONDS = 2.0
"""After a 413, the rest of the body is read and dropped (never kept) up to this much and this
long before the connection closes: a client that sends its whole body before it reads the
answer (urllib, http.client) then gets the 413 rather than a reset connection."""
ENV_LIMITS = {"max_body": "EXPMGR_MAX_BODY", "max_import_body": "EXPMGR_MAX_IMPORT_BODY",
              "max_imports_held": "EXPMGR_MAX_IMPORTS_HELD", "max_follow_backlog": "EXPMGR_MAX_FOLLOW_BACKLOG"}
"""The limits that can be set from the environment (in bytes) when an experiment's server starts."""
RETRY_AFTER_SECONDS = 5
"""Retry-After of an import refused because the imports held fill the total."""
HELD_BODY = "expmgr_held_body"
"""The attribute of a request whose body its handler holds (``body_held``): its Reservation."""


class LimitsError(ValueError):
    """A limit given in the environment is not a positive number of bytes."""


@dataclass(frozen=True)
class ServerLimits:
    """What one client may send to an experiment's server (defaults in docs/security.md)."""

    max_body: int = 1 * MiB
    """Body of a request to any route but the two below."""
    max_import_body: int = 16 * MiB
    """Body of ``POST /api/v1/nni/experiment/import-data``."""
    max_imports_held: int = 64 * MiB
    """Bytes of import bodies held at once, all clients together, from a request's headers
    until the tuner took its records; an import beyond it is refused (503, Retry-After)."""
    max_follow_backlog: int = 64 * MiB
    """Bytes sent to websocket clients and not yet written to their connections, all clients
    together, above which no followed file is read for any client."""
    max_report_body: int = MAX_REPORT_BYTES
    """Body of one trial report (``POST /api/v1/expmgr/trials/<id>/metrics``)."""
    max_socket_message: int = 64 * KiB
    """One message a websocket client sends; a larger one closes its connection (1009)."""
    max_follows: int = 16
    """Files one websocket connection may follow at a time."""
    max_sockets_per_address: int = 256
    """Websocket connections from one client at a time; every loopback address is one client
    (see peer_of)."""
    header_timeout: int = 30
    """Seconds a connection may take to send a request's start line and headers, counted from
    the connection's start or the end of its previous answer: idle and slow-header
    (slowloris) connections are closed after it."""
    body_timeout: int = 120
    """Seconds a request's body may take to arrive once its headers did."""
    max_header_size: int = 64 * KiB
    """A request's start line and headers; more closes the connection."""

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise LimitsError(f"{item.name}: expected a positive integer, got {value!r}")

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> ServerLimits:
        """The defaults, with each of ENV_LIMITS' variables (bytes) that is set."""
        values: dict[str, int] = {}
        for name, variable in ENV_LIMITS.items():
            raw = environ.get(variable, "").strip()
            if not raw:
                continue
            if not raw.isdigit() or int(raw) < 1:
                raise LimitsError(f"{variable}: expected a positive number of bytes, got {raw!r}")
            values[name] = int(raw)
        return cls(**values)


def _host_port(host: str, port: int) -> str:
    """``host:port`` as a Host header names it (IPv6 in brackets, lower case, no zone)."""
    host = host.split("%", 1)[0].lower().rstrip(".")
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _is_wildcard(address: str) -> bool:
    return address in ("", "0.0.0.0", "::")


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
    except ValueError:
        return address.lower() == "localhost"


def allowed_hosts(bound_addresses: list[tuple[str, int]]) -> set[str]:
    """The ``host:port`` values a request's Host header (and an Origin) may name, for a server
    bound to ``bound_addresses`` (``socket.getsockname()[:2]`` of each listening socket):
    on loopback ``localhost``, ``127.0.0.1`` and ``[::1]``; on a wildcard address also this
    machine's host name, its FQDN and the address of each interface; on another address that
    address and the host name and FQDN."""
    hosts: set[str] = set()
    for address, port in bound_addresses:
        names = {address}
        if _is_wildcard(address) or _is_loopback(address):
            names |= {"localhost", "127.0.0.1", "::1"}
        if _is_wildcard(address) or not _is_loopback(address):
            names |= {socket.gethostname(), socket.getfqdn()}
        if _is_wildcard(address):
            names |= {item.address for items in psutil.net_if_addrs().values() for item in items
                      if item.family in (socket.AF_INET, socket.AF_INET6)}
        hosts |= {_host_port(name, port) for name in names if name and not _is_wildcard(name)}
    return hosts


def _normal_host(value: str, default_port: int) -> str | None:
    """``host:port`` of a Host header or an origin's netloc, or None when it is not one."""
    try:
        parts = urlsplit("//" + value)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host or parts.username is not None or parts.path or parts.query:
        return None
    return _host_port(host, default_port if port is None else port)


@dataclass(frozen=True)
class Guard:
    """The request checks of one server: the ``hosts`` it answers to (see allowed_hosts) and its limits."""

    hosts: frozenset[str] | set[str]
    limits: ServerLimits = field(default_factory=ServerLimits)
    imports_held: ByteBudget = field(init=False)
    """The bodies of imports held (limits.max_imports_held), reserved before they are read."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "imports_held", ByteBudget(self.limits.max_imports_held))

    def host_allowed(self, host: str | None) -> bool:
        return host is not None and _normal_host(host.strip(), 80) in self.hosts

    def origin_allowed(self, origin: str) -> bool:
        """An Origin header (``scheme://host[:port]``) naming this server."""
        try:
            parts = urlsplit(origin.strip())
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or parts.path not in ("", "/"):
            return False
        return _normal_host(parts.netloc, 443 if parts.scheme == "https" else 80) in self.hosts

    def refusal(self, request: tornado.httputil.HTTPServerRequest, body_limit: str) -> tuple[int, str] | None:
        """(status, message) when ``request``, by its start line and headers, is refused."""
        headers = request.headers
        host = headers.get("Host")
        if not self.host_allowed(host):
            return 403, (f"Host: {host!r} is not an address of this server (allowed: {', '.join(sorted(self.hosts))}); "
                         "use the URL the experiment printed")
        origin = headers.get("Origin")
        if origin is not None and not self.origin_allowed(origin):
            return 403, f"Origin: {origin!r} is not this server; requests from other sites are refused"
        if request.method in STATE_CHANGING and not _bare_delete(request.method, headers):
            content_type = headers.get("Content-Type", "")
            if content_type.split(";", 1)[0].strip().lower() != "application/json":
                return 415, (f"Content-Type: {request.method} requests must send application/json, "
                             f"got {content_type or 'none'!r}")
        limit = getattr(self.limits, body_limit)
        length = headers.get("Content-Length")
        if length is not None:
            if not length.strip().isdigit():
                return 400, f"Content-Length: expected a number of bytes, got {length!r}"
            if int(length) > limit:
                return 413, self.too_large(int(length), body_limit)
        return None

    def too_large(self, size: int, body_limit: str) -> str:
        limit = getattr(self.limits, body_limit)
        variable = ENV_LIMITS.get(body_limit)
        how = f"; set {variable} (bytes) before starting the experiment to change it" if variable else ""
        return f"body: {size} bytes or more, more than the {limit} bytes this route accepts{how}"

    def reserve_held(self, request: tornado.httputil.HTTPServerRequest, body_limit: str) -> Reservation | None:
        """Reserve the body of an import (its Content-Length, else its route's limit) in
        ``imports_held``; None when the total would be exceeded."""
        length = request.headers.get("Content-Length")
        return self.imports_held.reserve(int(length) if length is not None else getattr(self.limits, body_limit))

    def held_refusal(self) -> str:
        return (f"body: the server already holds {self.imports_held.held} bytes of imports until the tuner "
                f"takes them, and holds at most {self.imports_held.total} (EXPMGR_MAX_IMPORTS_HELD); retry "
                "once they are taken")

    def server_settings(self) -> dict[str, Any]:
        """HTTPServer arguments: an outer bound on any body and buffer, above every route's limit."""
        largest = max(self.limits.max_body, self.limits.max_import_body, self.limits.max_report_body)
        return {"max_body_size": largest, "max_buffer_size": largest + MiB,
                "idle_connection_timeout": float(self.limits.header_timeout),
                "body_timeout": float(self.limits.body_timeout),
                "max_header_size": self.limits.max_header_size}


def peer_of(address: str | None) -> str | None:
    """The client a connection's address counts for: every loopback address (127.0.0.0/8,
    ::1, ::ffff:127.x.y.z) is one client, ``loopback``, since any local user can pick among
    them; another address is itself."""
    if address is None:
        return None
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return "loopback" if ip.is_loopback else str(ip)


def _bare_delete(method: str | None, headers: tornado.httputil.HTTPHeaders) -> bool:
    """A DELETE without a body or a Content-Type, as NNI's client sends it (``stop()``,
    ``kill_trial_job``). It needs no JSON check: DELETE is never a CORS "simple" request, so
    a browser sends it cross-site only after a preflight, which the server never grants."""
    return (method == "DELETE" and "Content-Type" not in headers and "Transfer-Encoding" not in headers
            and headers.get("Content-Length", "0").strip() == "0")


class _GuardedDelegate(tornado.httputil.HTTPMessageDelegate):
    """Runs the guard on a request's headers, and counts its body, before the route's delegate sees them."""

    def __init__(self, inner: tornado.httputil.HTTPMessageDelegate, request: tornado.httputil.HTTPServerRequest,
                 guard: Guard, body_limit: str, body_held: bool = False) -> None:
        self.inner = inner
        self.body_held = body_held
        """The handler holds the body after the request (an import): it is reserved in guard.imports_held."""
        self.reservation: Reservation | None = None
        self.request = request
        self.guard = guard
        self.body_limit = body_limit
        self.received = 0
        self.passed = False
        """The headers were handed to the route's delegate."""
        self.refusal: tuple[int, str, dict[str, str]] | None = None
        """Why the request is refused, answered once its body (within the limit) was read."""
        self.answered = False
        self.lingering: tornado.ioloop.IOLoop | None = None
        """Answered 413: the rest of the body is dropped until LINGER_BYTES or LINGER_SECONDS."""
        self.linger_timer: object | None = None

    def headers_received(self, start_line: Any, headers: tornado.httputil.HTTPHeaders) -> Any:
        refusal = self.guard.refusal(self.request, self.body_limit)
        if refusal is None and self.body_held:
            self.reservation = self.guard.reserve_held(self.request, self.body_limit)
            if self.reservation is None:
                self.refusal = (503, self.guard.held_refusal(), {"Retry-After": str(RETRY_AFTER_SECONDS)})
                return None
            setattr(self.request, HELD_BODY, self.reservation)
        if refusal is None:
            self.passed = True
            return self.inner.headers_received(start_line, headers)
        if refusal[0] == 413:
            self._answer_too_large(refusal[1])
        else:
            # A body within the limit is read (and dropped) first: closing on a client still
            # sending would reset the connection before it reads why it was refused.
            self.refusal = (*refusal, {})
        return None

    def data_received(self, chunk: bytes) -> Any:
        self.received += len(chunk)
        if self.lingering is not None:
            if self.received > LINGER_BYTES:
                self._end_lingering()
            return None
        if self.answered:
            return None
        if self.received > getattr(self.guard.limits, self.body_limit):  # a chunked body, without Content-Length
            if self.passed:
                self.inner.on_connection_close()  # what it was given is dropped
                self.passed = False
            self._answer_too_large(self.guard.too_large(self.received, self.body_limit))
            return None
        return self.inner.data_received(chunk) if self.refusal is None else None

    def finish(self) -> None:
        if self.lingering is not None:
            self._end_lingering()
        elif self.refusal is not None and not self.answered:
            self._answer(*self.refusal)
            self._connection().finish()
        elif not self.answered:
            self.inner.finish()
            # Tornado's delegate keeps the body's pieces besides the body it joined from them
            # while the handler runs: a second copy of every import, dropped here.
            pieces = getattr(self.inner, "chunks", None)
            if isinstance(pieces, list):
                pieces.clear()

    def on_connection_close(self) -> None:
        if self.reservation is not None:
            self.reservation.release()  # the body is dropped (unless its handler handed it on)
        if self.lingering is not None and self.linger_timer is not None:
            self.lingering.remove_timeout(self.linger_timer)
        if self.passed:
            self.inner.on_connection_close()

    def _connection(self) -> tornado.http1connection.HTTP1Connection:
        # The server's requests come on HTTP/1 connections; tornado types the attribute
        # as the optional interface.
        return cast(tornado.http1connection.HTTP1Connection, self.request.connection)

    def _answer(self, status: int, message: str, extra_headers: Mapping[str, str] | None = None,
                close: bool = False) -> None:
        self.answered = True
        body = json.dumps({"error": message}).encode()
        headers = tornado.httputil.HTTPHeaders({"Content-Type": "application/json; charset=UTF-8",
                                                "Content-Length": str(len(body)), **(extra_headers or {})})
        if close:
            headers["Connection"] = "close"
        self._connection().write_headers(tornado.httputil.ResponseStartLine(
            "HTTP/1.1", status, tornado.httputil.responses.get(status, "Refused")), headers, body)

    def _answer_too_large(self, message: str) -> None:
        """Answer 413 at once; then drop what comes of the body for a while (LINGER_BYTES) and close."""
        if self.reservation is not None:
            self.reservation.release()
        self._answer(413, message, close=True)
        # The body is dropped as it comes (not kept), beyond tornado's own limit, which
        # would add a bare 400 after our answer.
        self._connection().set_max_body_size(sys.maxsize)
        self.lingering = tornado.ioloop.IOLoop.current()
        self.linger_timer = self.lingering.call_later(LINGER_SECONDS, self._end_lingering)

    def _end_lingering(self) -> None:
        if self.linger_timer is not None:
            assert self.lingering is not None  # set with the timer
            self.lingering.remove_timeout(self.linger_timer)
            self.linger_timer = None
            self._connection().finish()  # the body is not read to its end: this closes the connection


class GuardedApplication(tornado.web.Application):
    """A tornado Application whose every request (any route, the UI, the websocket's upgrade,
    an unknown path) passes ``guard`` first."""

    def __init__(self, handlers: list[Any], guard: Guard, **settings: Any) -> None:
        super().__init__(handlers, websocket_max_message_size=guard.limits.max_socket_message, **settings)
        self.guard = guard

    def find_handler(self, request: tornado.httputil.HTTPServerRequest, **kwargs: Any) -> Any:
        delegate = super().find_handler(request, **kwargs)
        handler_class = getattr(delegate, "handler_class", None)
        return _GuardedDelegate(delegate, request, self.guard, getattr(handler_class, "body_limit", "max_body"),
                                getattr(handler_class, "body_held", False))
