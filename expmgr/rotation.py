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

It imports the standard library alone: trial processes use it for their trial.log.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DROPPED_SUFFIX = ".dropped"
_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC


@dataclass(frozen=True)
class RotationLimits:
    """How large a log file may grow and how many files of it are kept."""

    max_bytes: int
    """A file's size limit in bytes; 0 for no limit (never rotated)."""
    keep: int
    """Files kept, the current one included (at least 1): ``keep - 1`` rotated ones."""

    def __post_init__(self) -> None:
        if self.max_bytes < 0 or self.keep < 1:
            raise ValueError(f"rotation limits need max_bytes >= 0 and keep >= 1, got {self}")

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


def rotated_path(path: Path, index: int) -> Path:
    """The ``index``-th rotated file of ``path`` (1 is the most recent)."""
    return path.with_name(f"{path.name}.{index}")


def rotated_files(path: Path) -> list[Path]:
    """The rotated files of ``path`` that exist, the most recent first."""
    found: list[Path] = []
    index = 1
    while True:
        candidate = rotated_path(path, index)
        if not os.path.lexists(candidate):
            return found
        found.append(candidate)
        index += 1


def dropped_bytes(path: Path) -> int:
    """How many bytes of ``path``'s stream were deleted by rotations (0 if none, or unknown)."""
    try:
        return int(path.with_name(path.name + DROPPED_SUFFIX).read_text(encoding="ascii").strip() or 0)
    except (OSError, ValueError):
        return 0


def rotate(path: Path, keep: int) -> None:
    """Shift ``path`` to ``path.1`` (and older ones one further), deleting what goes beyond
    ``keep`` files and adding its size to the dropped count. A missing file is no error."""
    removed = 0
    oldest = keep - 1
    # Everything at or past the oldest place goes: a smaller `keep` than before leaves more.
    doomed = [path] if oldest == 0 else []
    index = max(oldest, 1)
    while os.path.lexists(rotated_path(path, index)):
        if index >= oldest:
            doomed.append(rotated_path(path, index))
        index += 1
    for old in doomed:
        try:
            removed += os.lstat(old).st_size
            os.unlink(old)
        except FileNotFoundError:
            pass
    for index in range(oldest - 1, 0, -1):
        try:
            os.rename(rotated_path(path, index), rotated_path(path, index + 1))
        except FileNotFoundError:
            pass
    if oldest > 0:
        try:
            os.rename(path, rotated_path(path, 1))
        except FileNotFoundError:
            pass
    if removed:
        _add_dropped(path, removed)


def _add_dropped(path: Path, count: int) -> None:
    target = path.with_name(path.name + DROPPED_SUFFIX)
    temporary = path.with_name(path.name + DROPPED_SUFFIX + ".tmp")
    try:
        temporary.write_text(str(dropped_bytes(path) + count), encoding="ascii")
        os.replace(temporary, target)
    except OSError:
        pass  # the count is for readers' notices; losing it must not stop the writer


class RotatingWriter:
    """Appends bytes to ``path``, rotating it at ``limits.max_bytes`` (see the module
    docstring). Not thread-safe: one writer per file, called from one thread at a time.
    Write errors (a full disk) are raised to the caller."""

    def __init__(self, path: Path, limits: RotationLimits, mode: int = 0o644) -> None:
        self.path = path
        self.limits = limits
        self._mode = mode
        self._fd: int | None = None
        self._size = 0

    def fileno(self) -> int:
        """The descriptor of the current file, opened if it is not yet."""
        if self._fd is None:
            self._fd = os.open(self.path, _OPEN_FLAGS, self._mode)
            self._size = os.fstat(self._fd).st_size
        return self._fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            fd = self.fileno()
            room = self.limits.max_bytes - self._size if self.limits.bounded else len(view)
            if room >= len(view):
                piece = len(view)
            elif self._size == 0:
                piece = room  # a line longer than a whole file: cut it
            else:
                cut = bytes(view[:room]).rfind(b"\n") if room > 0 else -1
                if cut < 0:
                    self.rotate()
                    continue
                piece = cut + 1
            written = os.write(fd, view[:piece])
            self._size += written
            view = view[written:]

    def rotate(self) -> None:
        """Close the current file and start a new one."""
        self._close_fd()
        rotate(self.path, self.limits.keep)

    def close(self) -> None:
        self._close_fd()

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, None
        self._size = 0
        if fd is not None:
            os.close(fd)
