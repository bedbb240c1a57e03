"""Taking reports in: a report POSTed by a running attempt, or written by it to
metrics.jsonl when it could not send it, is checked (``reports.py``), stored, told to the
attempt's ``AttemptReports`` (``intake.py``) and, when that asks for it, sent to the
assessor, whose "stop" is handed back to the runner::

    receiver = ReportReceiver(live, store, writes, service.files, logger, dispatcher=dispatcher,
                              spawn=spawn, on_stored=note_activity, stop_early=stop_early,
                              on_failed=handler_failed)
    receiver.receive(trial_id, token, report)     # the REST handler's: MetricRejected says why not
    receiver.ingest_unsent(attempt)               # when an attempt ends: what it could not send
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from expmgr.engine import reports
from expmgr.engine.dispatching import Assessment, Dispatcher, DispatcherError
from expmgr.engine.errors import MetricRejected, RefusalKind
from expmgr.engine.intake import NOT_NOW, AskAssessor, unsent_metrics
from expmgr.engine.live import LiveAttempt, LiveAttempts
from expmgr.engine.writes import WriteQueue
from expmgr.store import MetricRecord, StoreUnavailable, WritableStore
from expmgr.training.files import TrialFiles


class ReportReceiver:
    """Stores the live attempts' reports and asks the assessor about them."""

    def __init__(self, live: LiveAttempts, store: WritableStore, writes: WriteQueue, files: TrialFiles,
                 logger: logging.Logger, *, dispatcher: Dispatcher | None,
                 spawn: Callable[[Coroutine[Any, Any, None]], object], on_stored: Callable[[LiveAttempt], None],
                 stop_early: Callable[[LiveAttempt], None], on_failed: Callable[[str], None]) -> None:
        """``spawn`` runs an assessment as a task; ``on_stored(attempt)``: a report of it was
        stored (it is active); ``stop_early(attempt)``: the assessor stops it;
        ``on_failed(name)``: taking a report or an assessment task raised (a bug of ours;
        called inside the except block)."""
        self._live, self._store, self._writes, self._files, self._logger = live, store, writes, files, logger
        self._dispatcher = dispatcher
        self._spawn, self._on_stored, self._stop_early, self._on_failed = spawn, on_stored, stop_early, on_failed

    def receive(self, trial_id: str, token: str | None, report: Any) -> None:
        """Store a report POSTed by a running attempt. Raises MetricRejected: FORBIDDEN for a
        wrong token, INVALID for a bad field, CONFLICT for another attempt, UNAVAILABLE when
        the store cannot take it now (the trial's line in metrics.jsonl is stored when it
        ends), FAILED when we failed on it (a bug of ours: the experiment ends in ERROR)."""
        try:
            self._receive(trial_id, token, report)
        except MetricRejected:
            raise
        except Exception:
            self._on_failed("receive_metric")
            raise MetricRejected(RefusalKind.FAILED,
                                 "the manager failed on this report; the experiment ends in ERROR") from None

    def _receive(self, trial_id: str, token: str | None, report: Any) -> None:
        live = self._live.get(trial_id)
        metric = reports.posted_report(trial_id, token, report,
                                       running=None if live is None else (live.attempt, live.token))
        assert live is not None
        if not live.reports.is_new(metric.sequence):
            return  # seen before: reports are idempotent
        if self._writes.unwritable is not None or self._writes:
            raise MetricRejected(RefusalKind.UNAVAILABLE, NOT_NOW.format(self._writes.unwritable or "earlier writes wait"))
        try:
            self.accept(live, metric)
        except StoreUnavailable as error:
            self._writes.refused(error)
            raise MetricRejected(RefusalKind.UNAVAILABLE, NOT_NOW.format(error.reason)) from None

    def accept(self, live: LiveAttempt, metric: MetricRecord) -> None:
        """Store the metric (StoreUnavailable if the store refuses it: then it is not seen,
        and its line in metrics.jsonl is read again later)."""
        if not live.reports.is_new(metric.sequence):
            return  # seen before: reports are idempotent
        # Counted as seen only once committed (the store's refusal raises before).
        decision = live.reports.stored(metric, newly=self._store.add_metric(metric))
        self._on_stored(live)
        if isinstance(decision, AskAssessor) and live.stop_reason is None:
            self._spawn(self._assess(live, decision.history))

    def ingest_unsent(self, live: LiveAttempt) -> None:
        """Pick up reports the attempt wrote but could not send (the service reads them, from
        metrics.jsonl); a bad line is warned about once, naming it, in experiment.log and
        the trial's log (intake.unsent_metrics)."""
        trial_id = live.trial_id

        def skipped(number: int, reason: str) -> None:
            self._logger.warning("trial %s: %s", trial_id, self._files.note_skipped(trial_id, number, reason))
        for metric in unsent_metrics(self._files.unsent_reports(trial_id), trial_id, live.attempt, live.token,
                                     live.reports, on_skipped=skipped):
            self.accept(live, metric)

    async def _assess(self, live: LiveAttempt, history: Sequence[Any]) -> None:
        try:
            await self._assess_now(live, history)
        except Exception:
            self._on_failed("_assess")

    async def _assess_now(self, live: LiveAttempt, history: Sequence[Any]) -> None:
        assert self._dispatcher is not None   # an attempt is assessed only with one
        try:
            assessment = await self._dispatcher.assess(live.trial_id, history)
        except DispatcherError:
            return  # the loop sees the dispatcher's failure
        # Only the attempt assessed is stopped (a resume's dead attempt is assessed too).
        if assessment is Assessment.STOP and live.stop_reason is None and self._live.is_live(live):
            self._logger.info("the assessor stops trial %s early", live.trial_id)
            self._stop_early(live)
