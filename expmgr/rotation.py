"""Log files bounded in size: the one place that knows how a log is rotated, for those
that write one (the logging handlers, a trial's output pump, the daemon) and those that
read one (``expctl log``, the server's tails)::

    writer = RotatingWriter(Path("trials/Ab3/stdout"), RotationLimits(100 * 2**20, keep=5))
    writer.write(b"epoch 1\\n")       # past 100 MiB, stdout becomes stdout.1 and a new stdout starts
    writer.close()
    rotated_files(Path("trials/Ab3/stdout"))   # [stdout.1, stdout.2, ...], newest first
    dropped_bytes(Path("trials/Ab3/stdout"))   # what left the last kept file for good

A file that reaches ``max_bytes`` is renamed ``NAME.1`` (``NAME.1`` becomes ``NAME.2`` and
so on) and a new ``NAME`` is started; of the rotated files, ``keep - 1`` are kept, the
current one counting as the first of ``keep``. What goes beyond is deleted and its size
added to ``NAME.dropped`` (a decimal number of bytes, replaced atomically), so that readers
can say that earlier output was rotated away and how much. A rotation never splits a line
that fits in a file: the file is closed at the last newline that fits.

It imports ``os`` alone (``pathlib`` only where a reader asks for paths): trial processes
use it for their trial.log, and pay little for it.
"""
from __future__ import annotations

import errno
import os
import stat

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy takes it as True
if TYPE_CHECKING:
    from pathlib import Path

    StrPath = str | os.PathLike[str]

DROPPED_SUFFIX = ".dropped"
_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC


class RotationLimits:
    """How large a log file may grow and how many files of it are kept (immutable)."""

    __slots__ = ("max_bytes", "keep")
    max_bytes: int
    """A file's size limit in bytes; 0 for no limit (never rotated)."""
    keep: int
    """Files kept, the current one included (at least 1): ``keep - 1`` rotated ones."""

    def __init__(self, max_bytes: int, keep: int) -> None:
        if max_bytes < 0 or keep < 1:
            raise ValueError(f"rotation limits need max_bytes >= 0 and keep >= 1, got {max_bytes}, {keep}")
        object.__setattr__(self, "max_bytes", max_bytes)
        object.__setattr__(self, "keep", keep)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"RotationLimits is immutable; cannot set {name}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RotationLimits) and (self.max_bytes, self.keep) == (other.max_bytes, other.keep)

    def __hash__(self) -> int:
        return hash((self.max_bytes, self.keep))

    def __repr__(self) -> str:
        return f"RotationLimits(max_bytes={self.max_bytes}, keep={self.keep})"

    @property
    def bounded(self) -> bool:
        return self.max_bytes > 0

    def as_env(self) -> str:
        """``max_bytes:keep``, how a process that writes a log of its own (a trial's
        trial.log) is told the limits; :meth:`from_env` reads it back."""
        return f"{self.max_bytes}:{self.keep}"

    @classmethod
    def from_env(cls, text: str | None) -> RotationLimits | None:
        """The limits :meth:`as_env` wrote, or None when ``text`` is missing or not that."""
        if not text:
            return None
        size, _, keep = text.partition(":")
        try:
            return cls(int(size), int(keep))
        except ValueError:
            return None


UNBOUNDED = RotationLimits(0, 1)


def rotated_path(path: StrPath, index: int) -> Path:
    """The ``index``-th rotated file of ``path`` (1 is the most recent)."""
    from pathlib import Path
    return Path(_rotated(path, index))


def rotated_files(path: StrPath) -> list[Path]:
    """The rotated files of ``path`` that exist, the most recent first."""
    from pathlib import Path
    found: list[Path] = []
    index = 1
    while os.path.lexists(_rotated(path, index)):
        found.append(Path(_rotated(path, index)))
        index += 1
    return found


def dropped_bytes(path: StrPath) -> int:
    """How many bytes of ``path``'s stream were deleted by rotations (0 if none, or unknown)."""
    try:
        fd = _open_regular(os.fspath(path) + DROPPED_SUFFIX, os.O_RDONLY)
    except OSError:
        return 0
    try:
        return int(os.read(fd, 40).strip() or 0)
    except (OSError, ValueError):
        return 0
    finally:
        os.close(fd)


def _open_regular(path: str, flags: int, mode: int = 0o644) -> int:
    """``os.open`` of a regular file with one name only: a trial may put a symlink, a FIFO or
    a hard link to another file where its files go, and the writer must neither follow the
    first, block on the second nor write into the third. (Rotation only renames, so a log
    of expmgr's never has a second name.)"""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file")
        if status.st_nlink > 1:
            raise OSError(errno.EINVAL, f"{path} is a hard link (a file with {status.st_nlink} names)")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _rotated(path: StrPath, index: int) -> str:
    return f"{os.fspath(path)}.{index}"


