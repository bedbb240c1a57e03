"""SQLite's errors turned into the store's own (``errors.py``) at the SQLite backend's
boundary: every public method of ``ExperimentStore`` and its snapshots, and its opening::

    with store_errors(path):        # a sqlite3.DatabaseError leaves as a StoreError
        conn.execute("BEGIN IMMEDIATE")

The kind comes from SQLite's result code, the message names the file and what to do, the
``reason`` keeps SQLite's words and ``__cause__`` SQLite's error.
"""
from __future__ import annotations

import functools
import inspect
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from expmgr.store._disk import machine_trouble
from expmgr.store.errors import StoreBusy, StoreError, StoreUnreadable, StoreUnwritable

_BUSY_CODES = frozenset({5, 6, 15})
"""SQLITE_BUSY, SQLITE_LOCKED, SQLITE_PROTOCOL (a WAL lock race): another connection holds it."""


def store_error(path: Path, error: sqlite3.DatabaseError) -> StoreError:
    """The store's error for SQLite's ``error`` on the database at ``path``: one line naming
    the file, what SQLite said and what to do."""
    said = str(error)
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in _BUSY_CODES:
        return StoreBusy(f"{path}: busy ({said}); another process holds it, try again", reason=said)
    trouble = machine_trouble(path, error)   # a full disk is no reason to restore or delete it
    if trouble is not None:
        return StoreUnwritable(trouble, reason=said)
    if isinstance(error, (sqlite3.IntegrityError, sqlite3.DataError, sqlite3.NotSupportedError)):
        return StoreError(f"{path}: refused the write ({said})", reason=said)
    return StoreUnreadable(f"{path}: not a valid expmgr database ({said}); restore it from a backup, "
                           "or delete the experiment (expctl experiment delete ID)", reason=said)


@contextmanager
def store_errors(path: Path) -> Iterator[None]:
    """Run the block with SQLite's errors raised as the store's (``store_error``). A
    ``sqlite3.ProgrammingError`` (a closed connection: the caller's bug) passes as it is."""
    try:
        yield
    except sqlite3.ProgrammingError:
        raise
    except sqlite3.DatabaseError as error:
        raise store_error(path, error) from error


_Class = TypeVar("_Class", bound=type)


def raising_store_errors(cls: _Class) -> _Class:
    """Class decorator: each public method of ``cls`` (defined in its body) runs under
    ``store_errors(self.path)``, so that no SQLite error leaves an instance."""
    for name, member in list(vars(cls).items()):
        if not name.startswith("_") and inspect.isfunction(member):
            setattr(cls, name, _raising_store_errors(member))
    return cls


def _raising_store_errors(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with store_errors(self.path):
            return method(self, *args, **kwargs)
    return wrapper
