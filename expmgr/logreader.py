"""Reading the log files that expmgr/rotation.py bounds, for ``expctl log``, the server's
tails and anyone else who shows a log: its kept files in order (``NAME.k`` ... ``NAME.1``,
``NAME``), where its last lines start, found by reading backwards from the end (never the
whole file), and where a reader goes on when the file it read was rotated: the file is
known by its inode (and by the bytes of the log before it, ``Listing.base``, since a
deleted file's inode is given to new ones), so a reader follows a log across its
rotations without losing or repeating a byte::

    log = LogFile(paths.root, PurePath("trials/Ab3/stdout"))
    snapshot = open_kept(log)                     # every kept file opened, oldest first
    index, offset, lines = last_lines_start(snapshot.readable(), 10)
    for block in read_blocks(snapshot.readable(), index, offset):
        ...                                       # the last 10 lines, in blocks
    snapshot.close()

Files are opened below a folder the reader trusts (the experiment's) one folder at a time,
never through a symlink, without blocking on a FIFO, and only when they are regular
files with one name (no hard link): a trial may put a symlink, a FIFO or a hard link to
another file in the place of any of them (RefusedFile).
Every read is bounded: blocks of BLOCK_BYTES, at most MAX_ROTATED rotated files, the
dropped count's file read up to 32 bytes.

It imports the standard library and expmgr/rotation.py alone.
"""
from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import BinaryIO, Iterator, Sequence

from expmgr.rotation import DROPPED_SUFFIX, rotated_path

BLOCK_BYTES = 1024 * 1024
"""The most read at once when streaming a file forward."""
BACK_BLOCK_BYTES = 64 * 1024
"""The most read at once when looking backwards for the start of the last lines."""
MAX_ROTATED = 1000
"""Rotated files beyond ``NAME.1000`` are not looked at (a trial could make millions)."""
_DROPPED_MAX_CHARS = 32


class RefusedFile(Exception):
    """A log file (or a folder on its way) that is a symlink, or not a regular file: a FIFO,
    a device, a folder. It is not opened: reading it could leave the experiment's folder,
    or block forever."""


@dataclass(frozen=True)
class KeptFile:
    """One file of a log, as listed."""

    index: int
    """0 for the current file ``NAME``, ``j`` for the rotated file ``NAME.j``."""
    inode: int
    size: int
    """Its size when listed (a symlink's own size for one)."""
    regular: bool
    """A regular file; anything else (a symlink, a FIFO) is refused when opened."""


@dataclass(frozen=True)
class Listing:
    """A log's kept files, oldest first (the current file last, when it exists), and how
    many bytes rotation deleted before them (``NAME.dropped``)."""

    files: tuple[KeptFile, ...]
    dropped: int

    @property
    def rotated(self) -> int:
        """How many rotated files are kept."""
        return sum(1 for kept in self.files if kept.index > 0)

    @property
    def current(self) -> KeptFile | None:
        return self.files[-1] if self.files and self.files[-1].index == 0 else None

    def base(self, position: int) -> int:
        """How many bytes of the log came before ``files[position]``: what rotation deleted
        and the kept files before it. Constant for a file while the writer's count of
        deleted bytes is right; it is written after the files are renamed, so a listing made
        in between counts too little (the count is read first, so never too much): use it
        to tell files apart and for notices, not to place bytes."""
        return self.dropped + sum(kept.size for kept in self.files[:position])

    def find(self, inode: int, base: int | None = None, read: int = 0) -> int | None:
        """Where the file of ``inode`` is in ``files``; None when it is not kept (anymore).
        With the ``base`` a reader was told for it and the bytes it ``read`` of it: None too
        when the file listed with that inode starts further on in the log, a newer file that
        was given the inode of a deleted one."""
        position = next((position for position, kept in enumerate(self.files) if kept.inode == inode), None)
        if position is not None and base is not None and self.base(position) > base + read:
            return None
        return position

    def resume(self, at: int) -> int:
        """Where a reader ``at`` bytes into the log goes on when the file it read was
        rotated away: the first kept file that starts there or later (the last file when
        none does). A rotation deletes the oldest files first, so every file after the
        deleted one is still kept, or was deleted too."""
        return next((position for position in range(len(self.files)) if self.base(position) >= at),
                    len(self.files) - 1)


