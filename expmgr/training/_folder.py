"""The trial files (``files.TrialFiles``) of services whose trial folders are the manager's
own (``trials/<id>/`` under the experiment's folder): the local service, and the Ray
service, which requires a filesystem shared by every node for them; and the making of a
trial's folder at its launch."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from pathlib import Path
from typing import IO, Iterator

from expmgr import trial as trial_api
from expmgr.layout import ExperimentPaths, TrialFolder
from expmgr.logreader import LogFile
from expmgr.training.files import TRIAL_LOGS, TrialFiles, TrialFilesError, is_trial_log


class SharedTrialFolders(TrialFiles):
    """A trial's files in its folder ``trials/<id>/`` of the experiment at ``paths``, read
    where they are."""

    def __init__(self, paths: ExperimentPaths) -> None:
        self._paths = paths
        self._trials_dir = str(paths.trials_dir)
        """As a string, not pathlib: the views ask for 10,000 trials' paths in one answer."""

    def folder_of(self, trial_id: str) -> TrialFolder:
        """The trial's folder and the files in it (the services write there)."""
        return TrialFolder(self._paths.trial_dir(trial_id))

    def log(self, trial_id: str, name: str) -> LogFile:
        if not is_trial_log(name):
            raise TrialFilesError(f"a trial's log is one of {', '.join(TRIAL_LOGS)} (rank k's of a multi-node "
                                  f"trial: rank<k>.stdout, ...), not {name!r}")
        # Opened one folder at a time from the experiment's: a trial that made its folder a
        # symlink cannot have files outside it served (logreader.LogFile).
        return LogFile(self._paths.root, self._paths.trial_dir(trial_id).relative_to(self._paths.root) / name)

    def folder(self, trial_id: str) -> str:
        return f"{self._trials_dir}/{trial_id}"

    def url(self, trial_id: str, name: str | None = None) -> str:
        if name is None:
            return f"file://localhost:{self._trials_dir}/{trial_id}"
        return f"file://localhost:{self._trials_dir}/{trial_id}/{name}"

    def last_output_time(self, trial_id: str) -> float:
        """The last change of the trial's stdout, stderr or trial.log."""
        files = self.folder_of(trial_id)
        times = []
        for path in (files.stdout, files.stderr, files.trial_log):
            try:
                times.append(path.stat().st_mtime)
            except FileNotFoundError:
                pass
        return max(times, default=0.0)

    def marked_preempting(self, trial_id: str, attempt: int) -> bool:
        try:
            return self.folder_of(trial_id).preempting_marker.read_text(encoding="utf-8").strip() == str(attempt)
        except (FileNotFoundError, UnicodeDecodeError):
            return False

    def unsent_reports(self, trial_id: str) -> Iterator[tuple[int, bytes | None]]:
        try:
            file = open(self.folder_of(trial_id).metrics, "rb")
        except FileNotFoundError:
            return
        with file:
            yield from enumerate(_bounded_lines(file, trial_api.MAX_REPORT_BYTES), start=1)

    def note_skipped(self, trial_id: str, line_number: int, reason: str) -> str:
        files = self.folder_of(trial_id)
        message = f"{files.metrics}:{line_number}: report skipped: {reason}"
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        try:  # one O_APPEND write, as the trial's own lines are
            descriptor = os.open(files.trial_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(descriptor, f"[{stamp}] WARNING (expmgr.engine) {message}\n".encode())
            finally:
                os.close(descriptor)
        except OSError:
            pass  # the experiment's log has it
        return message

    def checkpoint_dir(self, trial_id: str) -> str:
        return str(self.folder_of(trial_id).checkpoint_dir)

    async def copy_checkpoint(self, source_trial: str, target_trial: str) -> None:
        source_dir = self.folder_of(source_trial).checkpoint_dir
        if source_dir.is_dir():
            await asyncio.to_thread(shutil.copytree, source_dir, self.folder_of(target_trial).checkpoint_dir)


def prepare_folder(files: TrialFolder, parameter_record: dict) -> None:
    """The trial's folder, with its parameter.json written at its first attempt (a later
    attempt, or a resume, finds it: a trial's parameters never change)."""
    files.root.mkdir(parents=True, exist_ok=True)
    content = json.dumps(parameter_record).encode("utf-8")
    try:
        # Written in place, not renamed into place: creating a file is most of the cost here
        # (0.4 ms of CPU on some disks, at every launch), so one is made, not two.
        descriptor = os.open(files.parameter_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    except FileExistsError:
        if _whole_json(files.parameter_file):
            return
        # Torn: its manager died while writing it, before the trial could start. Written
        # again, renamed into place now, as the trial's record has it.
        partial = files.parameter_file.with_name(files.parameter_file.name + ".partial")
        partial.write_bytes(content)
        os.replace(partial, files.parameter_file)
        return
    with os.fdopen(descriptor, "wb") as file:
        file.write(content)


def _whole_json(path: Path) -> bool:
    """Whether ``path`` holds a whole JSON document: a part of one (a write cut short, a
    file the disk had not filled yet) never is one."""
    try:
        json.loads(path.read_bytes())
        return True
    except ValueError:  # not UTF-8 or not JSON
        return False


def _bounded_lines(file: IO[bytes], limit: int) -> Iterator[bytes | None]:
    """The lines of a binary file, each at most ``limit`` bytes (newline aside); a longer
    one is read past and given as None, so a huge line costs no memory."""
    while True:
        line = file.readline(limit + 2)
        if not line:
            return
        if len(line.rstrip(b"\r\n")) > limit:
            while not line.endswith(b"\n"):
                line = file.readline(1 << 16)
                if not line:
                    break
            yield None
        else:
            yield line
