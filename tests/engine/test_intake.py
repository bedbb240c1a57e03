"""Report intake (engine/intake.py): one attempt's reports kept in memory, the decision each
newly stored report returns, and the history rebuilt once from what the store holds."""
from __future__ import annotations

from expmgr.engine.intake import AskAssessor, AttemptReports
from expmgr.store import MetricRecord


def periodical(sequence: int, value: object, attempt: int = 1) -> MetricRecord:
    return MetricRecord(trial_id="t1", attempt=attempt, sequence=sequence, type="PERIODICAL", value=value)


def test_each_new_intermediate_result_asks_the_assessor_with_the_attempts_history_so_far():
    reports = AttemptReports(assessed=True)
    first = reports.stored(periodical(0, 0.5), newly=True)
    second = reports.stored(periodical(1, {"default": 0.25, "loss": 3}), newly=True)
    assert isinstance(first, AskAssessor) and isinstance(second, AskAssessor)
    assert list(second.history) == [0.5, {"default": 0.25, "loss": 3}]
    assert not reports.is_new(0) and not reports.is_new(1) and reports.is_new(2)


def test_a_final_result_is_kept_for_the_tuner_and_asks_nothing():
    reports = AttemptReports(assessed=True)
    final = MetricRecord(trial_id="t1", attempt=1, sequence=3, type="FINAL", value=0.9)
    assert reports.stored(final, newly=True) is None
    assert (reports.has_final, reports.final_value) == (True, 0.9)
    assert list(reports.history) == []


def test_without_an_assessor_nothing_is_asked_and_a_report_stored_before_adds_nothing():
    unassessed = AttemptReports(assessed=False)
    assert unassessed.stored(periodical(0, 0.5), newly=True) is None
    assessed = AttemptReports(assessed=True)
    assert assessed.stored(periodical(0, 0.5), newly=False) is None   # the store held it already
    assert list(assessed.history) == [] and not assessed.is_new(0)


def test_an_integer_beyond_any_float_reaches_the_assessor_as_an_infinity():
    reports = AttemptReports(assessed=True)
    decision = reports.stored(periodical(0, -10**400), newly=True)
    assert isinstance(decision, AskAssessor) and list(decision.history) == [float("-inf")]


def test_a_resumed_attempt_is_rebuilt_from_the_store_once_with_only_its_own_reports():
    stored = [periodical(0, 0.1, attempt=1), periodical(0, 0.7, attempt=2), periodical(1, 0.6, attempt=2),
              MetricRecord(trial_id="t1", attempt=1, sequence=1, type="FINAL", value=0.2)]
    reports = AttemptReports(assessed=True, attempt=2, stored=stored)
    assert not reports.is_new(0) and not reports.is_new(1) and not reports.has_final
    decision = reports.stored(periodical(2, 0.5, attempt=2), newly=True)
    assert isinstance(decision, AskAssessor) and list(decision.history) == [0.7, 0.6, 0.5]


def test_a_bad_line_is_skipped_with_a_warning_once():
    reports = AttemptReports(assessed=False)
    assert reports.first_skip(4) and not reports.first_skip(4) and reports.first_skip(5)
