"""The remote service's trial files (``files.TrialFiles``): the manager's copies in
``trials/<id>/`` (each host's agent sends its trials' output as it is written, and its client
writes it there), read as the local service's; and the checkpoints, which stay on the host a
trial ran on. Readers of a stored experiment (``expctl log``, the server) read the local
copies with the plain ``SharedTrialFolders`` (``PLATFORMS``' remote row); the running service
builds this one and gives it its hosts (``attach``)::

    files = RemoteTrialFiles(paths)
    files.attach(checkpoints)              # checkpoint_dir/copy_checkpoint on the hosts
"""
from __future__ import annotations

from typing import Protocol

from expmgr.training._folder import SharedTrialFolders


class HostCheckpoints(Protocol):
    """Where the trials' checkpoints are: the running service's answer."""

    def checkpoint_dir(self, trial_id: str) -> str | None: ...

    async def copy_checkpoint(self, source_trial: str, target_trial: str) -> None: ...


class RemoteTrialFiles(SharedTrialFolders):
    """See the module docstring."""

    _checkpoints: HostCheckpoints | None = None

    def attach(self, checkpoints: HostCheckpoints) -> None:
        self._checkpoints = checkpoints

    def checkpoint_dir(self, trial_id: str) -> str:
        """On the host the trial runs or last ran on (else the first connected one); without
        the service, or with no host, the local copy's (which the agents never write)."""
        found = self._checkpoints.checkpoint_dir(trial_id) if self._checkpoints is not None else None
        return found if found is not None else super().checkpoint_dir(trial_id)

    async def copy_checkpoint(self, source_trial: str, target_trial: str) -> None:
        if self._checkpoints is not None:
            await self._checkpoints.copy_checkpoint(source_trial, target_trial)
        else:
            await super().copy_checkpoint(source_trial, target_trial)
