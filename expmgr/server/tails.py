"""Reading an experiment's growing log files by byte offset, for the REST ``tail`` and
``trial-file`` routes and the files a websocket client follows::

    log = log_file(paths, store, "stdout", trial_id)    # TailError for an unknown name or trial
    tail = read_tail(log, offset=-4096)                 # the last 4 KiB
    more = read_tail(log, tail.next)                     # what was appended since

A trial may replace its files (or its folder) with symlinks, or with a FIFO: a file is
opened one folder at a time below the experiment's folder, never through a symlink, and
only when it is a regular file (a FORBIDDEN TailError otherwise).
"""
from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import BinaryIO

from expmgr.engine.errors import Refusal, RefusalKind
from expmgr.layout import ExperimentPaths, TrialFiles
from expmgr.store import Store

TRIAL_FILES = ("stdout", "stderr", "trial.log")
EXPERIMENT_FILES = ("experiment.log", "dispatcher.log")
MAX_BYTES = 256 * 1024
"""The most one read returns."""


class TailError(Refusal):
    """A file that cannot be named (INVALID), a trial that does not exist (NOT_FOUND),
    a file that is a symlink or not a regular file (FORBIDDEN), or one file too many
    followed (TOO_MANY)."""


@dataclass
class Tail:
    """Bytes [offset, next) of a file, decoded as UTF-8 (invalid bytes replaced)."""

    offset: int
    """Where ``text`` starts: the offset asked for, or 0 when the file was truncated below
    it, or the start of the last bytes asked for by a negative offset."""
    next: int
    """Where the next read starts. Short of ``size`` when more than MAX_BYTES were left,
    or when the file ends in the middle of a character (its rest is being written)."""
    size: int
    """The file's size when read (0 for a file not created yet)."""
    text: str


@dataclass(frozen=True)
class LogFile:
    """A log file below a folder the server trusts (the experiment's), read without
    following a symlink at or below that folder."""

    root: Path
    relative: PurePath

    @property
    def path(self) -> Path:
        return self.root / self.relative

    def open(self) -> BinaryIO:
        """The file opened for reading; FileNotFoundError when it does not exist (yet),
        TailError (FORBIDDEN) when it, or a folder on the way, is a symlink or not what it should be."""
        parts = self.relative.parts
        if not parts or any(part in ("", ".", "..") or "/" in part for part in parts):
            raise TailError(RefusalKind.FORBIDDEN,
                            f"{self.relative}: not a file name inside the experiment's folder")
        folder = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for index, part in enumerate(parts):
                last = index == len(parts) - 1
                # O_NONBLOCK: opening a FIFO a trial put there must not block the server.
                flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_NONBLOCK if last else os.O_DIRECTORY)
                try:
                    opened = os.open(part, flags, dir_fd=folder)
                except OSError as error:
                    if error.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise TailError(RefusalKind.FORBIDDEN,
                                        f"{self.relative}: refused, it is (or is inside) a symlink or "
                                        "not a folder; only files inside the experiment's folder are served") from None
                    raise
                os.close(folder)
                folder = opened
            if not stat.S_ISREG(os.fstat(folder).st_mode):
                raise TailError(RefusalKind.FORBIDDEN, f"{self.relative}: refused, not a regular file")
            os.set_blocking(folder, True)
            file = os.fdopen(folder, "rb")
        except BaseException:
            os.close(folder)
            raise
        return file

    def size(self) -> int:
        """The file's size without following a symlink (0 when it does not exist)."""
        try:
            return os.lstat(self.path).st_size
        except FileNotFoundError:
            return 0


def log_file(paths: ExperimentPaths, store: Store, which: str, trial_id: str | None) -> LogFile:
    """The file named ``which``: a trial's ``stdout``, ``stderr`` or ``trial.log`` (with
    ``trial_id``), or the experiment's ``experiment.log`` or ``dispatcher.log``."""
    if which in TRIAL_FILES:
        if not trial_id:
            raise TailError(RefusalKind.INVALID, f"trial: {which} is a trial's file; name the trial")
        if store.trial(trial_id) is None:
            raise TailError(RefusalKind.NOT_FOUND, f"no trial {trial_id!r}")
        files = TrialFiles(paths.trial_dir(trial_id))
        path = {"stdout": files.stdout, "stderr": files.stderr, "trial.log": files.trial_log}[which]
    elif which in EXPERIMENT_FILES:
        path = paths.experiment_log if which == "experiment.log" else paths.dispatcher_log
    else:
        raise TailError(RefusalKind.INVALID,
                        f"file: expected one of {', '.join(TRIAL_FILES + EXPERIMENT_FILES)}, got {which!r}")
    return LogFile(paths.root, path.relative_to(paths.root))


def read_tail(log: LogFile, offset: int, max_bytes: int = MAX_BYTES) -> Tail:
    """Read from ``offset`` (from 0 if the file is now shorter: it was truncated; the last
    ``-offset`` bytes if negative), at most ``max_bytes``, never splitting a character;
    TailError (FORBIDDEN) for a symlink (see LogFile.open)."""
    try:
        with log.open() as file:
            size = os.fstat(file.fileno()).st_size
            start = max(0, size + offset) if offset < 0 else (0 if offset > size else offset)
            file.seek(start)
            data = file.read(min(max_bytes, size - start))
    except FileNotFoundError:
        return Tail(offset=0, next=0, size=0, text="")
    if offset < 0:  # the last bytes may begin inside a character: start at the next one
        skip = 0
        while skip < min(3, len(data)) and data[skip] & 0xC0 == 0x80:
            skip += 1
        start, data = start + skip, data[skip:]
    data = data[:_complete_length(data)]
    return Tail(offset=start, next=start + len(data), size=size, text=data.decode("utf-8", "replace"))


def _complete_length(data: bytes) -> int:
    """``len(data)`` less a character cut short at its end (a UTF-8 lead byte whose
    continuation bytes are not there yet)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # not a continuation byte: the character starts here
            needed = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4 if byte & 0xF8 == 0xF0 else 1
            return len(data) - back if needed > back else len(data)
    return len(data)
