"""Taking reports in (engine/receiving.py) over a real SQLite store and the runner's real
write queue and live attempts: which reports are stored, which are refused and why, what
the assessor is asked and when its "stop" is handed back."""
from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from expmgr import trial as trial_api
from expmgr.engine.dispatching import Assessment
from expmgr.engine.errors import MetricRejected, RefusalKind
from expmgr.engine.intake import AttemptReports
from expmgr.engine.live import LiveAttempt, LiveAttempts
from expmgr.engine.receiving import ReportReceiver
from expmgr.engine.writes import WriteQueue
from expmgr.layout import ExperimentPaths
from expmgr.states import ExperimentState, TrialState
from expmgr.store import ExperimentProfile, MetricRecord, StoreUnavailable, TrialRecord, WritableStore, create_store
from expmgr.training.base import TrialLaunch


class StartingService:
    async def launch(self, trial: TrialLaunch) -> None:
        pass

    def signal(self, trial_id: str, signum: int) -> bool:
        return True


class Files:
    """The lines of metrics.jsonl the service reads, and the skipped lines it is told of."""

    def __init__(self) -> None:
        self.lines: list[tuple[int, bytes | None]] = []
        self.skipped: list[tuple[int, str]] = []

    def unsent_reports(self, trial_id: str) -> Iterable[tuple[int, bytes | None]]:
        return list(self.lines)

    def note_skipped(self, trial_id: str, line_number: int, reason: str) -> str:
        self.skipped.append((line_number, reason))
        return f"line {line_number} skipped: {reason}"


class Assessor:
    def __init__(self, answer: Assessment) -> None:
        self.answer = answer
        self.asked: list[list[Any]] = []

    async def assess(self, trial_id: str, history: Sequence[Any]) -> Assessment:
        self.asked.append(list(history))
        return self.answer


class Setup:
    def __init__(self, tmp_path: Path, assessor: Assessor | None = None) -> None:
        paths = ExperimentPaths(tmp_path / "exp")
        paths.create()
        self.store: WritableStore = create_store(paths, ExperimentProfile(
            id="exp", name=None, config={}, status=ExperimentState.RUNNING, error=None, start_time=time.time(),
            end_time=None, port=None, log_dir=str(paths.root), platform="local", minimizes=False))
        self.failures: list[str] = []
        self.writes = WriteQueue(record_outage=lambda at, reason: None, on_paused=lambda reason: None,
                                 on_resumed=lambda: None, on_failed=self.failures.append)
        self.live = LiveAttempts(StartingService(), on_failed=self.failures.append)  # type: ignore[arg-type]
        self.live.secret = b"key"
        self.files = Files()
        self.assessor = assessor
        self.active: list[str] = []
        self.stopped: list[LiveAttempt] = []
        self.tasks: list[asyncio.Task] = []
        self.receiver = ReportReceiver(
            self.live, self.store, self.writes, self.files, logging.getLogger("test"),  # type: ignore[arg-type]
            dispatcher=assessor, spawn=lambda coroutine: self.tasks.append(asyncio.ensure_future(coroutine)),  # type: ignore[arg-type]
            on_stored=lambda live: self.active.append(live.trial_id), stop_early=self.stopped.append,
            on_failed=self.failures.append)

    async def running(self, trial_id: str = "a", attempt: int = 1) -> LiveAttempt:
        record = TrialRecord(trial_id=trial_id, sequence_id=0, parameters={}, status=TrialState.WAITING,
                             submit_time=0.0)
        if self.store.trial(trial_id) is None:
            self.store.add_trial(record)
        self.store.start_attempt(trial_id, attempt, 1.0, None, None, None)
        live = self.live.attempt(record, attempt, AttemptReports(assessed=self.assessor is not None))
        await self.live.launch(live, TrialLaunch(trial_id=trial_id, attempt=attempt, command="true",
                                                 code_directory=Path("."), parameter_record={}, env={}))
        return live


def report(sequence: int, value: float = 0.5, type_: str = "PERIODICAL", attempt: int = 1) -> dict[str, Any]:
    return {"attempt": attempt, "sequence": sequence, "type": type_, "value": value}


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())  # type: ignore[arg-type]


