"""The store's errors, whatever backend keeps it: code above the store catches these kinds,
never the backend's own (SQLite's ``sqlite3`` errors stay inside ``expmgr.store``)::

    try:
        store.add_metric(metric)
    except StoreUnavailable as error:   # busy, or a full or read-only disk: try again later
        queue_it(reason=error.reason)

``str(error)`` is a whole line for a user (the file, what is wrong, what to do); ``reason``
is what the backend said, for a caller's own sentence ("cannot be written now (database
is locked)"). A translated error keeps the backend's as ``__cause__``. Using a store after
``close()`` is the caller's bug, not the store's condition: it is not one of these.
"""
from __future__ import annotations


class StoreError(Exception):
    """The store refused: there is none (or one already) where asked, a change the trial
    states do not allow, data it cannot take. The base of every kind below."""

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = message if reason is None else reason
        """What the backend said (its own words), or the message when it said nothing."""


class StoreUnreadable(StoreError):
    """The store's data cannot be read as an expmgr store: damaged, truncated, overwritten,
    another program's file. Trying again does not help; restoring it or deleting it does."""


class StoreTooNew(StoreError):
    """The store is of a schema version this expmgr does not read (made by a newer one)."""


class StoreUnavailable(StoreError):
    """The store cannot be used now but may be later, its data not shown to be damaged:
    the runner queues its writes and retries (``engine/writes.py``)."""


class StoreBusy(StoreUnavailable):
    """Another connection (another process) holds the store's lock past the wait allowed."""


class StoreUnwritable(StoreUnavailable):
    """The machine keeps the store from being used: a full or read-only disk, an I/O error,
    no free file descriptor or memory."""
