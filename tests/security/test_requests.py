"""The guard in front of every route (expmgr/server/guard.py), attacked on a real running
experiment: a page of another site (foreign Origin, text/plain), DNS rebinding (a foreign
Host), and bodies too large to buffer. Each refused request changes nothing."""
from __future__ import annotations

import json
import socket
import threading

import psutil
import pytest
import tornado.httpclient
import tornado.websocket

from expmgr.server.guard import MiB, ServerLimits
from tests.helpers.common import wait_until
from tests.helpers.common import trial_token
from tests.helpers.security import Answer, app_routes, concrete, send, unchanged_state, writes_of

API = "/api/v1/nni"
METRICS = "/api/v1/expmgr/trials/([^/]+)/metrics"
EXPERIMENTS = "/api/v1/expmgr/experiments"
WRITES = {
    # (route, method): (query, a body that, were the request not refused, would change the experiment)
    (f"{API}/experiment", "PUT"): ("?update_type=TRIAL_CONCURRENCY", {"params": {"trialConcurrency": 3}}),
    (f"{API}/experiment", "DELETE"): ("", None),
    (f"{API}/experiment/import-data", "POST"): ("", [{"parameter": {"x": 3}, "value": 0.5}]),
    (f"{API}/trial-jobs/([^/]+)", "DELETE"): ("", None),
    (f"{API}/trial-jobs", "DELETE"): ("", None),  # the handler of trial-jobs/<id>, also routed here
    (METRICS, "POST"): ("", {"attempt": 1, "sequence": 500, "type": "PERIODICAL", "value": 1.0}),
    (f"{API}/trial-jobs", "POST"): ("", {"x": 3}),  # a customized trial
    (f"{API}/trial-jobs/([^/]+)", "POST"): ("", {"x": 3}),  # the same handler, refused with an id
    (f"{EXPERIMENTS}/([^/]*)/?([^/]+)?", "POST"): ("/stop", None),  # the experiments page's stop, resume
    (f"{EXPERIMENTS}/([^/]*)/?([^/]+)?", "DELETE"): ("", None),
}
FOREIGN_ORIGINS = ["http://evil.example", "null", "http://127.0.0.1.evil.example:80", "http://localhost:1"]


def write(served, route: str, method: str, **headers: str | None) -> Answer:
    """The write ``method route`` with a body it would act on, as trial x=1 where a trial is named."""
    query, body = WRITES[(route, method)]
    trial_id = served.running()[1]
    if route == METRICS:
        headers.setdefault("X_Expmgr_Trial_Token", trial_token(trial_id))
    return send(served.port, method, concrete(route, trial_id) + query,
                None if body is None else json.dumps(body).encode(), **headers)


def test_the_routes_attacked_here_are_every_write_route_of_the_app():
    assert {(route, method) for route, handler in app_routes() for method in writes_of(handler)} == set(WRITES)


@pytest.mark.parametrize("route, method", sorted(WRITES))
def test_a_foreign_origin_is_refused_on_every_write_route_and_changes_nothing(served, route, method):
    before = unchanged_state(served)
    for origin in FOREIGN_ORIGINS:
        answer = write(served, route, method, Origin=origin)
        assert answer.status == 403 and answer.error.startswith("Origin:"), (origin, answer)
    assert unchanged_state(served) == before


@pytest.mark.parametrize("route, method", sorted(WRITES))
def test_a_write_that_is_not_json_is_refused_and_changes_nothing(served, route, method):
    before = unchanged_state(served)
    for content_type in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                         None]:
        if method == "DELETE" and content_type is None:  # a bare DELETE passes (below); one with a body not
            answer = send(served.port, method, concrete(route, served.running()[1]), b"{}", Content_Type=None)
        else:
            answer = write(served, route, method, Content_Type=content_type)
        assert answer.status == 415 and answer.error.startswith("Content-Type:"), (content_type, answer)
    assert unchanged_state(served) == before


def test_a_delete_without_body_or_content_type_passes_the_guard_as_nnis_client_sends_it(served):
    """NNI's client sends DELETE (stop, kill_trial_job) with neither; a browser cannot send
    a DELETE cross-site without a preflight, JSON or not."""
    answer = send(served.port, "DELETE", f"{API}/trial-jobs/nosuchtrial", Content_Type=None)
    assert (answer.status, answer.error) == (404, "no trial 'nosuchtrial'")
    answer = send(served.port, "DELETE", f"{API}/trial-jobs/nosuchtrial", b"{}", Content_Type=None)
    assert answer.status == 415 and answer.error.startswith("Content-Type:"), answer


