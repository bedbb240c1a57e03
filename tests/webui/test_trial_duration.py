"""One duration everywhere: the page shows a trial's duration as the server computes it (the
time its attempts ran, all together), the number ``expctl trial ls`` prints, never the time
from its first start to its last end (which holds the wait between the attempts)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from playwright.sync_api import expect

from expmgr import Experiment
from tests.helpers.common import REPO
from tests.helpers.fill import experiment_with_attempts


def test_a_trials_duration_on_the_page_is_its_attempts_time_as_in_trial_ls(ui, tmp_path: Path):
    home = tmp_path / "home"
    # 10 s, a wait of 90 s (a retry that waited, a manager down), then 5 s: 15 s, not 105 s.
    exp_id = experiment_with_attempts(home, [(0, 10), (100, 105)])
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    listed = subprocess.run([sys.executable, "-m", "expmgr.cli", "trial", "ls", exp_id, "--json"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert json.loads(listed.stdout)[0]["seconds"] == 15.0
    view = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
    try:
        url = f"http://127.0.0.1:{view.port}/"
        ui.page.goto(url + "#/trials")
        expect(ui.get("app")).to_have_attribute("data-loaded", "true")
        expect(ui.get("trialDuration", "a0")).to_have_text("15s")
        ui.page.goto(url + "#/trials/a0")
        expect(ui.get("trialDetailId")).to_have_text("a0")
        expect(ui.page.get_by_test_id("trial-duration")).to_have_text("15s")
        assert not ui.errors, ui.errors
    finally:
        view.stop()
