"""The page follows a running experiment live: trials appear and finish, and a running
trial's stdout grows, over the websocket and without reloading the page."""
from __future__ import annotations

import re
import sqlite3

from playwright.sync_api import expect

from tests.helpers.webui import running_trials


def test_trials_appear_and_finish_live_without_reloading(ui, gated_experiment):
    run = gated_experiment(trials=4, concurrency=2)
    ui.page.goto(run.url + "#/trials")
    expect(ui.get("app")).to_have_attribute("data-loaded", "true")
    ui.page.evaluate("window.__sameDocument = true")

    for trial_id in running_trials(run, 2):
        expect(ui.get("trialState", trial_id)).to_have_text("RUNNING")
    expect(ui.get("status")).to_have_text("RUNNING")
    ui.screenshot("running")

    run.release()
    assert run.experiment.wait(timeout=60)
    statuses = run.statuses()
    assert list(statuses.values()) == ["SUCCEEDED"] * 4
    expect(ui.get("trialsCount")).to_have_text("4")
    for trial_id in statuses:  # two of them started after the page loaded
        expect(ui.get("trialState", trial_id)).to_have_text("SUCCEEDED")
        expect(ui.get("trialFinal", trial_id)).not_to_be_empty()
    expect(ui.get("status")).to_have_text("DONE")

    assert ui.page.evaluate("window.__sameDocument") is True, "the page was reloaded"
    assert any(url.endswith("/api/v1/expmgr/ws") for url in ui.sockets), \
        f"updates must come over the websocket; sockets opened: {ui.sockets}"
    assert not [e for e in ui.errors if e.startswith("page error")], ui.errors


def test_running_trial_opened_from_the_table_shows_its_stdout_growing(ui, gated_experiment):
    run = gated_experiment(trials=1, concurrency=1)
    [trial_id] = running_trials(run, 1)
    ui.page.goto(run.url + "#/trials")
    ui.get("trialRow", trial_id).click()

    expect(ui.page).to_have_url(re.compile(f"#/trials/{trial_id}$"))
    expect(ui.get("trialDetailId")).to_have_text(trial_id)
    expect(ui.get("trialDetailState")).to_have_text("RUNNING")
    stdout = ui.get("stdout")
    expect(stdout).to_contain_text(re.compile(r"trial 1 line \d+"))
    lines = int(stdout.get_attribute("data-lines"))
    # The trial prints a line every 0.1 s: ten more lines arrive while the page stays open,
    # and the view follows the end, so the newest line is in the page.
    expect(stdout).to_contain_text(re.compile(rf"trial 1 line {lines + 10}(?!\d)"))
    assert int(stdout.get_attribute("data-lines")) >= lines + 10
    expect(ui.get("chartTrialIntermediate")).to_have_attribute("data-rendered", "true")
    ui.screenshot("stdout")

    run.release()
    expect(ui.get("trialDetailState")).to_have_text("SUCCEEDED")
    expect(ui.get("trialFinal")).to_have_text("1.5")


def test_the_page_says_launching_is_paused_while_the_store_cannot_be_written(ui, gated_experiment):
    run = gated_experiment(trials=3, concurrency=1)
    running_trials(run, 1)
    ui.page.goto(run.url)
    expect(ui.get("app")).to_have_attribute("data-loaded", "true")
    expect(ui.get("storeBadge")).to_have_count(0)

    # Another process holds the database: the running trial's next report cannot be stored.
    lock = sqlite3.connect(run.experiment.paths.database, isolation_level=None, timeout=10)
    try:
        lock.execute("BEGIN EXCLUSIVE")
        expect(ui.get("storeBadge")).to_have_text("launching paused")
        expect(ui.get("storeBadge")).to_have_attribute("title", re.compile(r"cannot be written \(database is locked\)"))
        ui.screenshot("paused")
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    expect(ui.get("storeBadge")).to_have_count(0)
    run.release()
    assert run.experiment.wait(timeout=60)
    assert run.experiment.get_status() == "DONE"
    assert not [e for e in ui.errors if e.startswith("page error")], ui.errors
