"""The hybrid training service (NNI's ``trainingService: [{platform: local}, {platform: remote, ...}]``):
several training services that together fill the experiment's trial slots, seen by the
runner as one. Generic over its members: it starts and stops them all, gives each new
trial to one with room, and routes each trial's signals to the member running it::

    hybrid = HybridTrainingService([local, remote], names=["trainingService[0] (local)",
                                                          "trainingService[1] (remote)"])
    await hybrid.start()               # every member; one that cannot start: all stopped, one line naming it
    await hybrid.launch(trial)         # on the next member with room, round-robin
    hybrid.signal(trial.trial_id, signal.SIGTERM)    # to the member running it

Each member tells the runner what becomes of its trials itself: they are built with the
runner as their ``TrialEvents`` listener, so each trial's events (and the host it runs on)
reach the runner as that member tells them, in the order ``TrialEvents`` states.
"""
from __future__ import annotations

import asyncio
import signal as signals
from typing import Iterable, Sequence

from expmgr.logreader import LogFile
from expmgr.training.base import SystemLaunchError, TrainingService, TrainingServiceError, TrialLaunch
from expmgr.training.files import TrialFiles


class HybridTrainingService(TrainingService):
    """Its ``members`` as one service; see the module docstring. ``names`` say which member
    a message is about (the config's ``trainingService[i] (platform)``)."""

    def __init__(self, members: Sequence[TrainingService], names: Sequence[str] | None = None) -> None:
        if not members:
            raise TrainingServiceError("a hybrid training service needs at least one training service")
        self.members = tuple(members)
        self.names = tuple(names) if names is not None else tuple(f"trainingService[{index}]"
                                                                   for index in range(len(members)))
        if len(self.names) != len(self.members):
            raise TrainingServiceError(f"{len(self.names)} name(s) for {len(self.members)} training services")
        # Readers of a stored experiment read one TrialFiles for every member (``trial_files``
        # refuses a list whose members' files differ); while it runs, what only the member
        # knows (a checkpoint on a remote host) is asked of the member that ran the trial.
        self.files = _MembersTrialFiles(self)
        self._runs_on: dict[str, TrainingService] = {}
        """The member each trial's latest attempt was given to (kept after it ends: a member
        answers for its own ended trials, as a service does)."""
        self._next = 0
        """Where the round-robin looks first for the next launch."""
        self._running = False
        """Every member started, and the hybrid is not stopped: only then is there room."""

    async def start(self) -> None:
        """Start every member at once (a remote one may take seconds to connect). If one
        cannot start, all are stopped and a TrainingServiceError names the first that could
        not, in one line: the experiment ends in ERROR with it before any trial."""
        results = await asyncio.gather(*(member.start() for member in self.members), return_exceptions=True)
        failures = [(name, result) for name, result in zip(self.names, results) if isinstance(result, BaseException)]
        if not failures:
            self._running = True
            return
        await self.stop(grace_period=0)   # nothing ran yet: what the others started ends now
        name, failure = failures[0]
        if isinstance(failure, TrainingServiceError):
            raise TrainingServiceError(f"{name}: {failure}") from failure
        # A bug of ours: its traceback (chained below this) is the experiment's error.
        raise RuntimeError(f"{name} failed to start") from failure

    def has_capacity(self) -> bool:
        return self._running and any(member.has_capacity() for member in self.members)

    def waiting_reason(self) -> str | None:
        """The members' reasons, each named; None when none has one (trials then wait to be
        created until a member has room, as for a service without reasons)."""
        reasons = [f"{name}: {reason}" for name, member in zip(self.names, self.members)
                   if not member.has_capacity() and (reason := member.waiting_reason()) is not None]
        return " | ".join(reasons) or None

    async def launch(self, trial: TrialLaunch) -> None:
        """Launch on the next member with room after the last one given a trial (round-robin).
        Not in list order: a member whose room only ``trialConcurrency`` bounds (local
        without GPUs) always has room, so the list's first would take every trial and the
        others none; NNI spreads trials over its services too (at random among those with
        room). A member whose launch fails with a SystemLaunchError is passed over at the
        runner's next try, which goes to the next member."""
        count = len(self.members)
        for offset in range(count):
            index = (self._next + offset) % count
            member = self.members[index]
            if member.has_capacity():
                self._next = (index + 1) % count
                await member.launch(trial)
                self._runs_on[trial.trial_id] = member   # launch() returned: its events come from member
                return
        raise SystemLaunchError(f"cannot start trial {trial.trial_id}: none of the training services has room "
                                f"for it ({', '.join(self.names)})")

    def signal(self, trial_id: str, signum: int) -> bool:
        member = self._runs_on.get(trial_id)
        return member is not None and member.signal(trial_id, signum)

    async def stop(self, grace_period: float, signum: int = signals.SIGTERM) -> None:
        """Stop every member at once (each gives its trials the same grace period); all are
        stopped even when one raises, then the first error is raised."""
        self._running = False
        results = await asyncio.gather(*(member.stop(grace_period, signum) for member in self.members),
                                       return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    def manager_host(self) -> str:
        """The first member's: the runner puts one manager address in every trial's
        environment (``engine.launching.trial_launch``) and the factory builds every member
        with the same one (the server's local address); a member whose trials reach the
        manager another way changes it itself (remote: a port forwarded to the host's
        loopback, ``remote.agent_client.host_trial_environment``)."""
        return self.members[0].manager_host()

    def end_leftover(self, trial_id: str, pid: int, pid_started: float) -> bool:
        """Asked of each member until one ends it: a process of this machine is found by pid
        and start time (local); a member whose trials run elsewhere answers False (their
        watchdogs there ended them with the manager's connection)."""
        return any(member.end_leftover(trial_id, pid, pid_started) for member in self.members)

    def adopt(self, trial_id: str, attempt: int, pid: int, pid_started: float) -> bool:
        return any(member.adopt(trial_id, attempt, pid, pid_started) for member in self.members)

    def end_adoption(self) -> None:
        for member in self.members:
            member.end_adoption()

    def manager_gone_at(self) -> float | None:
        return min((gone for member in self.members if (gone := member.manager_gone_at()) is not None),
                   default=None)


class _MembersTrialFiles(TrialFiles):
    """A running hybrid's trial files: each trial's are its member's (the member its latest
    attempt was given to; the first member's for a trial not given to one yet, or not since a
    resume, which read the same ``trials/<id>/`` as the others)."""

    def __init__(self, hybrid: HybridTrainingService) -> None:
        self._hybrid = hybrid

    def _of(self, trial_id: str) -> TrialFiles:
        return self._hybrid._runs_on.get(trial_id, self._hybrid.members[0]).files

    def log(self, trial_id: str, name: str) -> LogFile:
        return self._of(trial_id).log(trial_id, name)

    def folder(self, trial_id: str) -> str:
        return self._of(trial_id).folder(trial_id)

    def url(self, trial_id: str, name: str | None = None) -> str:
        return self._of(trial_id).url(trial_id, name)

    def last_output_time(self, trial_id: str) -> float:
        return self._of(trial_id).last_output_time(trial_id)

    def marked_preempting(self, trial_id: str, attempt: int) -> bool:
        return self._of(trial_id).marked_preempting(trial_id, attempt)

    def unsent_reports(self, trial_id: str) -> Iterable[tuple[int, bytes | None]]:
        return self._of(trial_id).unsent_reports(trial_id)

    def note_skipped(self, trial_id: str, line_number: int, reason: str) -> str:
        return self._of(trial_id).note_skipped(trial_id, line_number, reason)

    def checkpoint_dir(self, trial_id: str) -> str:
        return self._of(trial_id).checkpoint_dir(trial_id)

    async def copy_checkpoint(self, source_trial: str, target_trial: str) -> None:
        # Where the source's checkpoint is: its member copies it (a remote one on its host).
        await self._of(source_trial).copy_checkpoint(source_trial, target_trial)
