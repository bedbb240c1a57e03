"""A trial's reports, checked: what a POSTed report or a line of metrics.jsonl must be to
be stored, and the tokens that authenticate them. Pure functions; the runner calls them::

    metric = parse_report(trial_id, body)                         # MetricRejected if bad
    metric = posted_report(trial_id, token, body, running=(attempt, its_token))   # MetricRejected
    metric = parse_metrics_line(line, trial_id, attempt, token)   # BadReportLine if bad
"""
from __future__ import annotations

import hmac
import json
import math
import os
import secrets
from typing import TYPE_CHECKING, Any

from expmgr import strict_json, trial as trial_api
from expmgr.engine.errors import MetricRejected, RefusalKind
from expmgr.metrics import metric_number, reported_number
from expmgr.store import MetricRecord

if TYPE_CHECKING:
    from pathlib import Path

METRIC_TYPES = ("PERIODICAL", "FINAL")
MAX_REPORT_BYTES = trial_api.MAX_REPORT_BYTES
"""A report's size limit: a line of metrics.jsonl, or a POSTed value's JSON (64 KiB)."""
_SQLITE_INTEGERS = range(-2**63, 2**63)
TRIAL_SECRET_FILE = "trial-secret"
"""In the experiment folder (mode 0600): the key each attempt's token is derived from,
so a resume knows the tokens that signed the lines of metrics.jsonl."""


class BadReportLine(ValueError):
    """A line of metrics.jsonl that is not stored; the message says why."""


def check_metric_value(value: Any, field: str = "value") -> None:
    """A metric is a number, or a dict with a number under ``default`` (NNI's rule)."""
    number = reported_number(value)
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        raise MetricRejected(RefusalKind.INVALID,
                             f"{field}: expected a number or a dict with a numeric 'default', got {value!r}")


def as_float_metric(value: Any) -> Any:
    """A metric as assessors get it: an integer beyond any float (10**400, stored exactly)
    becomes an infinity of its sign, which they treat as non-finite, instead of an
    OverflowError in the dispatcher that would end the experiment."""
    number = reported_number(value)
    if not isinstance(number, int) or isinstance(number, bool) or metric_number(value) is not None:
        return value
    infinite = math.inf if number > 0 else -math.inf
    return {**value, "default": infinite} if isinstance(value, dict) else infinite


def parse_report(trial_id: str, report: dict[str, Any]) -> MetricRecord:
    """The metric of one report (a POSTed body or a line's JSON); MetricRejected (INVALID)
    naming the first bad field."""
    for name in ("attempt", "sequence"):
        value = report.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value not in _SQLITE_INTEGERS or value < 0:
            raise MetricRejected(RefusalKind.INVALID,
                                 f"{name}: expected a non-negative integer below 2**63, got {value!r}")
    if report.get("type") not in METRIC_TYPES:
        raise MetricRejected(RefusalKind.INVALID,
                             f"type: expected one of {', '.join(METRIC_TYPES)}, got {report.get('type')!r}")
    if "value" not in report:
        raise MetricRejected(RefusalKind.INVALID, "value: missing")
    check_metric_value(report["value"])
    try:
        size = len(json.dumps(report["value"]))  # ASCII: json.dumps escapes the rest
    except (ValueError, TypeError, RecursionError) as error:
        raise MetricRejected(RefusalKind.INVALID, f"value: cannot be stored as JSON ({error})") from None
    if size > MAX_REPORT_BYTES:
        raise MetricRejected(RefusalKind.INVALID,
                             f"value: {size} bytes of JSON; a report holds at most {MAX_REPORT_BYTES}")
    return MetricRecord(trial_id=trial_id, attempt=report["attempt"], sequence=report["sequence"],
                        type=report["type"], value=report["value"])


def posted_report(trial_id: str, token: str | None, body: Any, *, running: tuple[int, str] | None) -> MetricRecord:
    """The metric of a report POSTed for ``trial_id`` with ``token``; ``running``: the
    attempt of the trial that runs and its token (None: it does not run). MetricRejected:
    FORBIDDEN for a wrong token, INVALID for a bad field, CONFLICT for another attempt."""
    # As bytes: compare_digest raises TypeError for a str with a non-ASCII character (an
    # HTTP header is read as Latin-1), which would be taken for a bug of ours (ERROR).
    if running is None or token is None or \
            not secrets.compare_digest(token.encode("utf-8", "surrogateescape"), running[1].encode()):
        raise MetricRejected(RefusalKind.FORBIDDEN, f"no running trial {trial_id!r} with this token")
    if not isinstance(body, dict):
        raise MetricRejected(RefusalKind.INVALID, "body: expected a JSON object")
    metric = parse_report(trial_id, body)
    if metric.attempt != running[0]:
        raise MetricRejected(RefusalKind.CONFLICT, f"attempt: {metric.attempt} is not the running attempt {running[0]}")
    return metric


def parse_metrics_line(line: bytes | None, trial_id: str, attempt: int, token: str) -> MetricRecord | None:
    """The metric of one line of metrics.jsonl (None: a line over MAX_REPORT_BYTES, as
    the training service gives it), None when it is another attempt's. BadReportLine
    when it is not UTF-8, not JSON, has a bad field or is not signed with ``token``."""
    try:
        return _parse_metrics_line(line, trial_id, attempt, token)
    except (ValueError, RecursionError, MetricRejected) as error:
        raise BadReportLine(str(error)) from None


def _parse_metrics_line(line: bytes | None, trial_id: str, attempt: int, token: str) -> MetricRecord | None:
    if line is None:
        raise ValueError(f"longer than {MAX_REPORT_BYTES} bytes")
    report = strict_json.loads(line.decode("utf-8"))
    if not isinstance(report, dict):
        raise ValueError("not a JSON object")
    metric = parse_report(trial_id, report)
    if metric.attempt != attempt:
        return None
    record = trial_api.unsigned_record(line)
    mac = report.get(trial_api.MAC_FIELD)
    if record is None or not isinstance(mac, str) or not hmac.compare_digest(
            mac, trial_api.report_mac(token, record)):
        raise ValueError(f"not signed with attempt {attempt}'s token: not written by this trial")
    return metric


def load_trial_secret(experiment_dir: "Path") -> bytes:
    """The experiment's key for attempt tokens, made on its first run (see TRIAL_SECRET_FILE)."""
    path = experiment_dir / TRIAL_SECRET_FILE
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    secret = secrets.token_bytes(32)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(secret)
    return secret


def attempt_token(secret: bytes, trial_id: str, attempt: int) -> str:
    """The token of one attempt: it authenticates the attempt's reports (HTTP header)
    and signs its lines in metrics.jsonl; derived, so a resume knows it again."""
    return hmac.new(secret, f"{trial_id}:{attempt}".encode(), "sha256").hexdigest()[:32]
