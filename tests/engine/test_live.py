"""The live attempts (engine/live.py): the table of attempts launched and not ended, which
attempt an event is about, and starting and stopping them through the training service
(here one that records what it is told)."""
from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from expmgr.engine.intake import AttemptReports
from expmgr.engine.live import LaunchRefused, LiveAttempt, LiveAttempts
from expmgr.states import TrialState
from expmgr.store import AttemptRecord, TrialRecord
from expmgr.training.base import SystemLaunchError, TrainingServiceError, TrialLaunch

PATIENCE = 10.0


class RecordingService:
    """The training service's process control, recording what it is told."""

    def __init__(self) -> None:
        self.launched: list[tuple[str, int]] = []
        self.signals: list[tuple[str, int]] = []
        self.stopped: list[tuple[float, int]] = []
        self.refuse: Exception | None = None
        self.leftovers: list[tuple[str, int, float]] = []

    async def launch(self, trial: TrialLaunch) -> None:
        if self.refuse is not None:
            raise self.refuse
        self.launched.append((trial.trial_id, trial.attempt))

    def signal(self, trial_id: str, signum: int) -> bool:
        self.signals.append((trial_id, signum))
        return True

    async def stop(self, grace_period: float, signum: int = 15) -> None:
        self.stopped.append((grace_period, signum))

    def end_leftover(self, trial_id: str, pid: int, pid_started: float) -> bool:
        self.leftovers.append((trial_id, pid, pid_started))
        return True


def record(trial_id: str) -> TrialRecord:
    return TrialRecord(trial_id=trial_id, sequence_id=0, parameters={}, status=TrialState.WAITING, submit_time=0.0)


def launch_of(live: LiveAttempt) -> TrialLaunch:
    return TrialLaunch(trial_id=live.trial_id, attempt=live.attempt, command="true", code_directory=Path("."),
                       parameter_record={}, env={})


def table(service: RecordingService, failures: list[str] | None = None) -> LiveAttempts:
    live = LiveAttempts(service, on_failed=(failures if failures is not None else []).append)  # type: ignore[arg-type]
    live.secret = b"key"
    return live


async def launched(live: LiveAttempts, trial_id: str, attempt: int = 1) -> LiveAttempt:
    attempt_ = live.attempt(record(trial_id), attempt, AttemptReports(assessed=False))
    assert await live.launch(attempt_, launch_of(attempt_)) is None
    return attempt_


async def until(condition: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {PATIENCE}s: {what}")
        await asyncio.sleep(0)


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())  # type: ignore[arg-type]


def test_each_attempt_has_its_own_token_derived_from_the_secret():
    live = table(RecordingService())
    first, second = (live.attempt(record("a"), n, AttemptReports(assessed=False)) for n in (1, 2))
    assert first.token != second.token
    assert live.attempt(record("a"), 1, AttemptReports(assessed=False)).token == first.token   # a resume knows it again


def test_an_event_of_an_attempt_that_ended_is_not_the_live_ones():
    async def test() -> None:
        live = table(RecordingService())
        second = await launched(live, "a", attempt=2)
        assert live.started("a", 1, pid=7, host="h", at=5.0) is None     # a late event of attempt 1
        assert live.not_started("a", 1) is None and len(live) == 1
        started = live.started("a", 2, pid=8, host="node-1", at=6.0)
        assert started is second and (second.pid, second.host, second.started) == (8, "node-1", 6.0)
        assert live.exited("a") is second and len(live) == 0
        with pytest.raises(KeyError):
            live.exited("a")
    run(test)


def test_a_launch_the_service_refuses_says_whether_the_system_is_to_blame():
    async def test() -> None:
        service = RecordingService()
        live = table(service)
        for error, system in ((SystemLaunchError("disk full"), True), (TrainingServiceError("no such command"), False)):
            service.refuse = error
            attempt = live.attempt(record("a"), 1, AttemptReports(assessed=False))
            assert await live.launch(attempt, launch_of(attempt)) == LaunchRefused(str(error), system=system)
            assert live.not_started("a", 1) is attempt and live.get("a") is None
    run(test)


def test_a_stopped_attempt_is_killed_after_the_grace_period_only_if_it_still_runs():
    async def test() -> None:
        service = RecordingService()
        live = table(service)
        lingering, quitting = await launched(live, "a"), await launched(live, "b")
        live.stop(lingering, TrialState.EARLY_STOPPED, grace_period=0.0)
        live.stop(quitting, TrialState.USER_CANCELED, grace_period=0.0)
        live.exited("b")   # it ended on SIGTERM, before its grace period ran out
        await until(lambda: ("a", signal.SIGKILL) in service.signals, "a's SIGKILL")
        after = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.01, after.set_result, None)   # after both timers
        await after
        assert service.signals == [("a", signal.SIGTERM), ("b", signal.SIGTERM), ("a", signal.SIGKILL)]
        assert (lingering.stop_reason, quitting.stop_reason) == (TrialState.EARLY_STOPPED, TrialState.USER_CANCELED)
    run(test)


def test_a_failing_kill_timer_is_told_instead_of_lost():
    async def test() -> None:
        service, failures = RecordingService(), []
        live = table(service, failures)
        attempt = await launched(live, "a")

        def broken(trial_id: str, signum: int) -> bool:
            if signum == signal.SIGKILL:
                raise OSError("the service broke")
            return True
        service.signal = broken  # type: ignore[method-assign]
        live.stop(attempt, TrialState.USER_CANCELED, grace_period=0.0)
        await until(lambda: failures, "the failure told")
        assert failures == ["_kill_if_alive"]
    run(test)


def test_stopping_all_keeps_a_reason_given_before_and_kill_all_kills_every_attempt():
    async def test() -> None:
        service = RecordingService()
        live = table(service)
        early, other = await launched(live, "a"), await launched(live, "b")
        early.stop_reason = TrialState.EARLY_STOPPED
        await live.stop_all(TrialState.SYS_CANCELED, grace_period=3.0, signum=signal.SIGUSR1)
        assert (early.stop_reason, other.stop_reason) == (TrialState.EARLY_STOPPED, TrialState.SYS_CANCELED)
        assert service.stopped == [(3.0, signal.SIGUSR1)]
        live.kill_all()
        assert service.signals == [("a", signal.SIGKILL), ("b", signal.SIGKILL)]
    run(test)


def test_only_a_leftover_process_known_by_pid_and_start_time_is_ended():
    service = RecordingService()
    live = table(service)
    known = AttemptRecord(trial_id="a", attempt=1, status=TrialState.RUNNING, start_time=1.0, end_time=None,
                          exit_code=None, signal=None, pid=42, pid_started=0.5)
    unknown = AttemptRecord(trial_id="b", attempt=1, status=TrialState.RUNNING, start_time=1.0, end_time=None,
                            exit_code=None, signal=None, pid=43, pid_started=None)
    assert live.end_leftover(known) and not live.end_leftover(unknown)
    assert service.leftovers == [("a", 42, 0.5)]
