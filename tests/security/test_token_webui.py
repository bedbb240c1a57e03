"""The web UI of an experiment with an access token and a url prefix, in a real browser:
the printed ``?token=`` link loads the page, drops the token from the address, and the
page's requests and websocket get in with the cookie alone; the cookie a browser sends to
other ports of 127.0.0.1 holds no token and opens no other experiment."""
from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.helpers.browser import screenshot_dir, ui  # noqa: F401 - the browser fixtures
from tests.helpers.common import wait_until
from tests.helpers.security import TOKEN, gated_experiment, request


def test_the_token_link_opens_the_page_under_its_prefix_and_its_controls_work(ui, tmp_path, code_dir,  # noqa: F811
                                                                              monkeypatch):
    experiment = gated_experiment(tmp_path, code_dir, monkeypatch, token=TOKEN, url_prefix="/lab")
    try:
        port = experiment.port
        ui.page.goto(experiment.url + "#/overview")
        expect(ui.get("app")).to_have_attribute("data-loaded", "true")
        # both trials are submitted at once, so the tuner may already be done: NO_MORE_TRIAL
        expect(ui.get("status")).to_have_text(re.compile(r"^(RUNNING|NO_MORE_TRIAL)$"))
        expect(ui.get("count", "RUNNING")).to_have_text("2")
        assert ui.page.url == f"http://127.0.0.1:{port}/lab/#/overview", "the token left the address bar"
        assert any(url.endswith("/lab/api/v1/expmgr/ws") for url in ui.sockets)
        ui.screenshot("overview")

        ui.get("concurrencyInput").fill("3")
        ui.get("concurrencyApply").click()
        ui.get("confirm").click()
        expect(ui.get("controlMessage")).to_have_attribute("data-kind", "ok")
        wait_until(lambda: experiment.get_experiment_profile()["params"]["trialConcurrency"] == 3,
                   what="the change made with the cookie")
        assert request(port, "GET", "/lab/")[0] == 401, "still closed without the cookie"
    finally:
        (tmp_path / "release").touch()
        experiment.stop()


def test_chromium_sends_the_cookie_to_other_ports_and_it_holds_no_token_and_opens_no_other(ui, tmp_path,  # noqa: F811
                                                                                          code_dir, monkeypatch):
    """Cookies do not tell ports apart: a server of someone else on another port of 127.0.0.1
    receives the experiment's cookie. It gets a value derived from the token, which neither
    is the token nor opens another experiment with the same token."""
    import http.server
    import threading

    received: list[str] = []

    class Sniffer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            received.append(self.headers.get("Cookie") or "")
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html><body>other</body></html>")

        def log_message(self, *args: object) -> None:
            pass

    sniffer = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sniffer)
    serving = threading.Thread(target=sniffer.serve_forever, daemon=True)
    serving.start()
    started = []
    try:
        for folder in ("a", "b"):
            started.append((gated_experiment(tmp_path / folder, code_dir, monkeypatch, token=TOKEN), tmp_path / folder))
        (first, _), (second, _) = started
        ui.page.goto(first.url + "#/overview")
        expect(ui.get("app")).to_have_attribute("data-loaded", "true")
        ui.page.goto(f"http://127.0.0.1:{sniffer.server_address[1]}/")
        wait_until(lambda: received, what="the other server's request")
        assert f"expmgr-{first.port}-" in received[0], f"Chromium sent the cookie to another port: {received[0]}"
        assert TOKEN not in received[0], "the token itself never reaches another port"
        answer = ui.page.goto(f"http://127.0.0.1:{second.port}/")
        assert answer is not None and answer.status == 401, "the first one's cookie does not open the second"
        ui.page.goto(first.url.split("?")[0])
        expect(ui.get("app")).to_have_attribute("data-loaded", "true")
    finally:
        sniffer.shutdown()
        sniffer.server_close()
        for experiment, folder in started:
            (folder / "release").touch()
            experiment.stop()
