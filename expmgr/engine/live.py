"""The live attempts: the table of attempts the runner started and that have not ended
(trial id -> attempt, token, reports, pid, host, why it is being stopped), and starting
and stopping them through the training service (after Ray Tune's executor, which the
controller asks to start and stop trials). It answers which attempt an event is about,
so that a late event of an attempt that ended is told apart; the runner decides::

    live = LiveAttempts(service, on_failed=handler_failed)
    live.secret = reports.load_trial_secret(paths.root)
    attempt = live.attempt(record, 1, AttemptReports(assessed=True))
    refused = await live.launch(attempt, trial_launch(record, 1, attempt.token, config, ...))
    live.stop(attempt, TrialState.EARLY_STOPPED, grace_period=30)   # SIGTERM, SIGKILL after 30 s
    ended = live.exited(trial_id)                 # its exit event: off the table
"""
from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from dataclasses import dataclass

from expmgr.engine.reports import attempt_token
from expmgr.engine.intake import AttemptReports
from expmgr.states import TrialState
from expmgr.store import AttemptRecord, TrialRecord
from expmgr.training.base import SystemLaunchError, TrainingService, TrainingServiceError, TrialLaunch


@dataclass
class LiveAttempt:
    """One attempt of a trial that was launched and has not ended, as the runner tracks it."""

    record: TrialRecord
    attempt: int
    token: str
    reports: AttemptReports
    """What the attempt reported (stored), and its history for the assessor."""
    stop_reason: TrialState | None = None
    """Why it is being stopped (it ends as this unless it ends otherwise first); None while it runs on."""
    pid: int | None = None
    host: str | None = None
    started: float | None = None
    """When its process started (wall clock), once the training service said so."""

    @property
    def trial_id(self) -> str:
        return self.record.trial_id


@dataclass(frozen=True)
class LaunchRefused:
    """The training service could not start the attempt: ``system`` when not the trial's
    fault (SystemLaunchError: it waits, launching pauses), else it FAILED."""

    reason: str
    system: bool


class LiveAttempts:
    """The attempts launched and not ended, one per trial, and their starting and stopping."""

    def __init__(self, service: TrainingService, *, on_failed: Callable[[str], None]) -> None:
        """``on_failed(name)`` is called, inside the except block, when a timer of ours raises."""
        self._service = service
        self._on_failed = on_failed
        self._live: dict[str, LiveAttempt] = {}
        self.secret = b""
        """The experiment's key for attempt tokens (reports.TRIAL_SECRET_FILE), set when the run begins."""

    def attempt(self, record: TrialRecord, attempt: int, reports: AttemptReports) -> LiveAttempt:
        """``attempt`` of ``record`` with its token (not in the table: ``launch`` puts it there)."""
        return LiveAttempt(record, attempt, attempt_token(self.secret, record.trial_id, attempt), reports)

    def __len__(self) -> int:
        return len(self._live)

    def __getitem__(self, trial_id: str) -> LiveAttempt:
        return self._live[trial_id]

    def get(self, trial_id: str) -> LiveAttempt | None:
        """The trial's live attempt, if it has one."""
        return self._live.get(trial_id)

    def current(self, trial_id: str, attempt: int) -> LiveAttempt | None:
        """The trial's live attempt if it is ``attempt`` (an event of an attempt that ended is not)."""
        live = self._live.get(trial_id)
        return live if live is not None and live.attempt == attempt else None

    def is_live(self, live: LiveAttempt) -> bool:
        """Whether ``live`` is still its trial's live attempt (not ended, nor followed by another)."""
        return self._live.get(live.trial_id) is live

    async def launch(self, live: LiveAttempt, launch: TrialLaunch) -> LaunchRefused | None:
        """Put ``live`` in the table and give ``launch`` to the training service; None when
        it took it (its start or failure comes as an event), else why it could not."""
        self._live[live.trial_id] = live
        try:
            await self._service.launch(launch)
        except SystemLaunchError as error:
            return LaunchRefused(str(error), system=True)
        except TrainingServiceError as error:
            return LaunchRefused(str(error), system=False)
        return None

    def started(self, trial_id: str, attempt: int, *, pid: int | None, host: str | None,
                at: float) -> LiveAttempt | None:
        """The attempt's process started: its live attempt (noting pid, host and time), or
        None when it is not the trial's live attempt."""
        live = self.current(trial_id, attempt)
        if live is not None:
            live.pid, live.host, live.started = pid, host, at
        return live

    def exited(self, trial_id: str) -> LiveAttempt:
        """The trial's attempt ended: off the table (KeyError for a trial with no live attempt)."""
        return self._live.pop(trial_id)

    def not_started(self, trial_id: str, attempt: int) -> LiveAttempt | None:
        """The attempt could not start: off the table, or None when it is not the live one."""
        live = self.current(trial_id, attempt)
        if live is not None:
            del self._live[trial_id]
        return live

    def stop(self, live: LiveAttempt, reason: TrialState, *, grace_period: float) -> None:
        """Stop the attempt as ``reason``: SIGTERM now, SIGKILL after ``grace_period`` s if
        that attempt still runs then."""
        live.stop_reason = reason
        self._service.signal(live.trial_id, signal.SIGTERM)
        asyncio.get_running_loop().call_later(grace_period, self._kill_if_alive, live.trial_id, live.attempt)

    def _kill_if_alive(self, trial_id: str, attempt: int) -> None:
        try:
            if self.current(trial_id, attempt) is not None:
                self._service.signal(trial_id, signal.SIGKILL)
        except Exception:
            self._on_failed("_kill_if_alive")

    async def stop_all(self, reason: TrialState, *, grace_period: float, signum: int) -> None:
        """Stop every attempt (those not stopped already for a reason of theirs end as
        ``reason``): ``signum`` now, SIGKILL after ``grace_period`` s (the training service's)."""
        for live in self._live.values():
            live.stop_reason = live.stop_reason or reason
        await self._service.stop(grace_period, signum)

    def adopt(self, live: LiveAttempt, attempt: AttemptRecord) -> bool:
        """On resume: put ``live`` in the table if the training service takes over the process
        of ``attempt`` that ran on while no manager did (``TrainingService.adopt``)."""
        if attempt.pid is None or attempt.pid_started is None:
            return False
        self._live[live.trial_id] = live
        live.pid, live.host, live.started = attempt.pid, attempt.host, attempt.start_time
        if self._service.adopt(attempt.trial_id, attempt.attempt, attempt.pid, attempt.pid_started):
            return True
        del self._live[live.trial_id]
        return False

    def end_leftover(self, attempt: AttemptRecord) -> bool:
        """On resume: end the process of an attempt that outlived its manager (found by pid
        and start time, never by name); True if there was one."""
        pid, pid_started = attempt.pid, attempt.pid_started
        return (pid is not None and pid_started is not None
                and self._service.end_leftover(attempt.trial_id, pid, pid_started))

    def kill_all(self) -> None:
        """SIGKILL every live attempt now."""
        for trial_id in list(self._live):
            self._service.signal(trial_id, signal.SIGKILL)
