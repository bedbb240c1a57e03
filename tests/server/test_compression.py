"""Answers are gzip-compressed for a client that accepts it (tornado's ``compress_response``):
the first load of a large experiment (``changes``) shrinks several times over, streamed answers
(trial-jobs, a trial's file) still decode to the same bytes, and the websocket is unaffected."""
from __future__ import annotations

import asyncio
import gzip
import json
import urllib.request

import pytest
import tornado.httpclient
import tornado.websocket

from expmgr import Experiment
from tests.helpers.fill import fill_experiment


@pytest.fixture
def large_view(tmp_path):
    """A finished experiment of 1,000 trials with 20 intermediate results each, viewed."""
    home = tmp_path / "home"
    exp_id = fill_experiment(home, trials=1_000, metrics_per_trial=20)
    view = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
    yield view
    view.stop()


def fetch(port: int, route: str, gzip_ok: bool) -> tuple[dict[str, str], bytes]:
    """(headers, body as sent) of GET route, with or without ``Accept-Encoding: gzip``
    (urllib never decompresses)."""
    headers = {"Accept-Encoding": "gzip"} if gzip_ok else {}
    request = urllib.request.Request(f"http://127.0.0.1:{port}{route}", headers=headers)
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 200
        return dict(response.headers), response.read()


@pytest.mark.parametrize("route", ["/api/v1/expmgr/changes", "/api/v1/nni/trial-jobs", "/api/v1/nni/metric-data"])
def test_a_large_json_answer_is_gzipped_and_several_times_smaller(large_view, route):
    raw_headers, raw = fetch(large_view.port, route, gzip_ok=False)
    headers, sent = fetch(large_view.port, route, gzip_ok=True)
    assert "Content-Encoding" not in raw_headers, "a client that does not ask gets it plain"
    assert headers["Content-Encoding"] == "gzip" and sent[:2] == b"\x1f\x8b"
    assert "Accept-Encoding" in headers["Vary"]
    body = gzip.decompress(sent)
    assert json.loads(body) is not None and len(body) == len(raw)
    if route != "/api/v1/expmgr/changes":  # changes carries a fresh cursor each time
        assert body == raw
    assert len(sent) * 4 < len(raw), f"{route}: {len(sent)} bytes gzipped of {len(raw)}"


def test_a_streamed_trial_file_is_gzipped_whole_and_its_live_tail_not(large_view):
    stdout = large_view.paths.trial_dir("f0000") / "stdout"
    stdout.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(f"line {n} of the trial's output\n" for n in range(50_000))  # several blocks, flushed one by one
    stdout.write_text(text)
    headers, sent = fetch(large_view.port, "/api/v1/nni/trial-file/f0000/stdout", gzip_ok=True)
    assert headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(sent).decode() == text
    tail = "/api/v1/expmgr/tail?file=stdout&trial=f0000&offset=0"  # a view following the file: as it is
    headers, sent = fetch(large_view.port, tail, gzip_ok=True)
    assert "Content-Encoding" not in headers and text.startswith(json.loads(sent)["text"])


def test_the_websocket_works_for_a_client_that_accepts_gzip(large_view):
    async def hello() -> dict:
        request = tornado.httpclient.HTTPRequest(f"ws://127.0.0.1:{large_view.port}/api/v1/expmgr/ws",
                                                 headers={"Accept-Encoding": "gzip, deflate"})
        connection = await tornado.websocket.websocket_connect(request)
        try:
            message = await asyncio.wait_for(connection.read_message(), 30)
        finally:
            connection.close()
        assert isinstance(message, str)
        return json.loads(message)

    assert asyncio.run(hello())["type"] == "hello"


def test_the_changes_answer_is_compressed_off_the_event_loop(large_view, monkeypatch):
    """Compressing 20 MB takes seconds of a loaded machine: not on the loop that serves the sockets."""
    on_a_loop: list[bool] = []
    original = gzip.compress

    def compress(*args, **kwargs):
        on_a_loop.append(running_loop() is not None)
        return original(*args, **kwargs)

    monkeypatch.setattr(gzip, "compress", compress)
    _, sent = fetch(large_view.port, "/api/v1/expmgr/changes", gzip_ok=True)
    assert json.loads(gzip.decompress(sent))["full"]
    assert on_a_loop == [False], "compressed once, on a thread without an event loop"


def running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
