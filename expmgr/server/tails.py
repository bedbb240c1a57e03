"""Reading an experiment's growing log files by byte offset, for the REST ``tail`` and
``trial-file`` routes and the files a websocket client follows, across the log's rotations
(expmgr/rotation.py: ``NAME`` becomes ``NAME.1`` and a new ``NAME`` starts)::

    log = log_file(paths, files, store, "stdout", trial_id)   # TailError for an unknown name or trial
    tail = read_tail(log, offset=-4096)                 # the last 4 KiB of the current file
    more = read_tail(log, tail.next, inode=tail.inode)  # what was appended since, in that file or after it

A position is an offset in one file, named by its inode: a file rotated to ``NAME.1`` is
read on to its end, then the files after it from their start, so a reader that passes the
inode of its last answer sees every byte once. A follower may ask to jump to the end when
it is far behind (``jump_behind``): the answer says how much it ``skipped``.

A trial may replace its files (or its folder) with symlinks, or with a FIFO: a file is
opened one folder at a time below the experiment's folder, never through a symlink, and
only when it is a regular file (expmgr/logreader.py; a FORBIDDEN TailError for the current
file, a rotated one is passed over).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Generator

from expmgr.engine.errors import Refusal, RefusalKind
from expmgr.layout import ExperimentPaths
from expmgr.logreader import BLOCK_BYTES, KeptFile, Listing, LogFile, RefusedFile, open_kept, read_blocks
from expmgr.store import Store
from expmgr.training import TRIAL_LOGS, TrialFiles
from expmgr.training.files import is_trial_log

__all__ = ["EXPERIMENT_FILES", "MAX_BYTES", "TRIAL_FILES", "LogFile", "Tail", "TailError", "log_file", "read_tail",
           "tail_json", "whole_log"]

TRIAL_FILES = TRIAL_LOGS
EXPERIMENT_FILES = ("experiment.log", "dispatcher.log")
MAX_BYTES = 256 * 1024
"""The most one read returns."""
_ATTEMPTS = 5
"""Listings made for one read when rotations move the files between a listing and an open."""


class TailError(Refusal):
    """A file that cannot be named (INVALID), a trial that does not exist (NOT_FOUND),
    a file that is a symlink or not a regular file (FORBIDDEN), or one file too many
    followed (TOO_MANY)."""


@dataclass
class Tail:
    """Bytes [offset, next) of one file of a log (``inode``), decoded as UTF-8 (invalid
    bytes replaced), and the facts a reader shows about the log."""

    offset: int
    """Where ``text`` starts: the offset asked for; 0 when the file was truncated below it,
    or when the answer moved on to the next file of the log (another ``inode``); the start
    of the last bytes asked for by a negative offset, or of a jump to the end."""
    next: int
    """Where the next read starts. Short of ``size`` when more than MAX_BYTES were left,
    or when the file ends in the middle of a character (its rest is being written)."""
    size: int
    """The file's size when read (0 for a file not created yet)."""
    text: str
    inode: int | None = None
    """The file read (None when the log has no file yet); the next read passes it back."""
    rotated: int = 0
    """How many rotated files of the log are kept (``NAME.1`` ...)."""
    dropped: int = 0
    """How many bytes of the log rotation deleted (``NAME.dropped``)."""
    skipped: int | None = 0
    """Bytes of the log between the position asked for and ``offset`` that this answer
    passes over: a jump to the end, or files rotated away before they were read; None
    when that is not known (the file asked for was deleted and the reader passed no ``base``)."""
    base: int = 0
    """How many bytes of the log came before this file (see Listing.base); a follower
    keeps it to count what a rotation deleted before it was read."""


def tail_json(tail: Tail) -> dict[str, object]:
    """A tail as the REST ``tail`` route answers it and the websocket's ``tail`` message carries it."""
    return {"offset": tail.offset, "next": tail.next, "size": tail.size, "text": tail.text, "inode": tail.inode,
            "base": tail.base, "rotated": tail.rotated, "dropped": tail.dropped, "skipped": tail.skipped}


def _refused(error: RefusedFile) -> TailError:
    return TailError(RefusalKind.FORBIDDEN, f"{error}; only regular files inside the experiment's folder are served")


def log_file(paths: ExperimentPaths, files: TrialFiles, store: Store, which: str, trial_id: str | None) -> LogFile:
    """The file named ``which``: a trial's ``stdout``, ``stderr`` or ``trial.log`` (with
    ``trial_id``), as its trial ``files`` give it, or the experiment's ``experiment.log``
    or ``dispatcher.log``."""
    if is_trial_log(which):
        if not trial_id:
            raise TailError(RefusalKind.INVALID, f"trial: {which} is a trial's file; name the trial")
        if store.trial(trial_id) is None:
            raise TailError(RefusalKind.NOT_FOUND, f"no trial {trial_id!r}")
        return files.log(trial_id, which)
    if which in EXPERIMENT_FILES:
        path = paths.experiment_log if which == "experiment.log" else paths.dispatcher_log
    else:
        raise TailError(RefusalKind.INVALID,
                        f"file: expected one of {', '.join(TRIAL_FILES + EXPERIMENT_FILES)}, got {which!r}")
    return LogFile(paths.root, path.relative_to(paths.root))