def test_a_report_is_stored_once_and_the_assessor_hears_the_history_so_far(tmp_path):
    async def test() -> None:
        setup = Setup(tmp_path, Assessor(Assessment.KEEP))
        live = await setup.running()
        for sequence, value in ((0, 0.1), (1, 0.2), (1, 0.2)):   # the last one sent again
            setup.receiver.receive("a", live.token, report(sequence, value))
        await asyncio.gather(*setup.tasks)
        assert [metric.value for metric in setup.store.metrics("a")] == [0.1, 0.2]
        assert setup.active == ["a", "a"]
        assert setup.assessor is not None and setup.assessor.asked[-1] == [0.1, 0.2]
        assert len(setup.assessor.asked) == 2 and setup.stopped == []
    run(test)


def test_a_report_not_of_the_running_attempt_is_refused_by_kind_and_not_stored(tmp_path):
    async def test() -> None:
        setup = Setup(tmp_path)
        live = await setup.running()
        for token, body, kind in (("0" * 32, report(0), RefusalKind.FORBIDDEN), (live.token, "x", RefusalKind.INVALID),
                                  (live.token, report(0, attempt=2), RefusalKind.CONFLICT)):
            with pytest.raises(MetricRejected) as refused:
                setup.receiver.receive("a", token, body)
            assert refused.value.kind == kind
        with pytest.raises(MetricRejected) as refused:
            setup.receiver.receive("nobody", live.token, report(0))
        assert refused.value.kind == RefusalKind.FORBIDDEN
        assert setup.store.metrics("a") == [] and setup.active == []
    run(test)


def test_while_the_store_refuses_writes_a_report_is_refused_as_unavailable_and_kept_for_later(tmp_path):
    async def test() -> None:
        setup = Setup(tmp_path)
        live = await setup.running()
        setup.writes.refused(StoreUnavailable("the disk is full", reason="disk full"))
        with pytest.raises(MetricRejected) as refused:
            setup.receiver.receive("a", live.token, report(0))
        assert refused.value.kind == RefusalKind.UNAVAILABLE and "disk full" in str(refused.value)
        assert live.reports.is_new(0)   # not seen: its line in metrics.jsonl is read when the trial ends
        setup.writes.close()
    run(test)


def test_the_lines_an_attempt_could_not_send_are_stored_and_a_bad_one_is_told_once(tmp_path):
    async def test() -> None:
        setup = Setup(tmp_path)
        live = await setup.running()
        signed = trial_api.signed_line(live.token, json.dumps(report(0, 0.7, "FINAL"))).encode()
        forged = trial_api.signed_line("0" * 32, json.dumps(report(1, 0.9))).encode()
        setup.files.lines = [(1, signed), (2, forged)]
        setup.receiver.ingest_unsent(live)
        setup.receiver.ingest_unsent(live)   # read again: stored and skipped lines are not again
        assert [(metric.type, metric.value) for metric in setup.store.metrics("a")] == [("FINAL", 0.7)]
        assert live.reports.has_final and live.reports.final_value == 0.7
        assert [number for number, _ in setup.files.skipped] == [2]
    run(test)


def test_the_assessors_stop_is_handed_back_only_for_the_attempt_it_judged_while_it_runs(tmp_path):
    async def test() -> None:
        setup = Setup(tmp_path, Assessor(Assessment.STOP))
        live = await setup.running()
        setup.receiver.receive("a", live.token, report(0))
        await asyncio.gather(*setup.tasks)
        assert setup.stopped == [live]
        setup.live.exited("a")
        later = await setup.running(attempt=2)
        setup.tasks.clear()
        setup.receiver.accept(live, MetricRecord(trial_id="a", attempt=1, sequence=1, type="PERIODICAL", value=0.3))   # a late report of attempt 1
        await asyncio.gather(*setup.tasks)
        assert setup.stopped == [live] and setup.live.get("a") is later
    run(test)



def test_a_bug_of_ours_on_a_report_fails_the_report_and_is_told(tmp_path):
    async def test() -> None:
        setup = Setup(tmp_path)
        live = await setup.running()

        def broken(metric: MetricRecord) -> bool:
            raise ValueError("a bug of ours")
        setup.store.add_metric = broken  # type: ignore[method-assign]
        with pytest.raises(MetricRejected) as refused:
            setup.receiver.receive("a", live.token, report(0))
        assert refused.value.kind == RefusalKind.FAILED and setup.failures == ["receive_metric"]
    run(test)
