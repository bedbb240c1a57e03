"""A trial that waits for a GPU says why in the web UI, as the server stored it: a mark in its
State cell whose title is the reason, and the reason on the trial's page; both go once it
starts. nvidia-smi is the stand-in of tests/helpers/fake_nvidia_smi.py (the machine has no GPU)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.helpers.common import wait_until
from tests.helpers.fake_nvidia_smi import FakeNvidiaSmi

BUSY = "waiting for a GPU: a trial needs 1 (trialGpuNumber); GPU 0 is used by another process (useActiveGpu: false)"


def test_a_trial_waiting_for_a_gpu_shows_why_in_the_table_and_on_its_page_until_it_starts(
        ui, gated_experiment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    gpus = FakeNvidiaSmi(tmp_path, monkeypatch)
    gpus.show([0], processes={0: [os.getpid()]})  # this test's process is "another process" on GPU 0
    run = gated_experiment(trials=1, concurrency=1, trial_gpu_number=1)
    [trial_id] = wait_until(lambda: list(run.statuses()), what="the trial created")
    ui.page.goto(run.url + "#/trials")
    expect(ui.get("app")).to_have_attribute("data-loaded", "true")
    expect(ui.get("trialState", trial_id)).to_have_text("WAITING")
    expect(ui.get("trialWaiting", trial_id)).to_have_attribute("title", BUSY)
    ui.screenshot("waiting-for-a-gpu")
    assert not ui.accessibility_problems(), "the mark's reason is its accessible name"

    ui.get("trialRow", trial_id).click()
    expect(ui.get("trialWaitingReason")).to_have_text(BUSY)
    ui.screenshot("waiting-trial-page")
    gpus.show([0])  # the other process ended: the trial starts, and waits no more
    expect(ui.get("trialDetailState")).to_have_text("RUNNING")
    expect(ui.get("trialWaitingReason")).to_have_count(0)
    ui.page.goto(run.url + "#/trials")
    expect(ui.get("trialState", trial_id)).to_have_text("RUNNING")
    expect(ui.get("trialWaiting", trial_id)).to_have_count(0)
    assert not ui.errors, ui.errors
