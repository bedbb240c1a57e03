"""The driver's side of the Ray service without a shared folder (``trainingService.storagePath``
set; docs/ray.md, "Without a shared folder"): no node needs to see the experiment's folder or
the trial code's folder.

- The code: the trial code folder is the job's runtime_env ``working_dir`` (Ray packs it once,
  less what ``.nniignore`` excludes, and each node unpacks it once into its cache); a slot's
  working directory is that copy, and so is its trials'.
- The output: each slot keeps its trial's folder on its node (``ray_node_files``); the driver
  long-polls ``TrialSlot.take_output`` per running attempt and appends what comes to the
  manager's ``trials/<id>/`` copies (``_output_copies``, as the remote service's client does),
  all of it before the attempt's end is told.
- The checkpoints: kept in ``storagePath`` (``checkpoint_storage``); a slot downloads the
  trial's before it starts and uploads it after it exits; a PBT exploit copies within the store.

    mode = NoSharedFolder(config.storage_path, paths, code_directory, log_limits, log)
    await mode.check()                      # TrainingServiceError naming trainingService.storagePath
    ray.init(..., runtime_env=mode.runtime_env(config.runtime_env))
    spec.update(mode.spec_fields(launch))
    await mode.follow_output(slot_actor, trial_id, attempt)
"""
from __future__ import annotations

import asyncio
import logging
import tempfile
from pathlib import Path
from typing import Any

from expmgr.layout import ExperimentPaths
from expmgr.rotation import UNBOUNDED, RotationLimits
from expmgr.training._folder import SharedTrialFolders
from expmgr.training._output_copies import OutputCopies
from expmgr.training.base import TrainingServiceError, TrialLaunch
from expmgr.training.checkpoint_storage import CheckpointStorage
from expmgr.training.remote._nniignore import CodeFolderError, ignore_patterns

_TAKE_TIMEOUT = 10.0
"""Seconds a ``take_output`` call waits for output before it answers with none."""


def node_local_folder(experiment_id: str, trial_id: str) -> Path:
    """The trial's folder on its node, as the driver names it (in the driver's temp dir, so
    that the checkpoint folder a tuner is told is the one the trial sees on any node)."""
    return Path(tempfile.gettempdir()) / f"expmgr-{experiment_id}" / trial_id


class StoredCheckpointFiles(SharedTrialFolders):
    """The trials' files: the manager's copies in ``trials/<id>/`` (read as local ones), and
    their checkpoints in the store."""

    def __init__(self, paths: ExperimentPaths, storage: CheckpointStorage) -> None:
        super().__init__(paths)
        self._storage = storage
        self._experiment_id = paths.root.name

    def checkpoint_dir(self, trial_id: str) -> str:
        """Where the trial sees it: in its folder on its node (``node_local_folder``)."""
        return str(node_local_folder(self._experiment_id, trial_id) / "checkpoint")

    async def copy_checkpoint(self, source_trial: str, target_trial: str) -> None:
        """Within the store: the target's slot downloads it before the target starts."""
        await asyncio.to_thread(self._storage.copy, source_trial, target_trial)


class NoSharedFolder:
    """See the module docstring."""

    def __init__(self, storage_path: str, paths: ExperimentPaths, code_directory: Path | None,
                 log_limits: RotationLimits = UNBOUNDED, log: logging.Logger | None = None) -> None:
        self.storage = CheckpointStorage(storage_path, paths.root.name)
        self.files = StoredCheckpointFiles(paths, self.storage)
        self._storage_path = storage_path
        self._experiment_id = paths.root.name
        self._code_directory = code_directory
        self._log_limits = log_limits
        self._log = log or logging.getLogger(__name__)

    async def check(self) -> None:
        """TrainingServiceError naming ``trainingService.storagePath`` unless the store can be written."""
        try:
            await asyncio.to_thread(self.storage.check_writable)
        except Exception as error:  # StorageError, or what the store's library raised
            raise TrainingServiceError(f"trainingService.storagePath {self._storage_path!r} cannot be written: "
                                       f"{error}") from None

    def runtime_env(self, user_env: dict[str, Any] | None) -> dict[str, Any]:
        """The job's runtime_env: the user's, with the trial code folder as its ``working_dir``
        (unless the user gave one: theirs is the trials' code then) and ``.nniignore``'s
        patterns added to its ``excludes``."""
        env = dict(user_env or {})
        if env.get("working_dir") is None and self._code_directory is not None:
            try:
                patterns = [line for line in ignore_patterns(self._code_directory)
                            if line.strip() and not line.lstrip().startswith("#")]
            except CodeFolderError as error:
                raise TrainingServiceError(str(error)) from None
            env["working_dir"] = str(self._code_directory)
            env["excludes"] = [*(env.get("excludes") or []), *patterns]
        return env

    def spec_fields(self, launch: TrialLaunch) -> dict[str, Any]:
        """What a slot needs besides the shared-folder spec: the store, the parameters, and no
        code folder of this machine (its working directory is the code's copy)."""
        return {"storage": self.storage, "node_dir": str(node_local_folder(self._experiment_id, launch.trial_id)),
                "parameters": launch.parameter_record, "code_directory": None}

    async def follow_output(self, actor: Any, trial_id: str, attempt: int) -> None:
        """Append the attempt's output, as its slot sends it, to the manager's copies, until the
        slot says all of it came (or the slot is gone: what came is kept)."""
        from ray import exceptions
        copies = OutputCopies(self.files.folder_of(trial_id), self._log_limits,
                              warn=lambda message: self._log.warning("trial %s: %s", trial_id, message))
        try:
            while True:
                try:
                    answer = await actor.take_output.remote(trial_id, attempt, _TAKE_TIMEOUT)
                except exceptions.ActorUnavailableError:
                    await asyncio.sleep(1.0)  # unreachable for now: it answers again, or it dies
                    continue
                except exceptions.RayError:
                    return  # the slot or its node is gone; the attempt's end says so
                try:
                    for name, offset, data in answer["chunks"]:
                        copies.write(name, offset, data)
                except ValueError as error:  # out of order: never from our own slot
                    self._log.warning("trial %s: its output is no longer copied here: %s", trial_id, error)
                    return
                if answer["done"]:
                    copies.write_preempting(answer["preempting"])
                    return
        finally:
            copies.close()