def all_requests(trial_id: str) -> list[tuple[str, str]]:
    """(method, path) of every route of the app, with each method it answers."""
    return [(method, concrete(route, trial_id)) for route, handler in app_routes()
            for method in ["GET"] + writes_of(handler)]


def test_a_foreign_host_is_refused_on_every_route_as_after_dns_rebinding(served):
    before = unchanged_state(served)
    trial_id = served.running()[1]
    for method, path in all_requests(trial_id) + [("GET", "/no/such/route")]:
        for host in [f"evil.example:{served.port}", "evil.example", f"127.0.0.1:{served.port + 1}", ""]:
            answer = send(served.port, method, path, b"{}" if method != "GET" else None, host=host)
            assert answer.status == 403 and answer.error.startswith("Host:"), (method, path, host, answer)
        missing = send(served.port, method, path, None, Host=None)  # tornado itself refuses HTTP/1.1 without Host,
        assert missing.status in (400, 403), (method, path, missing)  # closing at once: sent without a body
    assert unchanged_state(served) == before


def test_the_servers_own_names_are_accepted_as_host_and_origin(served):
    port = served.port
    for name in ["127.0.0.1", "localhost", "[::1]", "LOCALHOST"]:
        answer = send(port, "GET", f"{API}/check-status", host=f"{name}:{port}", Origin=f"http://{name}:{port}")
        assert (answer.status, answer.body["status"]) == (200, "RUNNING"), name
    assert send(port, "GET", "/", host=f"localhost:{port}").status == 200
    same_origin = send(port, "PUT", f"{API}/experiment?update_type=TRIAL_CONCURRENCY",
                       json.dumps({"params": {"trialConcurrency": 2}}).encode(), Origin=f"http://127.0.0.1:{port}",
                       Content_Type="application/json; charset=UTF-8")
    assert (same_origin.status, same_origin.body) == (200, {})


def socket_status(port: int, **headers: str) -> int | str:
    """The HTTP status refusing a websocket connection, or "open" when it opened."""
    async def connect() -> int | str:
        request = tornado.httpclient.HTTPRequest(f"ws://127.0.0.1:{port}/api/v1/expmgr/ws", headers=headers)
        try:
            connection = await tornado.websocket.websocket_connect(request)
        except tornado.httpclient.HTTPClientError as error:
            return error.code
        connection.close()
        return "open"
    import asyncio
    return asyncio.run(connect())


def test_the_websocket_refuses_a_foreign_origin_and_a_foreign_host(served):
    port = served.port
    assert socket_status(port, Origin="http://evil.example") == 403
    assert socket_status(port, Origin="null") == 403
    assert socket_status(port, Host=f"evil.example:{port}") == 403
    assert socket_status(port, Host=f"evil.example:{port}", Origin=f"http://evil.example:{port}") == 403
    assert socket_status(port, Origin=f"http://localhost:{port}") == "open"
    assert socket_status(port) == "open", "a client that is not a browser sends no Origin"


