"""The connections an experiment's server takes (its HTTP server's, and its report socket's,
report_socket.py). It accepts on its listening sockets itself
(not through tornado's accept loop) so that it caps how many connections are open at once,
leaving file descriptors for the trials and the store, and so that running out of
descriptors (EMFILE) pauses accepting instead of spinning and logging an error per
connection. docs/security.md gives the numbers::

    raise_open_files_limit()                    # once, at start: soft RLIMIT_NOFILE up to the hard one
    server = tornado.httpserver.HTTPServer(app, **guard.server_settings())
    listener = Listener(server, sockets, connection_cap())
    listener.start()                            # on the server's event loop
    ...
    listener.stop()                             # idempotent: no more accepts, the sockets closed

Over the cap, a new connection is closed as soon as it is accepted, before anything is
read from it; refusals are logged at most once per LOG_INTERVAL.
"""
from __future__ import annotations

import logging
import resource
import socket
import time
from typing import Any

import tornado.ioloop
import tornado.iostream
import tornado.tcpserver

RESERVED_FILES = 64
"""Descriptors kept out of the connection cap besides half the soft limit: the store, the
logs, the dispatcher's pipes, the listening sockets."""
MIN_CONNECTIONS = 32
"""The cap is never below this, however low the limit (a server must answer its own client)."""
MAX_CONNECTIONS = 4096
"""Nor above this, however high the limit (the web UI, expctl and the trials need far fewer)."""
HIGHEST_SOFT_LIMIT = 1 << 20
"""raise_open_files_limit stops here when the hard limit is unlimited."""
LOG_INTERVAL = 60.0
"""Refused connections and accept errors are logged at most once per this many seconds."""
ACCEPT_PAUSE = 0.5
"""Accepting failed (EMFILE, ENFILE, ENOBUFS, ENOMEM, ...): it stops for this long."""
ACCEPTS_PER_TURN = 128
"""Connections accepted in one turn of the event loop, so that a flood does not starve it."""

_log = logging.getLogger("nni.manager")


def raise_open_files_limit() -> int:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit (at most HIGHEST_SOFT_LIMIT),
    as servers do, and return the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = HIGHEST_SOFT_LIMIT if hard == resource.RLIM_INFINITY else min(hard, HIGHEST_SOFT_LIMIT)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass  # e.g. a kernel's nr_open below the hard limit: keep the soft one
    return HIGHEST_SOFT_LIMIT if soft == resource.RLIM_INFINITY else soft


def connection_cap(soft_limit: int | None = None) -> int:
    """How many connections may be open at once for a soft descriptor limit (default: this
    process's): half of it less RESERVED_FILES, within MIN_CONNECTIONS..MAX_CONNECTIONS.
    The other half is the trials' (about 4 descriptors each: pipes, a pidfd) and the logs'."""
    if soft_limit is None:
        soft_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft_limit == resource.RLIM_INFINITY:
            soft_limit = HIGHEST_SOFT_LIMIT
    return max(MIN_CONNECTIONS, min(MAX_CONNECTIONS, soft_limit // 2 - RESERVED_FILES))


class _Occupancy:
    """The open connections a listener accepted, and the refusals not yet logged."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.open = 0
        self.refused = 0
        self.errors: dict[str, int] = {}
        self.logged_at = float("-inf")

    def note(self) -> None:
        """Log what was refused since the last line, at most once per LOG_INTERVAL."""
        now = time.monotonic()
        if now - self.logged_at < LOG_INTERVAL or not (self.refused or self.errors):
            return
        self.logged_at = now
        if self.refused:
            _log.warning("refused %d connection(s): %d open, the most this server keeps open (docs/security.md)",
                         self.refused, self.cap)
        for error, count in self.errors.items():
            _log.warning("could not accept connections %d time(s): %s; accepting paused for %.1fs each time",
                         count, error, ACCEPT_PAUSE)
        self.refused = 0
        self.errors = {}


class _CountedStream(tornado.iostream.IOStream):
    """An accepted connection's stream that frees its place when its descriptor closes."""

    def __init__(self, connection: socket.socket, occupancy: _Occupancy, **kwargs: Any) -> None:
        super().__init__(connection, **kwargs)
        self._occupancy: _Occupancy | None = occupancy

    def close_fd(self) -> None:
        try:
            super().close_fd()
        finally:
            if self._occupancy is not None:
                self._occupancy.open -= 1
                self._occupancy = None


class Listener:
    """Accepts connections on ``sockets`` for ``server`` (an HTTPServer, or another
    TCPServer, never given the sockets itself), at most ``cap`` open at once."""

    def __init__(self, server: tornado.tcpserver.TCPServer, sockets: list[socket.socket], cap: int) -> None:
        self.server = server
        self.sockets = list(sockets)
        self._occupancy = _Occupancy(cap)
        self._loop: tornado.ioloop.IOLoop | None = None
        self._watched: set[socket.socket] = set()
        self._paused: dict[socket.socket, object] = {}
        self._stopped = False

    @property
    def cap(self) -> int:
        return self._occupancy.cap

    @property
    def open_connections(self) -> int:
        return self._occupancy.open

    def start(self) -> None:
        """Start accepting, on the current event loop."""
        self._loop = tornado.ioloop.IOLoop.current()
        for sock in self.sockets:
            sock.setblocking(False)
            self._watch(sock)

    def stop(self) -> None:
        """Accept no more and close the listening sockets; idempotent. Open connections stay
        (``server.close_all_connections()`` ends them)."""
        if self._stopped:
            return
        self._stopped = True
        if self._loop is not None:
            for sock in list(self._watched):
                self._loop.remove_handler(sock)
            for timer in self._paused.values():
                self._loop.remove_timeout(timer)
        self._watched.clear()
        self._paused.clear()
        for sock in self.sockets:
            sock.close()

    def _watch(self, sock: socket.socket) -> None:
        assert self._loop is not None  # start() set it
        self._paused.pop(sock, None)
        if not self._stopped and sock not in self._watched:
            self._loop.add_handler(sock, lambda fd, events: self._accept(sock), tornado.ioloop.IOLoop.READ)
            self._watched.add(sock)

    def _pause(self, sock: socket.socket) -> None:
        assert self._loop is not None
        self._loop.remove_handler(sock)
        self._watched.discard(sock)
        self._paused[sock] = self._loop.call_later(ACCEPT_PAUSE, self._watch, sock)

    def _accept(self, sock: socket.socket) -> None:
        occupancy = self._occupancy
        try:
            for _ in range(ACCEPTS_PER_TURN):
                if self._stopped:
                    return
                try:
                    connection, address = sock.accept()
                except (BlockingIOError, InterruptedError):
                    return
                except ConnectionAbortedError:
                    continue
                except OSError as error:
                    # Out of descriptors (or memory, or another error): the connection stays in
                    # the backlog and the socket stays readable; without a pause this would spin.
                    reason = error.strerror or str(error)
                    occupancy.errors[reason] = occupancy.errors.get(reason, 0) + 1
                    self._pause(sock)
                    return
                if occupancy.open >= occupancy.cap:
                    connection.close()
                    occupancy.refused += 1
                    continue
                self._serve(connection, address)
        finally:
            occupancy.note()

    def _serve(self, connection: socket.socket, address: Any) -> None:
        self._occupancy.open += 1
        try:
            stream = _CountedStream(connection, self._occupancy, max_buffer_size=self.server.max_buffer_size,
                                    read_chunk_size=self.server.read_chunk_size)
        except BaseException:
            self._occupancy.open -= 1
            connection.close()
            raise
        self.server.handle_stream(stream, address)
