"""Steering a running experiment from the page: each control asks for confirmation,
acts through the REST API, and its effect shows up live."""
from __future__ import annotations

import json
import urllib.request

from playwright.sync_api import expect

from tests.helpers.webui import running_trials


def test_trial_killed_from_its_page_becomes_user_canceled(ui, gated_experiment):
    run = gated_experiment(trials=2, concurrency=1)
    [victim] = running_trials(run, 1)
    ui.page.goto(run.url + f"#/trials/{victim}")
    expect(ui.get("trialDetailState")).to_have_text("RUNNING")

    ui.get("killTrial").click()
    expect(ui.get("confirmDialog")).to_be_visible()
    ui.screenshot("confirm-kill")
    ui.get("confirm").click()

    expect(ui.get("trialDetailState")).to_have_text("USER_CANCELED")
    expect(ui.get("controlMessage")).to_have_attribute("data-kind", "ok")
    expect(ui.get("killTrial")).to_have_count(0)
    assert run.statuses()[victim] == "USER_CANCELED"
    ui.page.goto(run.url + "#/trials")
    expect(ui.get("trialState", victim)).to_have_text("USER_CANCELED")


def test_concurrency_changed_from_the_overview_is_honoured_by_the_runner(ui, gated_experiment):
    run = gated_experiment(trials=4, concurrency=1)
    running_trials(run, 1)
    ui.page.goto(run.url + "#/overview")
    expect(ui.get("concurrency")).to_have_text("1")
    expect(ui.get("count", "RUNNING")).to_have_text("1")

    ui.get("concurrencyInput").fill("3")
    ui.get("concurrencyApply").click()
    expect(ui.get("confirmDialog")).to_be_visible()
    ui.get("confirm").click()

    expect(ui.get("controlMessage")).to_have_attribute("data-kind", "ok")
    expect(ui.get("concurrency")).to_have_text("3")
    with urllib.request.urlopen(run.url + "api/v1/nni/experiment", timeout=10) as response:
        assert json.loads(response.read())["params"]["trialConcurrency"] == 3
    running_trials(run, 3)
    expect(ui.get("count", "RUNNING")).to_have_text("3")
    ui.screenshot("three-running")


def test_cancelled_confirmation_changes_nothing(ui, gated_experiment):
    run = gated_experiment(trials=2, concurrency=1)
    running_trials(run, 1)
    ui.page.goto(run.url + "#/overview")
    ui.get("concurrencyInput").fill("2")
    ui.get("concurrencyApply").click()
    ui.get("cancel").click()
    expect(ui.get("confirmDialog")).to_have_count(0)
    expect(ui.get("concurrency")).to_have_text("1")
    assert run.experiment.get_experiment_profile()["params"]["trialConcurrency"] == 1