def refused_while_sending(port: int, method: str, route: str, declared: int | None, total: int) -> tuple[bytes, int]:
    """Send ``total`` bytes of body (a Content-Length of ``declared``, or chunked when None) on
    a thread while reading the answer: (the answer, how many body bytes were sent by the time
    it was complete). A server that does not wait for the body answers, and times out no read."""
    connection = socket.create_connection(("127.0.0.1", port), timeout=10)
    length = f"Content-Length: {declared}" if declared is not None else "Transfer-Encoding: chunked"
    head = (f"{method} {route} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\n{length}\r\n\r\n").encode()
    answered = threading.Event()
    sent = [0]

    def send_body() -> None:
        chunk = b"[" + b" " * (64 * 1024 - 1)
        try:
            for _ in range(total // len(chunk)):
                if answered.is_set():
                    return
                connection.sendall(chunk if declared is not None else b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent[0] += len(chunk)
        except OSError:
            pass  # the server closed: the rest is not read

    connection.sendall(head)
    sender = threading.Thread(target=send_body, name="test-big-body")
    sender.start()
    answer = b""
    try:
        while True:
            head_end = answer.find(b"\r\n\r\n")
            if head_end >= 0:
                length_line = [line for line in answer[:head_end].split(b"\r\n") if line.lower().startswith(b"content-length:")]
                if length_line and len(answer) >= head_end + 4 + int(length_line[0].split(b":")[1]):
                    break
            data = connection.recv(65536)
            if not data:
                break
            answer += data
        sent_by_then = sent[0]
    finally:
        answered.set()
        connection.shutdown(socket.SHUT_RDWR)
        sender.join()
        connection.close()
    return answer, sent_by_then


def test_oversized_bodies_get_413_at_once_without_being_buffered(served):
    before = unchanged_state(served)
    process = psutil.Process()
    rss = process.memory_info().rss
    trial_id = served.running()[1]
    big = 100 * 1000 * 1000
    cases = [(method, concrete(route, trial_id) + WRITES[(route, method)][0], declared, total)
             for route, method in sorted(WRITES) if method != "DELETE"
             for declared, total in [(big, 4096), (big, big)]]
    cases += [("PUT", f"{API}/experiment?update_type=TRIAL_CONCURRENCY", None, big),  # chunked, no length
              ("GET", f"{API}/trial-jobs", big, big)]
    for method, route, declared, total in cases:
        answer, sent = refused_while_sending(served.port, method, route, declared, total)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 413 "), (method, route, declared, answer[:300])
        assert json.loads(body)["error"].startswith("body: "), body
        # At once: the server read no more than the socket buffers hold before it answered.
        assert sent < min(total, 32 * MiB), f"{method} {route}: answered after {sent} bytes of body were taken"
        assert process.memory_info().rss - rss < 10 * MiB, f"{method} {route}: the body was buffered"
    assert unchanged_state(served) == before


def test_each_route_has_its_own_body_limit(served):
    """Import takes more than a control route; a trial report less. Within its limit a body is
    read and checked as usual."""
    limits = ServerLimits()
    records = json.dumps([{"parameter": {"x": 1}, "value": "bad"}] + [{"pad": "x" * 1000}] * (2 * MiB // 1000))
    assert limits.max_body < len(records) < limits.max_import_body
    before = unchanged_state(served)
    imported = send(served.port, "POST", f"{API}/experiment/import-data", records.encode())
    assert imported.status == 400 and imported.error.startswith("[0].value"), imported.error[:200]
    put = send(served.port, "PUT", f"{API}/experiment?update_type=TRIAL_CONCURRENCY", records.encode())
    assert put.status == 413 and "EXPMGR_MAX_BODY" in put.error
    trial_id = served.running()[1]
    report = json.dumps({"attempt": 1, "sequence": 501, "type": "PERIODICAL", "value": {"default": 1, "pad": "x" * limits.max_report_body}})
    answer = send(served.port, "POST", concrete(METRICS, trial_id), report.encode(),
                  X_Expmgr_Trial_Token=trial_token(trial_id))
    assert answer.status == 413
    assert unchanged_state(served) == before


def test_a_trial_still_reports_through_the_guard(served):
    served.step(2, 0)
    wait_until(lambda: any(m["type"] == "PERIODICAL" and m["trialJobId"] == served.running()[2]
                           for m in send(served.port, "GET", f"{API}/metric-data").body), what="trial 2's report")


def test_the_cli_client_is_told_why_a_too_large_import_is_refused(served):
    """expctl and Experiment.connect send the whole body before reading: they get the 413, not a reset."""
    from expmgr.experiment.remote import RestRefused, rest_call
    before = unchanged_state(served)
    records = [{"parameter": {"x": 1}, "value": 0.5, "pad": "x" * 1000}] * (ServerLimits().max_import_body // 1000)
    with pytest.raises(RestRefused) as refused:
        rest_call(served.port, "POST", "experiment/import-data", records)
    assert refused.value.status == 413 and "EXPMGR_MAX_IMPORT_BODY" in str(refused.value)
    assert unchanged_state(served) == before


DUPLICATED = {
    # (route, method): a body naming a key twice; json.loads alone would act on the last
    (f"{API}/experiment", "PUT"): ("?update_type=SEARCH_SPACE",
                                   '{"params": {"searchSpace": {"x": {"_type": "choice", "_value": [1]}, '
                                   '"x": {"_type": "choice", "_value": [9]}}}}', "x"),
    (f"{API}/experiment/import-data", "POST"): ("", '[{"parameter": {"x": 3, "x": 4}, "value": 0.5}]', "x"),
    (METRICS, "POST"): ("", '{"attempt": 1, "sequence": 502, "type": "PERIODICAL", "value": 1.0, "value": 2.0}',
                        "value"),
}


@pytest.mark.parametrize("route, method", sorted(DUPLICATED))
def test_a_json_body_naming_a_key_twice_is_refused_naming_it_and_changes_nothing(served, route, method):
    query, body, key = DUPLICATED[(route, method)]
    before = unchanged_state(served)
    trial_id = served.running()[1]
    answer = send(served.port, method, concrete(route, trial_id) + query, body.encode(),
                  X_Expmgr_Trial_Token=trial_token(trial_id))
    assert (answer.status, answer.error) == (400, f"body: duplicate key {key!r}")
    assert unchanged_state(served) == before
