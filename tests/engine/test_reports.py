"""What a report must be to be stored, as pure functions: a POSTed report, a line of a
trial's metrics.jsonl, the attempt tokens that sign them. The same rules with real trial
processes: tests/faults/test_bad_reports.py."""
from __future__ import annotations

import json
import math
import stat
from pathlib import Path

import pytest

from expmgr import trial as trial_api
from expmgr.engine import reports
from expmgr.engine.errors import MetricRejected, RefusalKind

TOKEN = "0123456789abcdef0123456789abcdef"


def _signed(record: dict, token: str = TOKEN) -> bytes:
    return trial_api.signed_line(token, json.dumps(record)).encode()


def _report(**fields: object) -> dict:
    return {"attempt": 1, "sequence": 0, "type": "PERIODICAL", "value": 0.5, **fields}


def test_a_signed_line_of_the_attempt_is_its_metric() -> None:
    metric = reports.parse_metrics_line(_signed(_report(type="FINAL", value={"default": 2, "loss": 1})),
                                        "abcde", 1, TOKEN)
    assert metric is not None
    assert (metric.trial_id, metric.attempt, metric.sequence, metric.type, metric.value) \
        == ("abcde", 1, 0, "FINAL", {"default": 2, "loss": 1})


def test_a_line_of_another_attempt_is_not_this_attempts_and_not_bad() -> None:
    assert reports.parse_metrics_line(_signed(_report(attempt=2)), "abcde", 1, TOKEN) is None


@pytest.mark.parametrize("line, reason", [
    (b'{"attempt": 1, "sequence": 5, "type": "FINAL", "value": "\xff\xfe"}', "can't decode byte 0xff"),
    (b'{"attempt": 1, "sequence": 5, "type": "FINAL", "value": 7', "Expecting ',' delimiter"),
    (b"[" * 100_000 + b"]" * 100_000, "maximum recursion depth"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"attempt": 1, "sequence": 18446744073709551616, "type": "FINAL", "value": 7}',
     "sequence: expected a non-negative integer below 2**63, got 18446744073709551616"),
    (b'{"attempt": 1, "sequence": 5, "type": "FINAL", "value": "high"}',
     "value: expected a number or a dict with a numeric 'default', got 'high'"),
    (b'{"attempt": 1, "sequence": 5, "type": "BEST", "value": 7}', "type: expected one of PERIODICAL, FINAL"),
    (None, f"longer than {reports.MAX_REPORT_BYTES} bytes"),
], ids=["invalid_utf8", "not_json", "nested_too_deep", "not_an_object", "sequence_beyond_int64",
        "not_a_number", "unknown_type", "too_long"])
def test_a_bad_line_is_refused_with_its_reason(line: bytes | None, reason: str) -> None:
    with pytest.raises(reports.BadReportLine) as refused:
        reports.parse_metrics_line(line, "abcde", 1, TOKEN)
    assert reason in str(refused.value)


@pytest.mark.parametrize("line", [
    json.dumps(_report()).encode(),                                      # no MAC
    _signed(_report(), token="f" * 32),                                  # another attempt's token
    _signed(_report()).replace(b'"value": 0.5', b'"value": 9.5'),        # changed after signing
], ids=["unsigned", "other_token", "tampered"])
def test_a_line_not_signed_with_the_attempts_token_is_refused(line: bytes) -> None:
    with pytest.raises(reports.BadReportLine, match="not signed with attempt 1's token"):
        reports.parse_metrics_line(line, "abcde", 1, TOKEN)


@pytest.mark.parametrize("field, value", [
    ("attempt", -1), ("attempt", True), ("attempt", "1"), ("sequence", 2**63), ("sequence", 1.0),
])
def test_a_report_with_a_bad_attempt_or_sequence_is_invalid_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(MetricRejected) as refused:
        reports.parse_report("abcde", _report(**{field: value}))
    assert refused.value.kind == RefusalKind.INVALID
    assert str(refused.value).startswith(f"{field}: expected a non-negative integer below 2**63")


def test_the_largest_sqlite_integer_is_a_valid_sequence() -> None:
    assert reports.parse_report("abcde", _report(sequence=2**63 - 1)).sequence == 2**63 - 1


def test_a_report_without_a_value_or_with_too_large_a_value_is_invalid() -> None:
    without = _report()
    del without["value"]
    with pytest.raises(MetricRejected, match="value: missing"):
        reports.parse_report("abcde", without)
    with pytest.raises(MetricRejected, match=f"a report holds at most {reports.MAX_REPORT_BYTES}"):
        reports.parse_report("abcde", _report(value={"default": 1, "pad": "x" * reports.MAX_REPORT_BYTES}))


def test_a_value_json_cannot_hold_is_invalid() -> None:
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(MetricRejected, match="value: cannot be stored as JSON"):
        reports.parse_report("abcde", _report(value={"default": 1, "deep": deep}))


@pytest.mark.parametrize("value", [1, 0.5, {"default": 2}, 10**400, math.nan])
def test_numbers_and_dicts_with_a_numeric_default_are_metrics(value: object) -> None:
    reports.check_metric_value(value)


@pytest.mark.parametrize("value", ["high", None, True, {"loss": 1}, {"default": "1"}, [1]])
def test_anything_else_is_not_a_metric(value: object) -> None:
    with pytest.raises(MetricRejected, match="expected a number or a dict with a numeric 'default'"):
        reports.check_metric_value(value)


@pytest.mark.parametrize("token", [None, "", "caf\xe9", "\udcff", TOKEN[:-1], TOKEN + "0"])
def test_a_report_with_any_other_token_is_forbidden_never_an_error_of_ours(token: str | None) -> None:
    with pytest.raises(MetricRejected) as refused:
        reports.posted_report("abcde", token, _report(), running=(1, TOKEN))
    assert refused.value.kind is RefusalKind.FORBIDDEN
    assert reports.posted_report("abcde", TOKEN, _report(), running=(1, TOKEN)).sequence == 0


def test_assessors_get_an_integer_beyond_any_float_as_an_infinity_of_its_sign() -> None:
    assert reports.as_float_metric(10**400) == math.inf
    assert reports.as_float_metric({"default": -10**400, "loss": 1}) == {"default": -math.inf, "loss": 1}
    assert reports.as_float_metric({"default": 3, "loss": 1}) == {"default": 3, "loss": 1}


def test_the_trial_secret_is_made_once_private_and_gives_each_attempt_its_own_stable_token(tmp_path: Path) -> None:
    secret = reports.load_trial_secret(tmp_path)
    assert stat.S_IMODE((tmp_path / reports.TRIAL_SECRET_FILE).stat().st_mode) == 0o600
    assert reports.load_trial_secret(tmp_path) == secret, "a resume must know the same tokens"
    token = reports.attempt_token(secret, "abcde", 1)
    assert token == reports.attempt_token(secret, "abcde", 1) and len(token) == 32
    assert len({token, reports.attempt_token(secret, "abcde", 2), reports.attempt_token(secret, "abcdf", 1),
                reports.attempt_token(b"another secret", "abcde", 1)}) == 4
