"""Strategies: Python code in the experiment process that submits trials and waits
for them, in its own thread, logging through bare ``nni.*`` loggers."""
from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import psutil
import pytest

import expmgr
from expmgr import Experiment, ExperimentConfig
from expmgr.experiment import ExperimentError
from expmgr.states import TrialState
from tests.helpers.common import wait_until, write_script
from tests.helpers.experiments import strategy_config

SQUARE_TRIAL = """
    import expmgr
    x = expmgr.get_next_parameter()["x"]
    expmgr.report_intermediate_result(x)
    expmgr.report_final_result(x * x)
"""


def test_strategy_submits_trials_waits_for_them_and_the_experiment_ends_done(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", SQUARE_TRIAL)
    seen = {}

    def strategy(experiment: Experiment) -> None:
        seen["current"] = expmgr.current_experiment()
        handles = [experiment.submit_trial({"x": x}) for x in (1, 2, 3)]
        seen["outcomes"] = [(h.parameters["x"], h.wait(timeout=60).status, h.wait().value) for h in handles]
        logging.getLogger("nni.my_search").info("strategy done with %d trials", len(handles))

    experiment = Experiment(strategy_config(tmp_path, code_dir), strategy=strategy)
    assert experiment.run(port=0)
    assert seen["current"] is experiment
    assert seen["outcomes"] == [(1, TrialState.SUCCEEDED, 1), (2, TrialState.SUCCEEDED, 4),
                                (3, TrialState.SUCCEEDED, 9)]
    trials = experiment.list_trial_jobs()
    assert [t.sequenceId for t in trials] == [0, 1, 2]
    parameter_file = json.loads((experiment.paths.trial_dir(trials[0].trialJobId) / "parameter.json").read_text())
    assert parameter_file["parameter_source"] == "customized"
    # The server shows the source stored with each trial, as its parameter.json says it.
    assert [t.hyperParameters[0].parameter_source for t in trials] == ["customized"] * 3
    log = experiment.paths.experiment_log.read_text()
    assert "(nni.my_search strategy-" in log and "strategy done with 3 trials" in log
    assert not experiment.paths.dispatcher_log.exists(), "no tuner, no assessor: no dispatcher"


def test_strategy_that_raises_puts_the_experiment_in_error_with_its_traceback(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", SQUARE_TRIAL)

    def strategy(experiment: Experiment) -> None:
        experiment.submit_trial({"x": 1}).wait(timeout=60)
        raise ValueError("the search went wrong")

    experiment = Experiment(strategy_config(tmp_path, code_dir), strategy=strategy)
    assert experiment.run(port=0) is False
    assert experiment.get_status() == "ERROR"
    assert "ValueError: the search went wrong" in experiment.get_error()
    assert "the strategy failed" in experiment.get_error()
    assert not psutil.Process().children(recursive=True)


def test_submissions_past_max_trial_number_are_refused(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", SQUARE_TRIAL)
    refused = []

    def strategy(experiment: Experiment) -> None:
        handles = [experiment.submit_trial({"x": x}) for x in range(2)]
        with pytest.raises(ExperimentError, match=r"maxTrialNumber \(2\)") as error:
            experiment.submit_trial({"x": 9})
        refused.append(str(error.value))
        with pytest.raises(ExperimentError, match="parameters: expected a dict"):
            experiment.submit_trial([1, 2])
        for handle in handles:
            handle.wait(timeout=60)

    experiment = Experiment(strategy_config(tmp_path, code_dir, max_trial_number=2), strategy=strategy)
    assert experiment.run(port=0)
    assert refused and len(experiment.list_trial_jobs()) == 2


def test_stop_answers_the_strategys_waits_and_refuses_new_trials(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", "import time\ntime.sleep(120)\n")
    outcomes, after_stop = [], []
    started = threading.Event()

    def strategy(experiment: Experiment) -> None:
        handles = [experiment.submit_trial({"x": x}) for x in range(3)]  # one more than concurrency
        started.set()
        outcomes.extend(h.wait(timeout=60).status for h in handles)
        try:
            experiment.submit_trial({"x": 9})
        except ExperimentError as error:
            after_stop.append(str(error))

    experiment = Experiment(strategy_config(tmp_path, code_dir, trial_grace_period=1), strategy=strategy)
    experiment.start(port=0)
    started.wait(30)
    wait_until(lambda: [t.status for t in experiment.list_trial_jobs()].count("RUNNING") == 2, what="two running")
    experiment.stop()
    assert experiment.get_status() == "STOPPED"
    assert outcomes == [TrialState.USER_CANCELED] * 3
    assert after_stop and "cannot submit a trial" in after_stop[0]
    assert sorted(t.status for t in experiment.list_trial_jobs()) == ["USER_CANCELED"] * 3


def test_strategy_can_run_beside_a_tuner_within_one_budget(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", SQUARE_TRIAL)

    def strategy(experiment: Experiment) -> None:
        experiment.submit_trial({"x": 100}).wait(timeout=60)

    config = strategy_config(tmp_path, code_dir, max_trial_number=4,
                             search_space={"x": {"_type": "choice", "_value": [1, 2, 3, 4, 5]}},
                             tuner={"name": "GridSearch"})
    experiment = Experiment(config, strategy=strategy)
    assert experiment.run(port=0)
    values = sorted(t.parameters["x"] for t in experiment.list_trial_jobs())
    assert len(values) == 4 and 100 in values


def test_a_strategy_must_be_callable():
    with pytest.raises(ExperimentError, match="strategy: expected a callable"):
        Experiment(ExperimentConfig(trial_command="true", trial_concurrency=1), strategy="not code")
