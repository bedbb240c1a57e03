"""Refusals: the engine says which kind (expmgr.engine.errors), the server says which HTTP
status in one map (server/refusals.py), and a refused request is an answer, not a server error."""
from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

import expmgr.engine
import expmgr.server
from expmgr.engine.errors import MetricRejected, Refusal, RefusalKind, SubmissionRefused, UpdateRefused
from expmgr.engine.reports import check_metric_value
from expmgr.server.refusals import STATUS_OF_KIND, RequestError
from expmgr.server.tails import TailError
from tests.helpers.server import call

ENGINE = Path(expmgr.engine.__file__).parent
SERVER = Path(expmgr.server.__file__).parent


def test_every_refusal_kind_has_its_own_http_status():
    assert set(STATUS_OF_KIND) == set(RefusalKind), "a kind without a status would be answered 500"
    assert len(set(STATUS_OF_KIND.values())) == len(STATUS_OF_KIND)
    assert all(400 <= status < 600 for status in STATUS_OF_KIND.values())


def test_every_refusal_the_server_answers_is_a_refusal_with_a_kind():
    for refusal in (UpdateRefused, MetricRejected, SubmissionRefused, TailError, RequestError):
        assert issubclass(refusal, Refusal)
        assert refusal(RefusalKind.CONFLICT, "not now").kind is RefusalKind.CONFLICT
    with pytest.raises(MetricRejected, match="value: expected a number") as rejected:
        check_metric_value("high")
    assert rejected.value.kind is RefusalKind.INVALID and not hasattr(rejected.value, "status")


def test_the_engine_raises_no_refusal_with_an_http_status():
    """No ``SomethingRefused(409, ...)`` in expmgr/engine: a kind, never a number."""
    found = []
    for path in sorted(ENGINE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            first = node.args[0]
            numbers = [n for n in ast.walk(first) if isinstance(n, ast.Constant) and type(n.value) is int]
            if name.endswith(("Refused", "Rejected", "Refusal", "Error")) and numbers:
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)[:80]}")
    assert not found, "HTTP statuses in the engine:\n" + "\n".join(found)


def test_the_server_picks_a_refusal_kinds_status_only_in_the_one_map():
    """No ``set_status(429)`` (or any status of the map) and no second map in expmgr/server
    beside refusals.py: a refused request there is answered through ``send_refusal``."""
    statuses = set(STATUS_OF_KIND.values())
    found = []
    for path in sorted(SERVER.rglob("*.py")):
        if path.name == "refusals.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("set_status", "send_error") \
                    and any(isinstance(arg, ast.Constant) and arg.value in statuses for arg in node.args):
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)[:80]}")
            if isinstance(node, ast.Dict) and any(isinstance(key, ast.Attribute) and key.attr in RefusalKind.__members__
                                                  for key in node.keys):
                found.append(f"{path.name}:{node.lineno}: a map of refusal kinds")
    assert not found, "statuses of refusal kinds chosen outside server/refusals.py:\n" + "\n".join(found)


def test_refusals_are_answered_with_their_kinds_status_and_not_logged_as_server_errors(
        filled_view, caplog: pytest.LogCaptureFixture):
    port = filled_view.port
    caplog.set_level(logging.WARNING, logger="tornado.application")
    for method, route, body, status, message in [
            ("GET", "/api/v1/nni/trial-jobs/nosuch", None, 404, "no trial 'nosuch'"),
            ("GET", "/api/v1/nni/trial-jobs?offset=x", None, 400, "offset: expected"),
            ("GET", "/api/v1/expmgr/tail?file=stdout", None, 400, "trial: stdout is a trial's file"),
            ("DELETE", "/api/v1/nni/trial-jobs/nosuch", None, 409, "read-only"),
            ("PUT", "/api/v1/nni/experiment?update_type=nosuch", {}, 400, "update_type: expected one of"),
            ("POST", "/api/v1/expmgr/trials/nosuch/metrics", {}, 409, "read-only")]:
        answer_status, answer = call(port, method, route, body)
        assert (answer_status, set(answer)) == (status, {"error"}), (route, answer)
        assert message in answer["error"], (route, answer)
    logged = [r.getMessage() for r in caplog.records if r.name == "tornado.application"]
    assert not logged, logged
