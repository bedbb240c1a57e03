"""A large experiment's page while its trials load: the charts say they are loading (not bare
axes and "0 highlighted") until every trial is in."""
from __future__ import annotations

import re

from playwright.sync_api import expect

from expmgr import Experiment
from tests.helpers.fill import fill_experiment

CHARTS = 4


def test_charts_say_they_are_loading_until_every_trial_is_in(ui, tmp_path):
    home = tmp_path / "home"
    exp_id = fill_experiment(home, trials=3_000, metrics_per_trial=5)  # more than the UI's first page
    view = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
    try:
        # The server's answers are held in the browser until the test lets them through, so the
        # loading is seen whatever the machine's speed.
        held: list = []
        gate = {"open": False}
        ui.page.route("**/api/v1/expmgr/changes*",
                      lambda route: route.continue_() if gate["open"] else held.append(route))
        ui.page.goto(f"http://127.0.0.1:{view.port}/#/charts")
        expect(ui.get("chartLoading")).to_have_count(CHARTS)
        expect(ui.get("chartLoading").first).to_contain_text("Loading trials")
        expect(ui.get("curvesSummary")).to_have_text("loading trials…")
        ui.screenshot("loading")

        gate["open"] = True
        for route in held:
            route.continue_()
        expect(ui.get("app")).to_have_attribute("data-loaded", "true")
        expect(ui.get("chartLoading")).to_have_count(0)
        expect(ui.get("curvesSummary")).to_contain_text("20 highlighted")
        expect(ui.get("chartFinal")).to_have_attribute("data-points", re.compile(r"^[0-9]{4,}$"))  # every final result
        expect(ui.get("chartFinal")).to_have_attribute("data-rendered", "true")
        assert not ui.errors
    finally:
        view.stop()
