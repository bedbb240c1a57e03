"""The runner's writes to the store, kept in order while the store refuses them (locked,
read-only, disk full) and retried with backoff until it takes them again::

    writes = WriteQueue(record_outage=store.record_store_outage, on_paused=..., on_resumed=...,
                        on_failed=...)
    if not writes.commit(store.add_trial, record):   # False: queued, replayed later in order
        ...
    await writes.drain(time.monotonic() + FINAL_WRITE_PATIENCE)   # at the end
"""
from __future__ import annotations

import asyncio
import functools
import time
from collections import deque
from typing import Any, Callable

from expmgr.store import StoreUnavailable

WRITE_BUSY_TIMEOUT_MS = 100
"""How long a write on the event loop waits for another connection's lock; after
that it is queued and retried (``_RETRY_FIRST`` s, doubling to ``_RETRY_MAX`` s)."""
_RETRY_FIRST, _RETRY_MAX = 0.1, 5.0
FINAL_WRITE_PATIENCE = 60.0
"""How long an ending experiment keeps retrying writes the store refuses, before it
ends anyway and says in experiment.log what could not be recorded."""


class WriteQueue:
    """Store writes, each with what depends on it, run now or queued behind the earlier
    refused ones; runs on the event loop."""

    def __init__(self, *, record_outage: Callable[[float, str], None], on_paused: Callable[[str], None],
                 on_resumed: Callable[[], None], on_failed: Callable[[str], None]) -> None:
        """``record_outage(since, reason)`` is queued when the store first refuses a write;
        ``on_paused(reason)`` and ``on_resumed()`` are told when it starts and stops refusing;
        ``on_failed(name)`` when a queued write raises something else (from its ``except``)."""
        self._record_outage = record_outage
        self._on_paused = on_paused
        self._on_resumed = on_resumed
        self._on_failed = on_failed
        self._pending: deque[Callable[[], Any]] = deque()
        """Writes the store refused, in order; replayed by ``_retry`` once it takes writes again."""
        self._unwritable: str | None = None
        self._retrier: asyncio.Task | None = None

    @property
    def unwritable(self) -> str | None:
        """Why the store cannot be written, while it cannot (the last error), else None."""
        return self._unwritable

    def __len__(self) -> int:
        """How many writes wait."""
        return len(self._pending)

    def commit(self, write: Callable[..., Any], *args: Any) -> bool:
        """Run ``write(*args)`` (one store write and what depends on it) now, or, while
        the store refuses writes, queue it behind the earlier ones to be replayed in
        order; True if it ran now. A queued write is run again from the start, so
        what it does before its write must be harmless to repeat."""
        if not self._pending:
            try:
                write(*args)
                return True
            except StoreUnavailable as error:  # locked, busy, read-only, disk full, I/O error
                self._pending.append(functools.partial(write, *args))
                self.refused(error)
                return False
        self._pending.append(functools.partial(write, *args))
        return False

    def refused(self, error: StoreUnavailable) -> None:
        """The store refused a write: say so once, and retry (with the outage recorded)
        until a write succeeds."""
        if self._unwritable is None:
            self._unwritable = reason = error.reason
            since = time.time()
            self._on_paused(reason)
            self._pending.append(lambda: self._record_outage(since, reason))
        if self._retrier is None or self._retrier.done():
            self._retrier = asyncio.get_running_loop().create_task(self._retry())

    async def _retry(self) -> None:
        try:
            delay = _RETRY_FIRST
            while self._pending:
                await asyncio.sleep(delay)
                delay = min(2 * delay, _RETRY_MAX)
                self.flush()
        except Exception:
            self._on_failed("_retry_pending")

    async def drain(self, deadline: float) -> bool:
        """Retry the queued writes until they are all done (True) or ``deadline``
        (``time.monotonic()``) passes."""
        delay = _RETRY_FIRST
        while not self.flush():
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(2 * delay, _RETRY_MAX)
        return True

    def flush(self) -> bool:
        """Replay the queued writes in order; True once none is left."""
        while self._pending:
            write = self._pending[0]
            try:
                write()
            except StoreUnavailable as error:
                self._unwritable = error.reason
                return False
            except Exception:
                self._on_failed(getattr(write, "func", write).__name__)
            self._pending.popleft()
        if self._unwritable is not None:
            self._unwritable = None
            self._on_resumed()
        return True

    def unrecorded(self, ended: str, store: str) -> str:
        """What experiment.log says when the experiment ended (``ended``: its state) with
        writes still queued after ``FINAL_WRITE_PATIENCE``; ``store``: the store's path."""
        return (f"the experiment ended {ended}, but {store} could not be written for {FINAL_WRITE_PATIENCE:g}s "
                f"({self._unwritable}): its last {len(self)} change(s) (trial and experiment states, results) "
                "are not recorded there; the trials' reports are kept in their metrics.jsonl")

    def close(self) -> None:
        """Stop retrying in the background (what is left stays queued)."""
        if self._retrier is not None:
            self._retrier.cancel()
