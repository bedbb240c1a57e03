"""An ``Experiment`` drives its search through one control (experiment/control.py): the
view's control refuses every command saying that the experiment is only viewed, and what to
do instead; an experiment neither started, connected nor viewed says it was not started.
(The local control is the one the strategy, update and kill tests go through; the connected
one, test_nni_api.py's connected test.)"""
from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from expmgr import Experiment
from expmgr.experiment import ExperimentError
from tests.helpers.fill import fill_experiment


def test_a_viewed_experiment_refuses_every_command_naming_itself_and_that_it_is_only_viewed(tmp_path: Path):
    home = tmp_path / "home"
    exp_id = fill_experiment(home, trials=2, metrics_per_trial=1)
    view = Experiment.view(exp_id, port=0, non_blocking=True, home=home)
    try:
        trial_id = view.list_trial_jobs()[0].trialJobId
        only_viewed = rf"^experiment {exp_id} is only viewed \(read-only, Experiment\.view\): "
        resume = rf"; resume it to change it: Experiment\(None, '{exp_id}'\)\.resume\(\)$"
        with pytest.raises(ExperimentError, match=only_viewed + r"UpdateConfig\(field='maxTrialNumber', value=5\) "
                                                               r"is refused" + resume):
            view.update_max_trial_number(5)
        with pytest.raises(ExperimentError, match=only_viewed + rf"KillTrial\(trial_id='{trial_id}'\) is refused"
                                                  + resume):
            view.kill_trial_job(trial_id)
        with pytest.raises(ExperimentError, match=only_viewed + r"SubmitTrial\(parameters=\{'x': 1\}\) is refused"):
            view.submit_trial({"x": 1})
        with pytest.raises(ExperimentError, match=only_viewed + r"no search runs to wait for; stop\(\) closes the view$"):
            view.wait(timeout=1)
        # Refused, and still served: the view goes on until stop().
        with urllib.request.urlopen(f"http://127.0.0.1:{view.port}/api/v1/nni/check-status", timeout=30) as answer:
            assert json.loads(answer.read())["status"] == "DONE"
    finally:
        view.stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{view.port}/api/v1/nni/check-status", timeout=30)


def test_an_experiment_not_started_refuses_commands_saying_so(tmp_path: Path):
    experiment = Experiment("local")
    for command in (lambda: experiment.update_trial_concurrency(2), lambda: experiment.kill_trial_job("a1b2c"),
                    lambda: experiment.submit_trial({"x": 1}), lambda: experiment.wait(timeout=0)):
        with pytest.raises(ExperimentError, match=rf"^experiment {experiment.id} was not started$"):
            command()
    experiment.stop()   # nothing to stop: no error
