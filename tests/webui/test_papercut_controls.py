"""Papercuts of the controls of a running experiment (issue 22): the confirmation dialog used
with the keyboard, durations echoed as typed and shown without zero parts, field errors that
go once something else is done, a running trial's latest result still in italics, and the
page a browser gets without the experiment's access token."""
from __future__ import annotations

import json
import re

from playwright.sync_api import expect

from tests.helpers.security import TOKEN, gated_experiment as token_experiment, request
from tests.helpers.webui import running_trials


def test_the_confirm_dialog_is_named_starts_on_cancel_keeps_focus_and_closes_on_escape(ui, gated_experiment):
    run = gated_experiment(trials=2, concurrency=1)
    running_trials(run, 1)
    ui.page.goto(run.url + "#/overview")
    opener = ui.get("stopExperiment")
    expect(opener).to_be_enabled()
    opener.focus()
    ui.page.keyboard.press("Enter")

    dialog = ui.page.get_by_role("alertdialog", name="Stop the experiment?")
    expect(dialog).to_be_visible()
    expect(dialog).to_have_attribute("aria-modal", "true")
    expect(ui.get("cancel")).to_be_focused()      # the safe choice first
    ui.page.keyboard.press("Tab")
    expect(ui.get("confirm")).to_be_focused()
    ui.page.keyboard.press("Tab")                 # round the dialog, not out to the page
    expect(ui.get("cancel")).to_be_focused()
    ui.page.keyboard.press("Shift+Tab")
    expect(ui.get("confirm")).to_be_focused()
    assert ui.accessibility_problems() == []
    ui.screenshot("dialog")

    ui.page.keyboard.press("Escape")
    expect(ui.get("confirmDialog")).to_have_count(0)
    expect(opener).to_be_focused()                 # back where the user was
    assert run.experiment.get_experiment_profile()["status"] in ("RUNNING", "NO_MORE_TRIAL"), "Escape cancels"


def test_duration_refusals_echo_what_was_typed_and_field_errors_clear_after_another_action(ui, gated_experiment):
    run = gated_experiment(trials=3, concurrency=1)
    [running] = running_trials(run, 1)
    ui.page.goto(run.url + "#/overview")
    expect(ui.get("controls")).to_be_visible()

    ui.get("maxDurationInput").fill("4000d")
    ui.get("maxDurationApply").click()
    expect(ui.get("confirmDialog")).to_contain_text("4000d?")     # not "4000d 0h 0m"
    ui.get("confirm").click()
    expect(ui.get("controlMessage")).to_have_attribute("data-kind", "error")
    expect(ui.get("controlMessage")).to_contain_text("'4000d'")   # the server quotes it as typed
    expect(ui.get("controlMessage")).not_to_contain_text("345600000")

    ui.get("concurrencyInput").fill("two")
    ui.get("concurrencyApply").click()
    expect(ui.get("concurrencyError")).to_contain_text('got "two"')
    ui.get("maxTrialsInput").fill("9")
    ui.get("maxTrialsApply").click()
    ui.get("confirm").click()
    expect(ui.get("controlMessage")).to_have_attribute("data-kind", "ok")
    expect(ui.get("maxTrials")).to_have_text("9")
    expect(ui.get("concurrencyError")).to_have_count(0)           # an old error does not stay

    # a running trial's latest intermediate result stays in italics (an ended one's does not)
    ui.page.goto(run.url + "#/trials")
    latest = ui.get("trialFinal", running).locator("span.latest")
    expect(latest).to_have_text(re.compile(r"^\d+"))
    assert latest.evaluate("e => getComputedStyle(e).fontStyle") == "italic"


def test_a_browser_without_the_token_gets_a_page_saying_how_to_get_the_link(ui, tmp_path, code_dir, monkeypatch):
    experiment = token_experiment(tmp_path, code_dir, monkeypatch, token=TOKEN)
    try:
        port = experiment.port
        answer = ui.page.goto(f"http://127.0.0.1:{port}/")
        assert answer is not None and answer.status == 401
        expect(ui.page.get_by_role("heading", level=1)).to_have_text("This link needs the experiment's access token")
        expect(ui.page.locator("body")).to_contain_text("expctl webui url")
        expect(ui.page.locator("body")).to_contain_text("requires its access token")
        assert ui.accessibility_problems() == []
        ui.page.goto(f"http://127.0.0.1:{port}/?token=wrong-token-wrong-token")
        expect(ui.page.locator("body")).to_contain_text("the token in the link (?token=) is wrong")
        # REST clients still get JSON
        status, headers, body = request(port, "GET", "/api/v1/nni/experiment", {"Accept": "text/html"})
        assert status == 401 and headers["content-type"].startswith("application/json") and "error" in json.loads(body)
        assert request(port, "GET", "/")[1]["content-type"].startswith("application/json")
    finally:
        (tmp_path / "release").touch()
        experiment.stop()
