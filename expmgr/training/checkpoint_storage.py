"""Where the Ray service keeps trials' checkpoints when no folder is shared (``storagePath``):
a folder, one per trial, under ``<storagePath>/<experiment id>/``. Every call blocks (run it
in a thread)::

    storage = CheckpointStorage("/mnt/store", experiment_id)
    storage.upload(trial_id, local_dir)      # mirror the node's folder to the store
    storage.download(trial_id, local_dir)    # False: nothing stored yet

A STUB for local absolute paths only (shutil); the full module (pyarrow.fs, S3) replaces it.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


class StorageError(Exception):
    """The store cannot be reached, read or written."""


def check_storage_path(value: str) -> str | None:
    """None if ``value`` is a well-formed storage path, else what is wrong with it."""
    if not isinstance(value, str) or not value:
        return "expected an absolute path or an s3:// URI"
    if value.startswith("s3://"):
        return "s3:// is not supported by this build (local absolute paths only)"
    if not os.path.isabs(value):
        return f"{value!r} is not an absolute path (or an s3:// URI)"
    return None


class CheckpointStorage:
    """See the module docstring. Picklable: sent to the nodes."""

    def __init__(self, uri: str, experiment_id: str) -> None:
        self.uri = uri
        self.experiment_id = experiment_id

    def describe(self) -> str:
        return f"{self.uri}/{self.experiment_id}"

    def location(self, trial_id: str) -> str:
        return str(Path(self.uri) / self.experiment_id / trial_id)

    def upload(self, trial_id: str, local_dir: Path) -> None:
        target = Path(self.location(trial_id))
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{trial_id}.", dir=target.parent))
            shutil.copytree(local_dir, staging, dirs_exist_ok=True, symlinks=True)
            if target.exists():
                shutil.rmtree(target)
            os.replace(staging, target)
        except OSError as error:
            raise StorageError(f"cannot upload to {target}: {error}") from error

    def download(self, trial_id: str, local_dir: Path) -> bool:
        source = Path(self.location(trial_id))
        if not source.is_dir():
            return False
        try:
            shutil.copytree(source, local_dir, dirs_exist_ok=True, symlinks=True)
        except OSError as error:
            raise StorageError(f"cannot download {source}: {error}") from error
        return True

    def copy(self, source_trial: str, target_trial: str) -> bool:
        source = Path(self.location(source_trial))
        if not source.is_dir():
            return False
        self.upload(target_trial, source)
        return True

    def check_writable(self) -> None:
        folder = Path(self.uri) / self.experiment_id
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe = folder / f".write-probe-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as error:
            raise StorageError(f"cannot write to {folder}: {error.strerror or error}") from error
