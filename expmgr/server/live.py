"""Live updates for the web UI: the websocket ``/api/v1/expmgr/ws`` and the changes
answers, built off the event loop.

The store tells the hub of each committed write; the hub then pushes to each client
what changed since the cursor of its previous message, at most once per PUSH_INTERVAL
(a burst of metrics makes one message). Nothing is read while nothing is written.
Files a client follows are checked every FOLLOW_INTERVAL while followed; clients
following one file share its reads. A client's follows, its connections and its unsent
backlog are bounded (guard.ServerLimits, MAX_BACKLOG), and so is the unsent backlog of all
clients together (ServerLimits.max_follow_backlog), so clients cannot stall the loop or
hold the manager's memory::

    hub = LiveHub(store, paths, read_only=False, limits=limits)
    hub.start()                                         # on the server's event loop
    app = make_app(store, paths, runner, hub, guard)    # routes /api/v1/expmgr/ws to LiveSocket
    ...
    await hub.stop()
"""
from __future__ import annotations

import asyncio
import json
import logging
import threading
from dataclasses import dataclass
from typing import Any

import tornado.ioloop
import tornado.websocket

from expmgr.engine.errors import RefusalKind
from expmgr.layout import ExperimentPaths
from expmgr import strict_json
from expmgr.server import auth, memory, request_values, views
from expmgr.server.facts import ExperimentFacts
from expmgr.server.guard import Guard, ServerLimits, peer_of
from expmgr.server.home import stored_trial_files
from expmgr.server.reader import StoreReader
from expmgr.server.refusals import RequestError, send_refusal
from expmgr.store import Changes, Store
from expmgr.training import TrialFiles
from expmgr.server.tails import MAX_BYTES, LogFile, Tail, TailError, log_file, read_tail, tail_json

PUSH_INTERVAL = 0.25
"""At most one changes message per client in this many seconds."""
PUSH_LIMIT = 50_000
"""Trials + metrics in one pushed message; a client far behind gets several in a row."""
FOLLOW_INTERVAL = 0.3
"""How often followed files are checked for growth (a stat each)."""
CHUNKS_PER_CHECK = 4
"""Reads of a followed file per check, each at most tails.MAX_BYTES."""
JUMP_BEHIND = CHUNKS_PER_CHECK * MAX_BYTES
"""A follow further than this behind the end of its log (more than one check reads) jumps
to the last MAX_BYTES of it, and its client is told how much was skipped: a writer faster
than the reads is shown live, never hours late."""
MAX_BACKLOG = 2 * 1024 * 1024
"""Bytes sent to a client and not yet written to its connection above which its followed
files are not read (they are read again once it caught up): a client that asks much and
reads little costs no more memory than this. All clients together: limits.max_follow_backlog."""
FIRST_FOLLOW_BYTES = MAX_BYTES
"""A follow that names no offset starts with the last this many bytes of the file."""
CLIENTS_PER_TURN = 16
"""Clients read for in one turn of the event loop at a check: the loop runs other work between."""
TRIM_AFTER = 8 * 1024 * 1024
"""Bytes the clients' unsent backlog reached, all together, after which the process gives
freed memory back to the system once the backlog is written (memory.give_back)."""

_log = logging.getLogger("nni.manager")


def changes_answer(store: Store, files: TrialFiles, since: str | None, limit: int | None,
                   read_only: bool, head: dict[str, Any] | None = None,
                   facts: ExperimentFacts | None = None, more_trials: bool = False) -> tuple[str, Changes]:
    """The changes since ``since`` as JSON text (see views.changes_json), read in one snapshot;
    the experiment's facts from ``facts``, refreshed in it, when given (else read afresh)."""
    with store.snapshot():
        changes = store.changes(since, limit)
        if facts is not None:
            facts.refresh(store)
        return views.changes_json(store, files, changes, read_only, head, facts, more_trials=more_trials), changes


