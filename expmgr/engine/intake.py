"""Report intake: one attempt's reports as the runner has stored them, kept in memory, and
what each newly stored report asks the runner to do (after Ray Tune's schedulers, which
are told a result and return a decision). The assessor's history of an attempt grows here
one report at a time (O(1) a report); it is read from the store once, when a resume
takes over an attempt whose manager died::

    reports = AttemptReports(assessed=True, stored=store.metrics(trial_id), attempt=2)
    if reports.is_new(metric.sequence):
        decision = reports.stored(metric, newly=store.add_metric(metric))
        if isinstance(decision, AskAssessor):
            ...                      # send decision.history to the assessor
    for metric in unsent_metrics(files.unsent_reports(trial_id), trial_id, 2, token, reports, on_skipped):
        ...                          # store it as above
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from expmgr.engine.reports import BadReportLine, as_float_metric, parse_metrics_line
from expmgr.store import MetricRecord


NOT_NOW = ("the experiment's database cannot be written now ({}); the report is kept in metrics.jsonl and "
           "stored when the trial ends")
"""Why a POSTed report is refused (UNAVAILABLE) while the store refuses writes."""


@dataclass(frozen=True)
class AskAssessor:
    """Ask the assessor whether the attempt goes on, given its history so far."""

    history: Sequence[Any]
    """The attempt's PERIODICAL results in the order stored, as assessors get them
    (``reports.as_float_metric``). Read-only: it is the intake's own list, which grows as
    reports come, so an assessment sent later sees the reports that came meanwhile."""


class AttemptReports:
    """What one attempt reported: the sequences stored, its PERIODICAL history, its last
    FINAL result, and the lines of metrics.jsonl skipped as bad."""

    def __init__(self, *, assessed: bool, attempt: int | None = None, stored: Iterable[MetricRecord] = ()) -> None:
        """``assessed``: an assessor judges the attempt's intermediate results. ``stored``:
        what the store holds already (a resumed attempt's: the trial's metrics, of which
        those of ``attempt`` count), read once."""
        self._assessed = assessed
        self._sequences: set[int] = set()
        self._history: list[Any] = []
        self.final_value: Any = None
        self.has_final = False
        """The attempt's last FINAL result, told to the tuner when the attempt ends unless
        it is retried (so the tuner hears of each trial once)."""
        self._skipped_lines: set[int] = set()
        for metric in stored:
            if metric.attempt == attempt:
                self._remember(metric)

    def is_new(self, sequence: int) -> bool:
        """Whether the report of this sequence number is not stored yet (reports are idempotent)."""
        return sequence not in self._sequences

    def stored(self, metric: MetricRecord, *, newly: bool) -> AskAssessor | None:
        """The store took ``metric`` (``newly``: False when it held it already, a report
        seen before by a manager that died): it counts as seen; what the runner does next."""
        self._sequences.add(metric.sequence)
        if not newly:
            return None
        self._remember(metric)
        if metric.type == "FINAL" or not self._assessed:
            return None
        return AskAssessor(self._history)

    def _remember(self, metric: MetricRecord) -> None:
        self._sequences.add(metric.sequence)
        if metric.type == "FINAL":
            self.final_value, self.has_final = metric.value, True
        else:
            self._history.append(as_float_metric(metric.value))

    @property
    def history(self) -> Sequence[Any]:
        """The attempt's PERIODICAL results so far, as assessors get them."""
        return self._history

    def first_skip(self, line_number: int) -> bool:
        """A bad line of metrics.jsonl: True the first time (it is warned about once)."""
        if line_number in self._skipped_lines:
            return False
        self._skipped_lines.add(line_number)
        return True


def unsent_metrics(lines: Iterable[tuple[int, bytes | None]], trial_id: str, attempt: int, token: str,
                   reports: AttemptReports, on_skipped: Callable[[int, str], None]) -> Iterator[MetricRecord]:
    """The metrics of the reports an attempt wrote to metrics.jsonl (``lines``: numbered, as
    the training service reads them): lines of this attempt whose MAC matches its
    ``token``. A bad line (not UTF-8, not JSON, a bad field, over its size limit, not signed
    by this attempt) is skipped and told to ``on_skipped(line number, why)`` once."""
    for number, line in lines:
        try:
            metric = parse_metrics_line(line, trial_id, attempt, token)
        except BadReportLine as error:
            if reports.first_skip(number):
                on_skipped(number, str(error))
            continue
        if metric is not None:
            yield metric
