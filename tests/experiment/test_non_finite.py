"""Non-finite results (NaN, infinities; docs/architecture.md, "Non-finite results"):
stored as reported, shown as "NaN"/"Infinity" strings in valid JSON, never the best
trial, and never given to the tuner, which hears of such a trial as a failure."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from expmgr import Experiment, ExperimentConfig
from expmgr.store import open_store
from tests.helpers.common import REPO, write_script

RECORDING_TUNER = """
    import json, os
    from expmgr.algorithms.tuner import NoMoreTrialError, Tuner

    class RecordingTuner(Tuner):
        '''x = 1, 2, 3, 4 in turn; writes what it is told to $TUNER_LOG, one JSON line each.'''

        def _log(self, **event):
            with open(os.environ["TUNER_LOG"], "a") as log:
                log.write(json.dumps({k: repr(v) if isinstance(v, float) else v for k, v in event.items()}) + "\\n")

        def update_search_space(self, search_space):
            pass

        def generate_parameters(self, parameter_id, **kwargs):
            if parameter_id >= 4:
                raise NoMoreTrialError()
            return {"x": parameter_id + 1}

        def receive_trial_result(self, parameter_id, parameters, value, **kwargs):
            self._log(event="report", x=parameters["x"], value=value)

        def trial_end(self, parameter_id, success, **kwargs):
            self._log(event="end", x=parameter_id + 1, success=success)
"""

# x -> the final result its trial reports; maximized, so infinity would "win"
TRIAL = """
    import expmgr
    x = expmgr.get_next_parameter()["x"]
    expmgr.report_intermediate_result(float("nan"))
    expmgr.report_final_result({1: float("nan"), 2: 5.0, 3: float("inf"), 4: {"default": 2.0, "loss": float("-inf")}}[x])
"""


def strict_json(text: str) -> object:
    """json.loads that refuses NaN and Infinity, as every other JSON parser does."""
    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def test_non_finite_results_are_stored_shown_as_strings_never_best_and_not_given_to_the_tuner(
        tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch):
    write_script(code_dir, "recording_tuner.py", RECORDING_TUNER)
    write_script(code_dir, "trial.py", TRIAL)
    tuner_log = tmp_path / "tuner.log"
    monkeypatch.setenv("TUNER_LOG", str(tuner_log))
    home = tmp_path / "home"
    experiment = Experiment(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1, 2, 3, 4]}}, trial_command="python3 trial.py",
        trial_code_directory=code_dir, trial_concurrency=1, max_trial_number=4,
        tuner={"class_name": "recording_tuner.RecordingTuner", "code_directory": code_dir},
        experiment_working_directory=home))
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=120)
        assert experiment.get_status() == "DONE"
        # The best trial is the finite 5.0, not NaN (first) nor infinity (larger).
        best = experiment.best_trial()
        assert best is not None and best.parameter == {"x": 2} and best.value == 5.0
    finally:
        experiment.stop()
    # What the web UI and NNI clients read is valid JSON, the non-finite numbers named.
    view = Experiment.view(experiment.id, port=0, non_blocking=True, home=home)
    try:
        port = view.port
        answers = {}
        for route in ("trial-jobs", "metric-data", "export-data", "metric-data-latest"):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/nni/{route}", timeout=30) as response:
                answers[route] = strict_json(response.read().decode())
        exported = {tuple(r["parameter"].values()): strict_json(r["value"]) for r in answers["export-data"]}
        assert exported == {(1,): "NaN", (2,): 5.0, (3,): "Infinity", (4,): {"default": 2.0, "loss": "-Infinity"}}
        intermediate = [strict_json(strict_json(m["data"])) for m in answers["metric-data"] if m["type"] == "PERIODICAL"]
        assert intermediate == ["NaN"] * 4
    finally:
        view.stop()
    # Stored as reported.
    with open_store(experiment.paths, readonly=True) as store:
        stored = {tuple(t.parameters.values()): store.final_metrics()[t.trial_id].value for t in store.trials()}
    assert math.isnan(stored[(1,)]) and stored[(3,)] == math.inf and stored[(2,)] == 5.0
    # The tuner heard only finite results; a non-finite one ended its trial as a failure.
    events = [json.loads(line) for line in tuner_log.read_text().splitlines()]
    reports = sorted((e["x"], e["value"]) for e in events if e["event"] == "report")
    assert [x for x, _ in reports] == [2, 4] and reports[0][1] == "5.0" and reports[1][1]["default"] == 2.0
    assert sorted((e["x"], e["success"]) for e in events if e["event"] == "end") == [
        (1, False), (2, True), (3, False), (4, True)]
    # expctl experiment export: valid JSON, and CSV naming the values.
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    for form in ("json", "csv"):
        result = subprocess.run([sys.executable, "-m", "expmgr.cli", "experiment", "export", experiment.id,
                                 "--format", form], env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        if form == "json":
            values = sorted(r["value"] for r in strict_json(result.stdout))  # NNI's: value a JSON string
            assert values == sorted(['"NaN"', "5.0", '"Infinity"', '{"default": 2.0, "loss": "-Infinity"}'])
        else:
            assert "NaN" in result.stdout and "-Infinity" in result.stdout
