"""The web UI of an experiment with an access token and a url prefix, in a real browser:
the printed ``?token=`` link loads the page, drops the token from the address, and the
page's requests and websocket get in with the cookie alone."""
from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.conftest import wait_until
from tests.security.test_token import TOKEN, gated_experiment, request
from tests.webui.conftest import screenshot_dir, ui  # noqa: F401 - the browser fixtures


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
