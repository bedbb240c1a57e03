"""Telling a database file that is damaged from one the machine keeps us from using (a full
or read-only disk, no free file descriptor, a failing disk), so that the message says what
to do about the real cause instead of advising to move a good file aside::

    trouble = machine_trouble(path, error)   # None: the file itself may be at fault
    if trouble is not None:
        raise RegistryError(trouble)
"""
from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

_MACHINE_CODES = frozenset({7, 8, 10, 13, 14})
"""SQLite's primary result codes that are the machine's: SQLITE_NOMEM, SQLITE_READONLY,
SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN (an extended code's low byte is its primary)."""
_MACHINE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EMFILE, errno.ENFILE, errno.ENOMEM,
                             errno.EIO, errno.EACCES, errno.EPERM})


def machine_trouble(path: Path, error: BaseException) -> str | None:
    """One line naming ``path``, what SQLite (or the system) said and what is wrong with
    the machine and what to do, when ``error`` comes from the machine rather than from the
    file's content; None otherwise."""
    if isinstance(error, sqlite3.Error):
        code = getattr(error, "sqlite_errorcode", None)
        if not isinstance(code, int) or code & 0xFF not in _MACHINE_CODES:
            return None
        said = str(error)
    elif isinstance(error, OSError):
        if error.errno not in _MACHINE_ERRNOS:
            return None
        said = error.strerror or str(error)
    else:
        return None
    return (f"{path}: cannot be used now ({said}): {_cause(path.parent)}; the file itself is not "
            "shown to be damaged, so do not move it aside")


def _cause(folder: Path) -> str:
    """What keeps files in ``folder`` from being opened or written, as far as we can tell."""
    try:
        probe = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        os.close(probe)
    except OSError as error:
        if error.errno in (errno.EMFILE, errno.ENFILE):
            return ("this process has no free file descriptor; raise the limit (ulimit -n) or end what holds "
                    "so many files, and try again")
    try:
        disk = os.statvfs(folder)
    except OSError as error:
        return f"its folder {folder} cannot be reached ({error.strerror}); check that it exists, and try again"
    if disk.f_flag & os.ST_RDONLY:
        return f"the disk holding {folder} is read-only; make it writable (remount it), and try again"
    if disk.f_blocks and disk.f_bavail == 0:
        return f"the disk holding {folder} is full; free some space there, and try again"
    if disk.f_files and disk.f_favail == 0:
        return f"the disk holding {folder} can take no more files (no free inodes); remove some, and try again"
    if not os.access(folder, os.W_OK):
        return f"its folder {folder} cannot be written by this user; give it write access, and try again"
    return "a full, read-only or failing disk, or too many open files; check the disk (and dmesg), and try again"