@dataclass(frozen=True)
class LogFile:
    """A log below a folder the reader trusts (``root``), read without following a
    symlink at or below that folder."""

    root: Path
    relative: PurePath

    @property
    def path(self) -> Path:
        return self.root / self.relative

    @property
    def name(self) -> str:
        return self.relative.name

    def file_name(self, index: int) -> str:
        """The name of its current file (0) or of its rotated file ``index``."""
        return self.name if index == 0 else rotated_path(Path(self.name), index).name

    def open(self, index: int = 0) -> BinaryIO:
        """Its current file (0) or its rotated file ``index``, opened for reading;
        FileNotFoundError when it does not exist, RefusedFile when it (or a folder on the
        way) is a symlink, or not a regular file."""
        folder = self._open_folder()
        try:
            return _open_regular(folder, self.file_name(index), self.relative.parent / self.file_name(index))
        finally:
            os.close(folder)

    def open_kept(self, kept: KeptFile) -> BinaryIO | None:
        """The file ``kept`` names, opened; None when its name holds another file by now
        (a rotation moved it, or it is gone): list again. RefusedFile as ``open``."""
        try:
            file = self.open(kept.index)
        except FileNotFoundError:
            return None
        if os.fstat(file.fileno()).st_ino != kept.inode:
            file.close()
            return None
        return file

    def listing(self) -> Listing:
        """Its kept files and the bytes rotation deleted; empty when its folder does not
        exist. The current file is looked at first and the rotated ones from the newest,
        the order opposite to a rotation's renames: a file being renamed meanwhile is seen
        (once or twice: it is counted once), never missed. RefusedFile for a symlinked folder."""
        try:
            folder = self._open_folder()
        except FileNotFoundError:
            return Listing((), 0)
        try:
            # The deleted bytes first: a rotation in between then makes bases too small, never too large.
            dropped = _read_dropped(folder, self.name + DROPPED_SUFFIX)
            found = [kept for kept in [_stat_at(folder, self.name, 0)] if kept is not None]
            missing = 0
            for index in range(1, MAX_ROTATED + 1):
                kept = _stat_at(folder, self.file_name(index), index)
                if kept is None:
                    # A rotation renames NAME.j to NAME.j+1 before NAME.j-1 to NAME.j: one
                    # name may be missing for a moment; two in a row end the files.
                    missing += 1
                    if missing == 2:
                        break
                    continue
                missing = 0
                found.append(kept)
        finally:
            os.close(folder)
        unique: dict[int, KeptFile] = {}
        for kept in sorted(found, key=lambda kept: -kept.index if kept.index else float("inf")):
            unique.setdefault(kept.inode, kept)  # oldest first: a file seen twice keeps its older place
        return Listing(tuple(unique.values()), dropped)

    def dropped(self) -> int:
        """The bytes rotation deleted, as ``listing().dropped`` (0 when its folder does not exist)."""
        try:
            folder = self._open_folder()
        except FileNotFoundError:
            return 0
        try:
            return _read_dropped(folder, self.name + DROPPED_SUFFIX)
        finally:
            os.close(folder)

    def stat(self) -> tuple[int, int] | None:
        """The current file's (inode, size), without following a symlink at its name; None
        when it does not exist. A cheap check for whoever follows it."""
        try:
            status = os.lstat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return status.st_ino, status.st_size

    def _open_folder(self) -> int:
        """The descriptor of the folder the log is in, reached from ``root`` one folder at a time."""
        parts = self.relative.parts
        if not parts or any(part in ("", ".", "..") or "/" in part for part in parts):
            raise RefusedFile(f"{self.relative}: not a file name inside the experiment's folder")
        folder = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for part in parts[:-1]:
                try:
                    opened = os.open(part, os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=folder)
                except OSError as error:
                    if error.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise RefusedFile(f"{self.relative}: refused, it is inside a symlink or "
                                          "something that is not a folder") from None
                    raise
                os.close(folder)
                folder = opened
        except BaseException:
            os.close(folder)
            raise
        return folder


def _open_regular(folder: int, name: str, shown: PurePath) -> BinaryIO:
    # O_NONBLOCK: opening a FIFO a trial put there must not block.
    try:
        descriptor = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise RefusedFile(f"{shown}: refused, it is a symlink") from None
        if error.errno == errno.ENXIO:  # a FIFO without a writer, or a socket
            raise RefusedFile(f"{shown}: refused, not a regular file") from None
        raise
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise RefusedFile(f"{shown}: refused, not a regular file")
        if status.st_nlink > 1:  # expmgr's logs have one name (rotation renames): this one may be any file's
            raise RefusedFile(f"{shown}: refused, it is a hard link (a file with {status.st_nlink} names)")
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def _stat_at(folder: int, name: str, index: int) -> KeptFile | None:
    try:
        status = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return KeptFile(index, status.st_ino, status.st_size, stat.S_ISREG(status.st_mode))


def _read_dropped(folder: int, name: str) -> int:
    """The number in ``NAME.dropped``; 0 when it is missing, not a regular file or not a number."""
    try:
        with _open_regular(folder, name, PurePath(name)) as file:
            return max(0, int(file.read(_DROPPED_MAX_CHARS).decode("ascii").strip() or 0))
    except (OSError, RefusedFile, ValueError, UnicodeDecodeError):
        return 0


