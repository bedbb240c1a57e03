"""The manager's copies of a trial's files when the trial runs where the manager cannot see
(a remote host, a Ray node without a shared folder): the chunks its node sends are appended to
``trials/<id>/``'s stdout, stderr, trial.log and metrics.jsonl, in order per file, so the
readers (``files.TrialFiles``) read them as a local trial's::

    copies = OutputCopies(files.folder_of(trial_id), log_limits, warn=log.warning)
    copies.write("stdout", offset, chunk)     # ValueError on a gap or a repeat
    copies.write_preempting("2")              # trial.mark_preempting()'s marker
    copies.close()

The logs are rotated by the experiment's log limits as a local trial's are; metrics.jsonl never
is (its line numbers are how the runner knows which reports it stored). A file that cannot be
written is warned about once; what comes for it is then dropped here (the node keeps its own).
"""
from __future__ import annotations

from typing import Callable

from expmgr.layout import TrialFolder
from expmgr.rotation import UNBOUNDED, RotatingWriter, RotationLimits
from expmgr.training.remote.host_agent import STREAMED_FILES

PREEMPTING_BYTES = 64
_REPORTS = "metrics.jsonl"


class OutputCopies:
    """One attempt's copies; see the module docstring. ``warn(message)``: once per failing file."""

    def __init__(self, folder: TrialFolder, limits: RotationLimits = UNBOUNDED,
                 warn: Callable[[str], None] = lambda message: None) -> None:
        self.folder = folder
        self._warn = warn
        # Appended (what earlier attempts wrote stays) and bounded as a local trial's output is.
        self.files = {name: RotatingWriter(folder.root / name, UNBOUNDED if name == _REPORTS else limits)
                      for name in STREAMED_FILES}
        self.received: dict[str, int] = dict.fromkeys(STREAMED_FILES, 0)
        """Bytes of each file received: the next chunk's offset."""
        self.failed_files: set[str] = set()

    def write(self, name: str, offset: int, chunk: bytes) -> None:
        """Append ``chunk``, which starts at ``offset`` of the attempt's ``name``; ValueError
        for another file or an offset that is not the next one (the sender's fault)."""
        if name not in self.files:
            raise ValueError(f"{name!r} is not a streamed file ({', '.join(STREAMED_FILES)})")
        expected = self.received[name]
        if offset != expected:  # in order per file: a gap or a repeat is the sender's fault
            raise ValueError(f"{name} chunk at offset {offset}, expected {expected}")
        self.received[name] = expected + len(chunk)
        try:
            self.folder.root.mkdir(parents=True, exist_ok=True)
            self.files[name].write(chunk)
        except OSError as error:
            if name not in self.failed_files:
                self.failed_files.add(name)
                self._warn(f"cannot write {self.folder.root / name} here: {error}; the trial's output there "
                           "is lost here")

    def write_preempting(self, marker: object) -> None:
        """The node's ``preempting`` marker (``TrialFiles.marked_preempting``); anything but a
        short string is ignored."""
        if not isinstance(marker, str) or len(marker) > PREEMPTING_BYTES:
            return
        try:
            self.folder.root.mkdir(parents=True, exist_ok=True)
            self.folder.preempting_marker.write_text(marker, encoding="utf-8")
        except OSError as error:
            self._warn(f"cannot copy the preempting marker to {self.folder.preempting_marker}: {error}")

    def close(self) -> None:
        for writer in self.files.values():
            writer.close()
