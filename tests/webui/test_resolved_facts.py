"""The page shows what the server decided instead of deciding it again: which trial is the
best (in the direction the tuner optimizes, its default when the config names none) and
which trials can be killed (only a RUNNING one: the server refuses WAITING and PAUSED)."""
from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect

from expmgr import Experiment, ExperimentConfig
from tests.helpers.browser import GATED_TRIAL, GatedExperiment
from tests.helpers.common import wait_until, write_script
from tests.helpers.webui import running_trials


def test_tpe_without_optimize_mode_shows_the_lowest_result_as_best(ui, gated_experiment, tmp_path: Path):
    # TPE minimizes unless told otherwise; the config names no optimize_mode.
    run = gated_experiment(trials=3, concurrency=3, tuner={"name": "TPE", "class_args": {"seed": 3}},
                           search_space={"x": {"_type": "uniform", "_value": [1, 3]}})
    run.release()
    assert run.experiment.wait(timeout=60)
    finals = {result.trialJobId: result.value for result in run.experiment.export_data()}
    assert len(finals) == 3 and len(set(finals.values())) == 3, finals
    lowest = min(finals, key=finals.get)

    view = Experiment.view(run.experiment.id, port=0, non_blocking=True, home=tmp_path / "home")
    try:
        url = f"http://127.0.0.1:{view.port}/"
        with urllib.request.urlopen(url + "api/v1/nni/experiment", timeout=10) as response:
            profile = json.loads(response.read())
        assert (profile["optimizeMode"], profile["bestTrialId"]) == ("minimize", lowest)
        ui.page.goto(url + "#/overview")
        expect(ui.get("app")).to_have_attribute("data-loaded", "true")
        expect(ui.get("bestTrial")).to_have_text(f"trial {lowest}")
        expect(ui.get("optimizeMode")).to_have_text("minimize")
        assert float(ui.get("bestResult").inner_text()) == pytest.approx(finals[lowest], rel=1e-5)
        ui.screenshot("best-is-lowest")
    finally:
        view.stop()


def test_a_waiting_trial_offers_no_kill_control_and_a_running_one_does(
        ui, tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch):
    # A strategy submits two trials with room for one: the second waits (WAITING) for a slot.
    write_script(code_dir, "trial.py", GATED_TRIAL)
    gate_dir = tmp_path / "gate"
    gate_dir.mkdir()
    monkeypatch.setenv("GATE_DIR", str(gate_dir))

    def strategy(experiment: Experiment) -> None:
        for handle in [experiment.submit_trial({"x": x}) for x in (1, 2)]:
            handle.wait(timeout=120)

    experiment = Experiment(ExperimentConfig(
        trial_command="python3 trial.py", trial_code_directory=code_dir, trial_concurrency=1,
        max_trial_number=2, trial_grace_period=1, experiment_working_directory=tmp_path / "home"),
        strategy=strategy)
    run = GatedExperiment(experiment, gate_dir / "release")
    experiment.start(port=0)
    try:
        [running] = running_trials(run, 1)
        waiting = wait_until(lambda: next((trial_id for trial_id, status in run.statuses().items()
                                           if status == "WAITING"), None), what="a WAITING trial")
        kills = {view["trialJobId"]: view["canKill"] for view in _trial_views(run.url)}
        assert kills == {running: True, waiting: False}

        ui.page.goto(run.url + f"#/trials/{running}")
        expect(ui.get("trialDetailState")).to_have_text("RUNNING")
        expect(ui.get("killTrial")).to_be_visible()
        ui.page.goto(run.url + f"#/trials/{waiting}")
        expect(ui.get("trialDetailState")).to_have_text("WAITING")
        expect(ui.get("trialDetailId")).to_have_text(waiting)
        ui.screenshot("waiting-trial")
        expect(ui.get("killTrial")).to_have_count(0)
        assert run.statuses()[waiting] == "WAITING", "the trial must still wait while the page is checked"
    finally:
        run.release()
        experiment.stop()


def _trial_views(url: str) -> list[dict]:
    """The trials as the UI gets them (expmgr's views, in the changes)."""
    with urllib.request.urlopen(url + "api/v1/expmgr/changes", timeout=10) as response:
        return json.loads(response.read())["trials"]