@dataclass
class OpenedFile:
    """A kept file opened for reading, with the size it had when opened (what a snapshot
    reads of it), or None for one that was refused."""

    kept: KeptFile
    file: BinaryIO | None
    size: int
    refused: str | None = None
    """Why it was not opened (RefusedFile's message)."""


@dataclass
class Snapshot:
    """Every kept file of a log opened at one moment, oldest first, and its listing."""

    listing: Listing
    files: list[OpenedFile] = field(default_factory=list)

    def readable(self) -> list[tuple[BinaryIO, int]]:
        """(file, size) of the files that were opened, oldest first."""
        return [(opened.file, opened.size) for opened in self.files if opened.file is not None]

    def close(self, keep: BinaryIO | None = None) -> None:
        """Close every file but ``keep``."""
        for opened in self.files:
            if opened.file is not None and opened.file is not keep:
                opened.file.close()


def open_kept(log: LogFile, attempts: int = 20) -> Snapshot:
    """Every kept file of ``log``, opened: listed, then each opened and checked to be the
    file listed; when a rotation moved one in between, all again (``attempts`` times,
    then what was opened the last time). A symlink or FIFO among them is refused (kept
    in the snapshot with ``refused`` set); RefusedFile when the current file is one."""
    for attempt in range(attempts):
        listing = log.listing()
        snapshot = Snapshot(listing)
        moved = False
        try:
            for kept in listing.files:
                try:
                    file = log.open_kept(kept)
                except RefusedFile as refused:
                    if kept.index == 0:
                        raise
                    snapshot.files.append(OpenedFile(kept, None, 0, str(refused)))
                    continue
                if file is None:
                    moved = True
                    break
                snapshot.files.append(OpenedFile(kept, file, os.fstat(file.fileno()).st_size))
        except BaseException:
            snapshot.close()
            raise
        if not moved or attempt == attempts - 1:
            return snapshot
        snapshot.close()
    raise AssertionError("unreachable")


def last_lines_start(files: Sequence[tuple[BinaryIO, int]], count: int) -> tuple[int, int, int]:
    """Where the last ``count`` lines of ``files`` (oldest first, each read up to its size,
    as one stream) begin: ``(index in files, offset, lines)``, ``lines`` being how many
    lines there are from there (fewer than ``count`` when the files hold fewer: then it is
    the start of the first file). Reads backwards in blocks, only as far as those lines go.
    Lines end at ``\\n``; a last line without one counts as a line."""
    if not files or count <= 0:
        return (max(0, len(files) - 1), files[-1][1] if files else 0, 0)
    found = 0          # newlines before the end of the stream, from the end
    at_end = True      # the stream's last byte is not yet seen: a newline there ends a line, starts none
    any_bytes = False
    for index in range(len(files) - 1, -1, -1):
        file, end = files[index]
        while end > 0:
            begin = max(0, end - BACK_BLOCK_BYTES)
            block = os.pread(file.fileno(), end - begin, begin)
            if not block:
                break  # the file was truncated under us: what is left of it ends here
            limit = len(block)
            if at_end:
                at_end = False
                if block.endswith(b"\n"):
                    limit -= 1
            any_bytes = True
            while (newline := block.rfind(b"\n", 0, limit)) >= 0:
                found += 1
                if found == count:
                    return (index, begin + newline + 1, count)
                limit = newline
            end = begin
    return (0, 0, found + 1 if any_bytes else 0)


def read_blocks(files: Sequence[tuple[BinaryIO, int]], index: int = 0, offset: int = 0) -> Iterator[bytes]:
    """The bytes of ``files`` (oldest first, each up to its size) from ``offset`` in
    ``files[index]`` to the end of the last, in blocks of at most BLOCK_BYTES."""
    for position in range(index, len(files)):
        file, size = files[position]
        at = offset if position == index else 0
        while at < size:
            block = os.pread(file.fileno(), min(BLOCK_BYTES, size - at), at)
            if not block:
                break  # truncated under us
            at += len(block)
            yield block


def head_blocks(blocks: Iterator[bytes], count: int) -> Iterator[bytes]:
    """The first ``count`` lines of ``blocks``."""
    if count <= 0:
        return
    for block in blocks:
        at = -1
        for _ in range(count):
            at = block.find(b"\n", at + 1)
            if at < 0:
                break
            count -= 1
        if count == 0:
            yield block[:at + 1]
            return
        yield block


def last_bytes(log: LogFile, count: int) -> bytes:
    """The last ``count`` bytes of the log, across its rotated files (a rotation may just
    have started a new, short file); empty when there is none."""
    snapshot = open_kept(log)
    try:
        parts: list[bytes] = []
        wanted = count
        for file, size in reversed(snapshot.readable()):
            if wanted <= 0:
                break
            start = max(0, size - wanted)
            part = os.pread(file.fileno(), size - start, start)
            parts.append(part)
            wanted -= len(part)
        return b"".join(reversed(parts))
    finally:
        snapshot.close()
