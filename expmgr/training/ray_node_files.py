"""The trial slot's side of the Ray service without a shared folder (``storagePath`` set): each
attempt's folder is the node's own, ``<driver's temp dir>/expmgr-<experiment id>/<trial id>`` there,
and what the manager needs of it goes back through the slot::

    files = NodeTrialFiles()
    folder = await files.prepare(spec)                  # parameter.json, the stored checkpoint
    ... the trial runs there ...
    await files.finish(trial_id, attempt)               # its checkpoint uploaded; output ends here
    answer = await files.take(trial_id, attempt, 10.0)  # the driver's long poll (TrialSlot.take_output)

Output is read from the node's files by offset (``host_agent.FileTail``, as the remote host
agent reads them), a bounded share per call: the slot holds no trial bytes between calls, so a
slow driver never blocks the trial nor grows the slot; the node's files are the truth and the
driver catches up from them (past one rotation of a node's file between two calls, the
rotated-away middle is not sent). Once an attempt ended and everything it wrote was taken, the
last answer says ``done`` (with the preempting marker) and its folder is removed.

The driver names the folder (``ray_files.node_local_folder``) and sends it in the spec.
"""
from __future__ import annotations

import asyncio
import errno
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from expmgr.layout import TrialFolder
from expmgr.training._folder import prepare_folder
from expmgr.training.remote.host_agent import STREAMED_FILES, FileTail

MAX_TAKE_BYTES = 1024 * 1024
"""Bytes of output in one answer to the driver, at most (so in the slot's memory at once)."""
CHUNK_BYTES = 256 * 1024
"""Bytes of one file in one piece of an answer."""
POLL_INTERVAL = 0.1
"""Seconds between two looks at a running trial's files while the driver waits for output."""


class CheckpointRestoreError(OSError):
    """The trial's stored checkpoint could not be brought to the node (the store's trouble:
    a system error, the attempt waits and runs again)."""


@dataclass(eq=False)
class _Attempt:
    folder: TrialFolder
    storage: Any
    tails: dict[str, FileTail]
    ended: asyncio.Event = field(default_factory=asyncio.Event)


class NodeTrialFiles:
    """The node-local folders of one slot's attempts; see the module docstring."""

    def __init__(self) -> None:
        self._attempts: dict[tuple[str, int], _Attempt] = {}

    async def prepare(self, spec: dict[str, Any]) -> TrialFolder:
        """The attempt's folder on this node: parameter.json written, the trial's stored
        checkpoint downloaded (CheckpointRestoreError if that fails), its files' tails opened
        before the trial can write."""
        trial_id, attempt = spec["trial_id"], spec["attempt"]
        folder = TrialFolder(Path(spec["node_dir"]))
        prepare_folder(folder, spec["parameters"])
        storage = spec["storage"]
        try:
            await asyncio.to_thread(storage.download, trial_id, folder.checkpoint_dir)
        except Exception as error:  # StorageError, or whatever the store's library raised
            shutil.rmtree(folder.root, ignore_errors=True)
            raise CheckpointRestoreError(errno.EIO, f"cannot restore trial {trial_id}'s checkpoint from "
                                                    f"{storage.describe()}: {error}") from None
        tails = {}
        for name in STREAMED_FILES:
            path = folder.root / name
            path.touch()
            tails[name] = FileTail(str(path), path.stat().st_size)  # from where an earlier attempt here ended
        self._attempts[(trial_id, attempt)] = _Attempt(folder, storage, tails)
        return folder

    async def finish(self, trial_id: str, attempt: int) -> None:
        """The attempt exited and its output is in its files: its checkpoint goes to the store
        (a failure is told in its trial.log, which the manager then gets); the output ends here."""
        running = self._attempts.get((trial_id, attempt))
        if running is None:
            return
        checkpoint = running.folder.checkpoint_dir
        if checkpoint.is_dir():
            try:
                await asyncio.to_thread(running.storage.upload, trial_id, checkpoint)
            except Exception as error:
                stamp = time.strftime("%Y-%m-%d %H:%M:%S")
                with open(running.folder.trial_log, "a", encoding="utf-8") as log:
                    log.write(f"[{stamp}] ERROR (expmgr.ray) the checkpoint was not saved to "
                              f"{running.storage.location(trial_id)}: {error}\n")
        running.ended.set()

    async def take(self, trial_id: str, attempt: int, timeout: float) -> dict[str, Any]:
        """``{"chunks": [(file, offset, bytes)], "done": bool, "preempting": str | None}``:
        what the attempt wrote since the last call, up to ``MAX_TAKE_BYTES``, as soon as there
        is some (or nothing after ``timeout`` seconds); ``done`` once it ended and all of it
        was taken (its folder is then removed)."""
        running = self._attempts.get((trial_id, attempt))
        if running is None:
            return {"chunks": [], "done": True, "preempting": None}
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            ended = running.ended.is_set()  # before reading: what it wrote before its end is read now
            chunks = self._read(running)
            if chunks or not ended and asyncio.get_running_loop().time() >= deadline:
                return {"chunks": chunks, "done": False, "preempting": None}
            if ended:
                return {"chunks": [], "done": True, "preempting": self._remove(trial_id, attempt)}
            try:
                await asyncio.wait_for(running.ended.wait(), POLL_INTERVAL)
            except asyncio.TimeoutError:
                pass

    @staticmethod
    def _read(running: _Attempt) -> list[tuple[str, int, bytes]]:
        chunks: list[tuple[str, int, bytes]] = []
        budget = MAX_TAKE_BYTES
        for name, tail in running.tails.items():
            while budget > 0:
                data = tail.read(min(CHUNK_BYTES, budget))
                if not data:
                    break
                chunks.append((name, tail.sent, data))
                tail.sent += len(data)
                budget -= len(data)
        return chunks

    def _remove(self, trial_id: str, attempt: int) -> str | None:
        """End the attempt here: its preempting marker, and its folder removed."""
        running = self._attempts.pop((trial_id, attempt))
        for tail in running.tails.values():
            tail.close()
        try:
            marker: str | None = running.folder.preempting_marker.read_text(encoding="utf-8")[:64]
        except (OSError, UnicodeDecodeError):
            marker = None
        shutil.rmtree(running.folder.root, ignore_errors=True)
        return marker

    def discard(self, trial_id: str, attempt: int) -> None:
        """The attempt did not start after all: its folder is removed (nothing if not here)."""
        if (trial_id, attempt) in self._attempts:
            self._remove(trial_id, attempt)