@dataclass
class _Follow:
    """A file one client follows: where in the log its next read starts."""

    log: LogFile
    file: str
    trial: str | None
    next: int
    """Where its next read starts (negative until the first read: the last bytes)."""
    inode: int | None = None
    """The file of the log ``next`` is in (None: the current one)."""
    base: int | None = None
    """How many bytes of the log came before that file (Tail.base)."""
    size: int = -1
    """That file's size at the last read."""
    answered: bool = False
    """The client was sent its first tail (sent even when empty)."""


class LiveHub:
    """The websocket clients of one experiment's server; see the module docstring."""

    def __init__(self, store: Store, paths: ExperimentPaths, read_only: bool,
                 limits: ServerLimits | None = None) -> None:
        self.store = store
        self.paths = paths
        self.files = stored_trial_files(paths)
        """The trials' files: their logs are followed through it, the views' paths come from it."""
        self.read_only = read_only
        self.more_trials = False
        """Read-only after the search ended DONE, with a raise of its budget taken (the
        profile's ``updatableFields`` says which)."""
        self.limits = limits or ServerLimits()
        self.reader = StoreReader(paths)
        self.facts = ExperimentFacts()
        """The facts of every changes answer, kept up to date on the reader's thread."""
        self._sockets: set[LiveSocket] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._push_timer: asyncio.TimerHandle | None = None
        self._push_task: asyncio.Task | None = None
        self._dirty = False
        """A write was committed after the running push read the store."""
        self._last_push = 0.0
        self._follow_timer: tornado.ioloop.PeriodicCallback | None = None
        self._stopping = False
        self._store_unwritable: str | None = None
        """While the runner cannot write the store: what clients are told (hello, ``store`` messages)."""
        self.backlog = 0
        """Bytes sent to all clients and not yet written to their connections."""
        self._backlog_peak = 0
        """The most ``backlog`` was since memory was last given back."""

    # -- lifecycle --------------------------------------------------------------

    def start(self) -> None:
        """Listen to the store's commits; call on the event loop that serves the app."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self.store.add_commit_listener(self._store_changed)

    def _started_loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None  # set by start(), before the store's commits are followed
        return self._loop

    async def stop(self) -> None:
        """Push the last changes (the experiment's end), close the sockets, stop
        following, close the reader; idempotent."""
        self._stopping = True
        self.store.remove_commit_listener(self._store_changed)
        if self._push_timer is not None:
            self._push_timer.cancel()
            self._push_timer = None
        if self._push_task is not None:
            await asyncio.wait([self._push_task])
        if self._dirty and self._sockets:
            self._dirty = False
            try:
                await self._push()
            except Exception:  # the server must still close
                _log.exception("pushing the last changes to the web UI failed")
        for socket in list(self._sockets):
            socket.close(1001, "the experiment's server is stopping")
        self._sockets.clear()
        if self._follow_timer is not None:
            self._follow_timer.stop()
            self._follow_timer = None
        self.reader.close()

    def serve_read_only(self, more_trials: bool = False) -> None:
        """The experiment's search ended and its server stays: clients are told (the
        profile's ``readOnly`` in the next push) and the answers say so from now on; with
        ``more_trials`` (it ended DONE), its budget fields are still offered for a raise."""
        self.read_only, self.more_trials = True, more_trials
        self._dirty = True
        self._schedule_push()

    def serve_writable(self) -> None:
        """The ended experiment runs again (given more trials): clients are told as above."""
        self.read_only, self.more_trials = False, False
        self._dirty = True
        self._schedule_push()

    async def changes(self, since: str | None, limit: int | None) -> str:
        """The REST changes answer, built on the reader's thread."""
        text, _ = await self.reader.run(
            lambda store: changes_answer(store, self.files, since, limit, self.read_only, facts=self.facts,
                                         more_trials=self.more_trials))
        return text

    async def experiment_and_statistics(self, read_only: bool,
                                        more_trials: bool = False) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """NNI's experiment profile (``views.experiment_view``) and job-statistics, from the
        kept facts, on the reader's thread."""
        def read(store: Store) -> tuple[dict[str, Any], list[dict[str, Any]]]:
            with store.snapshot():
                self.facts.refresh(store)
                return (views.experiment_view(store, read_only, facts=self.facts, more_trials=more_trials),
                        views.job_statistics_view(store, self.facts))
        return await self.reader.run(read)

    # -- changes pushed -----------------------------------------------------------

    def _store_changed(self) -> None:
        """The store committed a write (called in the writing thread)."""
        if threading.get_ident() != self._loop_thread:
            self._started_loop().call_soon_threadsafe(self._store_changed)
            return
        self._dirty = True
        self._schedule_push()

    def _schedule_push(self) -> None:
        if self._stopping or not self._sockets or self._push_timer is not None or self._push_task is not None:
            return  # the running push reschedules itself when done
        delay = max(0.0, self._last_push + PUSH_INTERVAL - self._started_loop().time())
        self._push_timer = self._started_loop().call_later(delay, self._start_push)

    def _start_push(self) -> None:
        self._push_timer = None
        self._dirty = False
        self._push_task = self._started_loop().create_task(self._push())
        self._push_task.add_done_callback(self._push_done)

    async def _push(self) -> None:
        """Send each client what changed since its cursor; clients at one cursor share an answer."""
        by_cursor: dict[str, list[LiveSocket]] = {}
        for socket in self._sockets:
            by_cursor.setdefault(socket.cursor, []).append(socket)
        for cursor, sockets in by_cursor.items():
            def answer(store: Store, since: str = cursor) -> tuple[str, Changes]:
                return changes_answer(store, self.files, since, PUSH_LIMIT, self.read_only, {"type": "changes"},
                                      self.facts, more_trials=self.more_trials)
            text, changes = await self.reader.run(answer)
            if changes.more:
                self._dirty = True  # the rest in the next message
            for socket in sockets:
                if socket in self._sockets and socket.cursor == cursor:
                    socket.cursor = changes.cursor
                    socket.send(text)

    def _push_done(self, task: asyncio.Task) -> None:
        self._push_task = None
        self._last_push = self._started_loop().time()
        if not task.cancelled() and task.exception() is not None:
            _log.error("pushing changes to the web UI failed", exc_info=task.exception())
        if self._dirty:
            self._schedule_push()

    # -- clients ----------------------------------------------------------------------

    def connected(self, socket: LiveSocket, since: str | None) -> None:
        """A client connected; from ``since`` (a cursor it holds) it is sent what it missed
        (everything for a cursor of another experiment, or "")."""
        self._sockets.add(socket)
        current = self.store.cursor()
        socket.cursor = current if since is None else since
        socket.send(json.dumps({"type": "hello", "cursor": socket.cursor, "readOnly": self.read_only,
                                "storeUnwritable": self._store_unwritable}))
        if socket.cursor != current:
            self._dirty = True
            self._schedule_push()

    def tell_store_unwritable(self, notice: str | None) -> None:
        """Tell every client that launching is paused because the store cannot be written
        or trials cannot be started (``notice``, the runner's words), or that it goes on
        (None). No commit announces this (no write may succeed meanwhile): it is its own
        message."""
        self._store_unwritable = notice
        message = json.dumps({"type": "store", "unwritable": notice})
        for socket in list(self._sockets):
            socket.send(message)

    def disconnected(self, socket: LiveSocket) -> None:
        self._sockets.discard(socket)
        self._update_follow_timer()

    def sockets_from(self, address: str | None) -> int:
        """How many clients are connected from the client (guard.peer_of) at ``address``."""
        peer = peer_of(address)
        return sum(1 for socket in self._sockets if peer_of(socket.request.remote_ip) == peer)

    def follow(self, socket: LiveSocket, file: str, trial: str | None, offset: int, inode: int | None = None,
               base: int | None = None) -> None:
        """Send the file from ``offset`` (negative: its last bytes) in its file ``inode`` (a
        tail's; None: the current file) now (or once the client read its backlog), then
        what is appended, across rotations. Following a file again replaces the earlier
        follow of it; more than ``limits.max_follows`` files is a TailError (TOO_MANY)."""
        key = (file, trial or None)
        if key not in socket.follows and len(socket.follows) >= self.limits.max_follows:
            raise TailError(RefusalKind.TOO_MANY,
                            f"follow: this connection already follows {len(socket.follows)} files, the most "
                            "one connection may; unfollow one first")
        follow = _Follow(log_file(self.paths, self.files, self.store, file, trial), file, key[1], offset, inode, base)
        socket.follows[key] = follow
        if not self._behind(socket):
            self._read_follow(socket, follow, {})
        self._update_follow_timer()

    def _behind(self, socket: LiveSocket) -> bool:
        """No file is read for ``socket`` now: it, or all clients together, have too much unsent."""
        return socket.backlog > MAX_BACKLOG or self.backlog > self.limits.max_follow_backlog

    def sent(self, size: int) -> None:
        """``size`` bytes were queued for a client (negative: written, or dropped with its connection)."""
        self.backlog += size
        self._backlog_peak = max(self._backlog_peak, self.backlog)
        if self.backlog == 0 and self._backlog_peak > TRIM_AFTER:
            self._backlog_peak = 0
            memory.give_back()

    def unfollow(self, socket: LiveSocket, file: str, trial: str | None) -> None:
        socket.follows.pop((file, trial or None), None)
        self._update_follow_timer()

    def _update_follow_timer(self) -> None:
        following = any(socket.follows for socket in self._sockets)
        if following and self._follow_timer is None:
            self._follow_timer = tornado.ioloop.PeriodicCallback(self._check_follows, FOLLOW_INTERVAL * 1000)
            self._follow_timer.start()
        elif not following and self._follow_timer is not None:
            self._follow_timer.stop()
            self._follow_timer = None

    async def _check_follows(self) -> None:
        stats: dict[LogFile, tuple[int, int] | None] = {}
        reads: dict[tuple[LogFile, int | None, int], tuple[Tail, str]] = {}  # clients at one place share its read
        # A client behind (_behind) is read for again once it caught up.
        for index, socket in enumerate(list(self._sockets)):
            if index and index % CLIENTS_PER_TURN == 0:
                await asyncio.sleep(0)  # the loop's other work between clients
                stats.clear()  # files grew meanwhile
            if socket not in self._sockets:
                continue  # left meanwhile
            for follow in list(socket.follows.values()):
                if self._behind(socket):
                    break
                if follow.log not in stats:
                    stats[follow.log] = follow.log.stat()
                current = stats[follow.log]
                # Read when the current file is another one (rotated) or not where the follow is.
                idle = current is None and follow.inode is None  # no file yet
                if not follow.answered or (not idle and current != (follow.inode, follow.next)):
                    self._read_follow(socket, follow, reads)

    def _read_follow(self, socket: LiveSocket, follow: _Follow,
                     reads: dict[tuple[LogFile, int | None, int], tuple[Tail, str]]) -> None:
        for _ in range(CHUNKS_PER_CHECK):
            if self._behind(socket) and follow.answered:
                return  # the rest at a later check
            place = (follow.log, follow.inode, follow.next)
            shared = reads.get(place)
            if shared is None:
                try:
                    tail = read_tail(follow.log, follow.next, inode=follow.inode, base=follow.base,
                                     jump_behind=JUMP_BEHIND if follow.answered else None)
                except TailError as error:  # it became a symlink: followed no more
                    socket.follows.pop((follow.file, follow.trial), None)
                    socket.send_error_message(str(error), file=follow.file, trial=follow.trial)
                    return
                # One text for every client at this place: the same log is the same file and trial.
                shared = reads[place] = tail, json.dumps({"type": "tail", "file": follow.file, "trial": follow.trial,
                                                          **tail_json(tail)})
            tail, message = shared
            moved = tail.inode != follow.inode or tail.offset != follow.next or tail.next != follow.next
            follow.next, follow.inode, follow.base, follow.size = tail.next, tail.inode, tail.base, tail.size
            if not follow.answered or moved:
                socket.send(message)
            follow.answered = True
            if (tail.next >= tail.size and tail.inode == (follow.log.stat() or (None,))[0]) or not moved:
                return


class LiveSocket(tornado.websocket.WebSocketHandler):
    """One client of ``/api/v1/expmgr/ws[?since=<cursor>]``; messages in docs/architecture.md."""

    def initialize(self, hub: LiveHub, guard: Guard) -> None:
        self.hub = hub
        self.guard = guard
        self.cursor = ""
        self.follows: dict[tuple[str, str | None], _Follow] = {}
        self.backlog = 0
        """Bytes sent and not yet written to the connection."""

    def check_origin(self, origin: str) -> bool:
        return self.guard.origin_allowed(origin)

    def prepare(self) -> None:
        auth.check(self)  # before the upgrade: a refused client gets a plain 401
        address = self.request.remote_ip
        if self.hub.sockets_from(address) >= self.hub.limits.max_sockets_per_address:
            send_refusal(self, RequestError(RefusalKind.TOO_MANY, f"{address} already has "
                                            f"{self.hub.limits.max_sockets_per_address} websocket connections, "
                                            "the most one address may (all loopback addresses count as one)"))

    def open(self) -> None:
        self.hub.connected(self, self.get_query_argument("since", None))

    def on_message(self, message: str | bytes) -> None:
        try:
            request = strict_json.loads(message)
        except ValueError as error:
            self.send_error_message(f"message: not JSON ({error})")
            return
        kind = request.get("type") if isinstance(request, dict) else None
        if kind not in ("follow", "unfollow"):
            self.send_error_message(f"type: expected 'follow' or 'unfollow', got {kind!r}")
            return
        file, trial = request.get("file"), request.get("trial")
        if not isinstance(file, str) or not (trial is None or isinstance(trial, str)):
            self.send_error_message(f"{kind}: expected a file name and a trial id or null, got {request!r}")
            return
        if kind == "unfollow":
            self.hub.unfollow(self, file, trial)
            return
        offset, inode, base = request.get("offset", -FIRST_FOLLOW_BYTES), request.get("inode"), request.get("base")
        try:
            offset = request_values.json_integer("offset", offset, minimum=None)
            inode, base = (None if value is None else request_values.json_integer(name, value)
                           for name, value in (("inode", inode), ("base", base)))
            self.hub.follow(self, file, trial, offset, inode, base)
        except RequestError as error:
            self.send_error_message(str(error))
        except TailError as error:
            self.send_error_message(str(error), file=file, trial=trial)

    def on_close(self) -> None:
        self.hub.disconnected(self)

    def send(self, text: str) -> None:
        try:
            written = self.write_message(text)
        except tornado.websocket.WebSocketClosedError:
            self.hub.disconnected(self)
            return
        self.backlog += len(text)
        self.hub.sent(len(text))
        def written_callback(future: asyncio.Future, size: int = len(text)) -> None:
            self._written(future, size)
        written.add_done_callback(written_callback)

    def _written(self, future: asyncio.Future, size: int) -> None:
        self.backlog -= size
        self.hub.sent(-size)
        if not future.cancelled():
            future.exception()  # a closed connection: on_close tells the hub

    def send_error_message(self, message: str, **fields: Any) -> None:
        self.send(json.dumps({"type": "error", "error": message, **fields}))