def rotate(path: StrPath, keep: int) -> None:
    """Shift ``path`` to ``path.1`` (and older ones one further), deleting what goes beyond
    ``keep`` files and adding its size to the dropped count. A missing file is no error."""
    removed = 0
    oldest = keep - 1
    # Everything at or past the oldest place goes: a smaller `keep` than before leaves more.
    doomed = [os.fspath(path)] if oldest == 0 else []
    index = max(oldest, 1)
    while os.path.lexists(_rotated(path, index)):
        doomed.append(_rotated(path, index))
        index += 1
    for old in doomed:
        try:
            removed += os.lstat(old).st_size
            os.unlink(old)
        except FileNotFoundError:
            pass
    for index in range(oldest - 1, 0, -1):
        try:
            os.rename(_rotated(path, index), _rotated(path, index + 1))
        except FileNotFoundError:
            pass
    if oldest > 0:
        try:
            os.rename(path, _rotated(path, 1))
        except FileNotFoundError:
            pass
    if removed:
        _add_dropped(path, removed)


def _add_dropped(path: StrPath, count: int) -> None:
    target = os.fspath(path) + DROPPED_SUFFIX
    temporary = target + ".tmp"
    try:
        total = str(dropped_bytes(path) + count).encode()
        try:
            os.unlink(temporary)  # whatever is there (a symlink a trial put): made anew below
        except FileNotFoundError:
            pass
        fd = _open_regular(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            os.write(fd, total)
        finally:
            os.close(fd)
        os.replace(temporary, target)
    except OSError:
        pass  # the count is for readers' notices; losing it must not stop the writer


class RotatingWriter:
    """Appends bytes to ``path``, rotating it at ``limits.max_bytes`` (see the module
    docstring). Not thread-safe: one writer per file, called from one thread at a time.
    Write errors (a full disk) are raised to the caller."""

    def __init__(self, path: StrPath, limits: RotationLimits, mode: int = 0o644,
                 descriptors: tuple[int, ...] = ()) -> None:
        self.path = path
        self.limits = limits
        self._mode = mode
        self._descriptors = descriptors
        """Descriptors pointed at each new file (``dup2``): a process's stdout and stderr, so
        that what it writes there without this writer goes to the current file too."""
        self._fd: int | None = None
        self._size = 0

    def fileno(self) -> int:
        """The descriptor of the current file, opened if it is not yet."""
        if self._fd is None:
            self._fd = _open_regular(os.fspath(self.path), _OPEN_FLAGS, self._mode)
            self._size = os.fstat(self._fd).st_size
            for descriptor in self._descriptors:
                os.dup2(self._fd, descriptor)
        return self._fd

    def write(self, data: bytes) -> None:
        """Write all of ``data``; OSError if a write fails (what was written before stays)."""
        view = memoryview(data)
        while view:
            view = view[self.write_some(view):]

    def write_some(self, data: bytes | memoryview) -> int:
        """Write from the start of ``data``, rotating where needed; returns how many bytes
        were written, or raises OSError if a write fails before any was."""
        view = memoryview(data)
        done = 0
        while done < len(view):
            try:
                done += self._write_piece(view[done:])
            except OSError:
                if done == 0:
                    raise
                return done
        return done

    def _write_piece(self, view: memoryview) -> int:
        fd = self.fileno()
        if self._descriptors:  # the process writes there without this writer too
            self._size = os.fstat(fd).st_size
        room = self.limits.max_bytes - self._size if self.limits.bounded else len(view)
        if room >= len(view):
            piece = len(view)
        else:
            cut = bytes(view[:room]).rfind(b"\n") if room > 0 else -1
            if cut >= 0:
                piece = cut + 1
            elif self._size == 0:
                piece = room  # a line longer than a whole file: cut it
            else:
                self.rotate()
                return 0
        written = os.write(fd, view[:piece])
        self._size += written
        return written

    def rotate(self) -> None:
        """Close the current file and start a new one."""
        self._close_fd()
        rotate(self.path, self.limits.keep)
        if self._descriptors:
            self.fileno()  # the descriptors must not go on writing into the rotated file

    def close(self) -> None:
        self._close_fd()

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, None
        self._size = 0
        if fd is not None:
            os.close(fd)


def rotate_if_full(path: StrPath, limits: RotationLimits, descriptors: tuple[int, ...], coming: int = 0) -> bool:
    """For a file that a process writes through ``descriptors`` alone (a daemon's stdout and
    stderr, ``descriptors[0]`` first): if ``coming`` more bytes would take it past
    ``limits.max_bytes``, rotate it and point the descriptors at a new file (an empty file
    is not rotated). Returns whether it rotated."""
    if not limits.bounded:
        return False
    size = os.fstat(descriptors[0]).st_size
    if size == 0 or size + coming <= limits.max_bytes:
        return False
    writer = RotatingWriter(path, limits, descriptors=descriptors)
    writer.rotate()  # opens the new file onto them
    writer.close()
    return True