def read_tail(log: LogFile, offset: int, max_bytes: int = MAX_BYTES, inode: int | None = None, *,
              base: int | None = None, jump_behind: int | None = None) -> Tail:
    """Read at most ``max_bytes`` from ``offset`` in the log's file ``inode`` (the current
    file when None), never splitting a character:

    - a negative offset: the last ``-offset`` bytes of the current file (``inode`` unused);
    - the current file shorter than ``offset``: it was truncated, read from 0;
    - a rotated file read to its end: the next file of the log, from 0;
    - a file no longer kept (rotated away): the oldest kept file, from 0; ``skipped`` is
      counted from ``base`` (the ``base`` of the answer that gave ``inode``), else None;
    - with ``jump_behind``, a position more than that many bytes behind the end of the
      log: the last ``max_bytes`` of the current file from a line's start, ``skipped``
      saying how much was passed over.

    TailError (FORBIDDEN) when the current file is a symlink or not a regular file (see
    logreader.LogFile); such a rotated file is passed over."""
    try:
        for attempt in range(_ATTEMPTS):
            tail = _read_once(log, offset, max_bytes, inode, base, jump_behind, last=attempt == _ATTEMPTS - 1)
            if tail is not None:
                return tail
    except RefusedFile as error:
        raise _refused(error) from None
    raise AssertionError("unreachable: the last attempt answers")


def _read_once(log: LogFile, offset: int, max_bytes: int, inode: int | None, base: int | None,
               jump_behind: int | None, last: bool) -> Tail | None:
    """One listing's answer; None when a rotation moved the files meanwhile (list again)."""
    listing = log.listing()
    facts = {"rotated": listing.rotated, "dropped": listing.dropped}
    # A reader with a place that finds no file to read (none listed, or the one listed gone
    # before it is opened: a rotation in progress) stays where it is and reads on from there
    # next time, when a rotation's files are settled: an answer without a file would start it
    # on the next file from 0 and lose the count of what it skipped.
    had_place = inode is not None and base is not None and offset >= 0
    stay = Tail(offset=offset, next=offset, size=offset, text="", inode=inode, base=base or 0, **facts)
    files = listing.files
    skipped: int | None = 0
    if offset < 0 or inode is None:
        position = len(files) - 1 if listing.current is not None else None
    else:
        position = listing.find(inode, base, offset)
        if position is None:
            if not last:
                return None  # perhaps listed in the middle of a rotation: look again
            # Rotated away: on from the first kept file after it (or the oldest, not knowing where it was).
            if base is None:
                skipped, position = None, 0
            else:
                position = listing.resume(base + offset)
                skipped = max(0, listing.base(position) - base - offset)
            offset = 0
            if not files:
                position = None
    if position is None:  # no file yet
        if had_place:
            return None if not last else stay
        return Tail(offset=0, next=0, size=0, text="", **facts)
    if offset >= 0:
        # Past the end of a rotated file: on to the next (skipping refused ones).
        while position < len(files) - 1 and (offset >= files[position].size or not files[position].regular):
            position, offset = position + 1, 0
        if jump_behind is not None and listing.current is not None:
            behind = max(0, files[position].size - offset) + sum(kept.size for kept in files[position + 1:])
            if behind > jump_behind:
                jumped = _jump_start(log, listing.current, max_bytes)
                if jumped is None:
                    return None if not last else (stay if had_place else Tail(offset=0, next=0, size=0, text="",
                                                                              **facts))
                position, offset = len(files) - 1, jumped
                skipped = None if skipped is None else skipped + behind - (listing.current.size - jumped)
    kept = files[position]
    file = log.open_kept(kept)
    if file is None:
        return None if not last else (stay if had_place else Tail(offset=0, next=0, size=0, text="", **facts))
    with file:
        size = os.fstat(file.fileno()).st_size
        if offset < 0:
            start = max(0, size + offset)
        else:
            start = 0 if offset > size else offset
        data = os.pread(file.fileno(), min(max_bytes, size - start), start)
    if offset < 0:  # the last bytes may begin inside a character: start at the next one
        skip = 0
        while skip < min(3, len(data)) and data[skip] & 0xC0 == 0x80:
            skip += 1
        start, data = start + skip, data[skip:]
    if log.dropped() != listing.dropped and not last:
        return None  # rotated meanwhile: the bases of this listing may be off
    data = data[:_complete_length(data)]
    return Tail(offset=start, next=start + len(data), size=size, text=data.decode("utf-8", "replace"),
                inode=kept.inode, skipped=skipped, base=listing.base(position), **facts)


def _jump_start(log: LogFile, current: KeptFile, max_bytes: int) -> int | None:
    """Where to start the last ``max_bytes`` of the current file: after the first newline
    in them (at their first whole character when there is none); None when the file moved."""
    file = log.open_kept(current)
    if file is None:
        return None
    with file:
        size = os.fstat(file.fileno()).st_size
        start = max(0, size - max_bytes)
        if start == 0:
            return 0
        window = os.pread(file.fileno(), size - start, start)
    newline = window.find(b"\n")
    if 0 <= newline < len(window) - 1:
        return start + newline + 1
    skip = 0
    while skip < min(3, len(window)) and window[skip] & 0xC0 == 0x80:
        skip += 1
    return start + skip


def whole_log(log: LogFile) -> Generator[bytes, None, None]:
    """The log as it is now, in blocks: its kept rotated files, oldest first, then its
    current file, each up to the size it had when opened (a fast writer cannot make it
    endless). TailError (FORBIDDEN) when the current file is a symlink or not a regular file."""
    try:
        snapshot = open_kept(log)
    except RefusedFile as error:
        raise _refused(error) from None
    try:
        yield from read_blocks(snapshot.readable())
    finally:
        snapshot.close()


def _complete_length(data: bytes) -> int:
    """``len(data)`` less a character cut short at its end (a UTF-8 lead byte whose
    continuation bytes are not there yet)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # not a continuation byte: the character starts here
            needed = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4 if byte & 0xF8 == 0xF0 else 1
            return len(data) - back if needed > back else len(data)
    return len(data)
