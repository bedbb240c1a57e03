"""The web UI of a DONE experiment its manager still serves offers max trials and max
duration (the fields the server lists as updatable now), and raising max trials from the
page runs more trials: the page goes back to RUNNING, then DONE with them. Durations shown
are the server's (one meaning with ``expctl trial ls``)."""
from __future__ import annotations

from playwright.sync_api import expect

from tests.helpers.common import wait_until


def test_raising_max_trials_of_a_done_experiment_from_the_page_runs_more_trials(ui, gated_experiment):
    run = gated_experiment(trials=2, concurrency=2, search_space={"x": {"_type": "choice", "_value": [1, 2, 3, 4]}})
    run.release()
    assert run.experiment.wait(timeout=60)
    ui.page.goto(run.url + "#/overview")
    expect(ui.get("app")).to_have_attribute("data-loaded", "true")
    expect(ui.get("status")).to_have_text("DONE")
    expect(ui.get("controlsMoreTrials")).to_be_visible()
    expect(ui.get("concurrencyInput")).to_have_count(0)
    expect(ui.get("stopExperiment")).to_have_count(0)
    expect(ui.get("maxDurationInput")).to_be_enabled()
    ui.get("maxTrialsInput").fill("2")
    ui.get("maxTrialsApply").click()
    ui.get("confirm").click()
    expect(ui.get("controlMessage")).to_have_attribute("data-kind", "error")
    expect(ui.get("controlMessage")).to_contain_text("maxTrialNumber: 2 is not above the 2 trials")
    ui.get("maxTrialsInput").fill("4")
    ui.get("maxTrialsApply").click()
    ui.get("confirm").click()
    expect(ui.get("controlMessage")).to_have_attribute("data-kind", "ok")
    expect(ui.get("status")).to_have_text("DONE")   # the gate is open: the two new trials end at once
    wait_until(lambda: len(run.statuses()) == 4 and run.experiment.get_status() == "DONE", timeout=60,
               what="DONE again with four trials")
    expect(ui.get("count", "SUCCEEDED")).to_have_text("4")
    ui.screenshot("more-trials-after-done")
    assert ui.accessibility_problems() == []
