"""Reading an experiment's growing log files by byte offset, for the REST ``tail`` route
and the files a websocket client follows::

    path = log_file(paths, store, "stdout", trial_id)   # TailError for an unknown name or trial
    tail = read_tail(path, offset=-4096)                # the last 4 KiB
    more = read_tail(path, tail.next)                    # what was appended since
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from expmgr.layout import ExperimentPaths, TrialFiles
from expmgr.manager.store import ExperimentStore

TRIAL_FILES = ("stdout", "stderr", "trial.log")
EXPERIMENT_FILES = ("experiment.log", "dispatcher.log")
MAX_BYTES = 256 * 1024
"""The most one read returns."""


class TailError(Exception):
    """A file that cannot be named (``status`` 400) or a trial that does not exist (404)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


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


def log_file(paths: ExperimentPaths, store: ExperimentStore, which: str, trial_id: str | None) -> Path:
    """The file named ``which``: a trial's ``stdout``, ``stderr`` or ``trial.log`` (with
    ``trial_id``), or the experiment's ``experiment.log`` or ``dispatcher.log``."""
    if which in TRIAL_FILES:
        if not trial_id:
            raise TailError(400, f"trial: {which} is a trial's file; name the trial")
        if store.trial(trial_id) is None:
            raise TailError(404, f"no trial {trial_id!r}")
        files = TrialFiles(paths.trial_dir(trial_id))
        return {"stdout": files.stdout, "stderr": files.stderr, "trial.log": files.trial_log}[which]
    if which in EXPERIMENT_FILES:
        return paths.experiment_log if which == "experiment.log" else paths.dispatcher_log
    raise TailError(400, f"file: expected one of {', '.join(TRIAL_FILES + EXPERIMENT_FILES)}, got {which!r}")


def read_tail(path: Path, offset: int, max_bytes: int = MAX_BYTES) -> Tail:
    """Read from ``offset`` (from 0 if the file is now shorter: it was truncated; the last
    ``-offset`` bytes if negative), at most ``max_bytes``, never splitting a character."""
    try:
        with open(path, "rb") as file:
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
