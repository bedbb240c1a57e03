"""A trial's report taken in, whichever channel brought it: the HTTP route (rest.py's
``TrialMetricsHandler``) and the Unix socket of local trials (report_socket.py) both hand
over what the trial sent and answer what this module says, so the two channels cannot
answer a report differently::

    status, answer = take_report(runner, trial_id, token, body)
    # (200, {"ok": True}) once stored (or seen before); (403, {"error": ...}) for a wrong token;
    # 400 not JSON or a bad field, 409 not the running attempt or a read-only experiment, 503 not now

A body over the route's limit never gets here: the guard (HTTP) or the socket's header
check answers 413 before it is read, by ``Guard.too_large``.
"""
from __future__ import annotations

from typing import Any

from expmgr.engine.errors import Refusal, RefusalKind
from expmgr.engine.serving import ServedSearch
from expmgr.server.refusals import READ_ONLY, STATUS_OF_KIND, RequestError
from expmgr.server.request_values import json_body

ACCEPTED: dict[str, Any] = {"ok": True}
"""The answer to a report stored, or one seen before (reports are idempotent)."""


def take_report(runner: ServedSearch | None, trial_id: str, token: str | None,
                body: bytes) -> tuple[int, dict[str, Any]]:
    """Hand the report ``body`` of trial ``trial_id``, sent with ``token`` (None: none
    sent), to ``runner`` (None: the experiment is served read-only); the status and JSON
    answer the trial gets. A refusal is ``{"error": message}`` with its kind's status
    (refusals.STATUS_OF_KIND); anything else raised is a bug of ours and is raised on."""
    try:
        if runner is None:
            raise RequestError(RefusalKind.CONFLICT, READ_ONLY)
        runner.receive_metric(trial_id, token, json_body(body))
    except Refusal as refusal:
        return STATUS_OF_KIND[refusal.kind], {"error": str(refusal)}
    return 200, ACCEPTED
