"""A finished experiment served read-only (``expctl view``, or its own server after
DONE): everything is shown, no control is offered (but a raise of its budget after DONE,
by its own server); and the page says when the server goes away and comes back."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from playwright.sync_api import expect

from expmgr import Experiment
from tests.helpers.browser import load_testids
from tests.helpers.common import wait_until

CONTROL_HOOKS = ["controls", "stopExperiment", "concurrencyInput", "concurrencyApply", "maxTrialsInput",
                 "maxTrialsApply", "maxDurationInput", "maxDurationApply", "killTrial"]


@pytest.fixture
def finished_experiment(gated_experiment):
    """A DONE experiment of three trials, its manager gone (stopped); (id, its home)."""
    run = gated_experiment(trials=3, concurrency=3)
    run.release()
    assert run.experiment.wait(timeout=60)
    run.experiment.stop()  # its server stayed after DONE
    return run.experiment.id, Path(run.experiment.config.experiment_working_directory)


@pytest.fixture
def expctl_view(finished_experiment):
    """``expctl view <id> --port 0`` in its own process; the URL it serves. Stopped with SIGTERM."""
    exp_id, home = finished_experiment
    process = subprocess.Popen([sys.executable, "-m", "expmgr.cli", "view", exp_id, "--port", "0"],
                               env={**os.environ, "EXPMGR_HOME": str(home)},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(process.stdout), daemon=True)
    reader.start()
    try:
        found = wait_until(lambda: re.search(r"http://127\.0\.0\.1:\d+", "".join(output)) or process.poll() is not None,
                           what="expctl view to say where it serves")
        assert process.poll() is None, f"expctl view ended: {''.join(output)}"
        yield found.group(0) + "/"
    finally:
        process.terminate()
        process.wait(timeout=30)
        reader.join(timeout=10)


def test_finished_experiment_under_expctl_view_shows_everything_and_no_controls(ui, expctl_view, finished_experiment):
    exp_id, _ = finished_experiment
    ui.page.goto(expctl_view + "#/overview")
    expect(ui.get("app")).to_have_attribute("data-loaded", "true")
    expect(ui.get("readonlyBadge")).to_be_visible()
    expect(ui.get("experimentId")).to_have_text(exp_id)
    expect(ui.get("status")).to_have_text("DONE")
    expect(ui.get("count", "SUCCEEDED")).to_have_text("3")
    expect(ui.get("bestResult")).to_have_text("4.5")
    ui.screenshot("overview")
    for hook in CONTROL_HOOKS:
        expect(ui.get(hook)).to_have_count(0)

    ui.get("navTrials").click()
    expect(ui.get("trialsCount")).to_have_text("3")
    rows = ui.page.locator(f'[data-testid^="{load_testids()["trialRowPrefix"]}"]')
    expect(rows).to_have_count(3)
    rows.first.click()
    expect(ui.get("trialDetail")).to_be_visible()
    expect(ui.get("trialDetailState")).to_have_text("SUCCEEDED")
    expect(ui.get("stdout")).to_contain_text(re.compile(r"trial \d starts"))
    ui.screenshot("trial")
    for hook in CONTROL_HOOKS:
        expect(ui.get(hook)).to_have_count(0)


def test_page_shows_offline_while_the_server_is_gone_and_catches_up_when_it_returns(ui, finished_experiment):
    exp_id, home = finished_experiment
    viewer = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
    port = viewer.port
    try:
        ui.page.goto(f"http://127.0.0.1:{port}/#/trials")
        expect(ui.get("liveBadge")).to_be_visible()
        expect(ui.get("offlineBadge")).to_have_count(0)
        viewer.stop()
        expect(ui.get("offlineBadge")).to_be_visible()
        expect(ui.get("trialsCount")).to_have_text("3")  # what was loaded stays on the page
        ui.screenshot("offline")
        viewer = Experiment.view(exp_id, port=port, non_blocking=True, home=home)
        expect(ui.get("liveBadge")).to_be_visible()
        expect(ui.get("offlineBadge")).to_have_count(0)
    finally:
        viewer.stop()


def test_a_running_experiments_page_turns_read_only_at_done_stays_and_goes_offline_at_stop(ui, gated_experiment):
    """As NNI's: the server stays after DONE, read-only; the page stays live and a user
    coming back to the URL finds it; stopping the experiment is what takes it offline."""
    run = gated_experiment(trials=2, concurrency=2)
    ui.page.goto(run.url + "#/overview")
    expect(ui.get("app")).to_have_attribute("data-loaded", "true")
    expect(ui.get("controls")).to_be_visible()
    expect(ui.get("readonlyBadge")).to_have_count(0)
    run.release()
    assert run.experiment.wait(timeout=60)
    expect(ui.get("status")).to_have_text("DONE")
    expect(ui.get("readonlyBadge")).to_be_visible()
    expect(ui.get("liveBadge")).to_be_visible()
    # Only a raise of its budget is offered (test_more_trials_after_done.py in tests/webui).
    for hook in ["stopExperiment", "concurrencyInput", "concurrencyApply", "killTrial"]:
        expect(ui.get(hook)).to_have_count(0)
    expect(ui.get("maxTrialsInput")).to_be_enabled()
    ui.page.reload()
    expect(ui.get("app")).to_have_attribute("data-loaded", "true")
    expect(ui.get("status")).to_have_text("DONE")
    expect(ui.get("count", "SUCCEEDED")).to_have_text("2")
    expect(ui.get("readonlyBadge")).to_be_visible()
    ui.screenshot("done-and-served")
    run.experiment.stop()
    expect(ui.get("offlineBadge")).to_have_text("ended · offline")
