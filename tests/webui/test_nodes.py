"""Where trials ran: the page shows the node (host) of each trial's latest attempt and of
each attempt, as the server sends them; the trials table has a Node column only when the
server says the trials ran on more than one host (``multiHost``), not on one machine."""
from __future__ import annotations

from pathlib import Path

from playwright.sync_api import expect

from expmgr import Experiment
from tests.helpers.fill import experiment_on_hosts


def test_trials_on_two_hosts_show_a_node_column_and_each_attempts_node(ui, tmp_path: Path):
    home = tmp_path / "home"
    exp_id = experiment_on_hosts(home, [["node-a"], ["node-a", "node-b"], ["node-b"]])
    view = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
    try:
        url = f"http://127.0.0.1:{view.port}/"
        ui.page.goto(url + "#/trials")
        expect(ui.get("app")).to_have_attribute("data-loaded", "true")
        expect(ui.get("sort", "host")).to_have_text("Node")
        expect(ui.get("trialHost", "h0")).to_have_text("node-a")
        expect(ui.get("trialHost", "h1")).to_have_text("node-b")
        expect(ui.get("trialHost", "h2")).to_have_text("node-b")
        ui.screenshot("node-column")
        ui.get("filterHost").fill("node-b")
        expect(ui.get("trialsShown")).to_have_text("2")
        expect(ui.get("trialRow", "h0")).to_have_count(0)

        ui.get("trialRow", "h1").click()
        expect(ui.get("trialDetailId")).to_have_text("h1")
        expect(ui.get("trialHost")).to_have_text("node-b")
        expect(ui.get("attemptHost", "1")).to_have_text("node-a")
        expect(ui.get("attemptHost", "2")).to_have_text("node-b")
        ui.screenshot("attempts-on-two-nodes")
        assert not ui.errors, ui.errors
    finally:
        view.stop()


def test_trials_on_one_host_have_no_node_column_and_the_detail_still_names_it(ui, tmp_path: Path):
    home = tmp_path / "home"
    exp_id = experiment_on_hosts(home, [["127.0.0.1"], ["127.0.0.1"]])
    view = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
    try:
        url = f"http://127.0.0.1:{view.port}/"
        ui.page.goto(url + "#/trials")
        expect(ui.get("app")).to_have_attribute("data-loaded", "true")
        expect(ui.get("trialRow", "h1")).to_be_visible()
        expect(ui.get("sort", "status")).to_be_visible()
        expect(ui.get("sort", "host")).to_have_count(0)
        expect(ui.get("trialHost", "h0")).to_have_count(0)
        expect(ui.get("filterHost")).to_have_count(0)
        ui.screenshot("no-node-column")

        ui.page.goto(url + "#/trials/h0")
        expect(ui.get("trialHost")).to_have_text("127.0.0.1")
        expect(ui.get("attemptHost", "1")).to_have_text("127.0.0.1")
        assert not ui.errors, ui.errors
    finally:
        view.stop()
