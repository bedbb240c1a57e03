"""A strategy experiment with an assessor and no tuner: the dispatcher hosts the assessor
alone, and the assessor stops the strategy's bad trials early (issue 12, item 7)."""
from __future__ import annotations

from pathlib import Path

from expmgr import Experiment
from expmgr.config import AlgorithmConfig
from expmgr.states import TrialState
from tests.helpers.common import write_script
from tests.helpers.experiments import strategy_config

CURVE_TRIAL = """
    import time
    import expmgr
    x = expmgr.get_next_parameter()["x"]
    for step in range(6):
        expmgr.report_intermediate_result(x)
        time.sleep(0.3)
    expmgr.report_final_result(x)
"""


def test_strategy_with_an_assessor_and_no_tuner_runs_and_its_bad_trial_is_stopped_early(
        tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", CURVE_TRIAL)
    outcomes = []

    def strategy(experiment: Experiment) -> None:
        # The good trial ends first, so the assessor has a finished curve to compare with.
        outcomes.append(experiment.submit_trial({"x": 10}).wait(timeout=60).status)
        outcomes.append(experiment.submit_trial({"x": 1}).wait(timeout=60).status)

    config = strategy_config(tmp_path, code_dir, trial_concurrency=1,
                             assessor=AlgorithmConfig(name="Medianstop", class_args={"start_step": 2}))
    experiment = Experiment(config, strategy=strategy)
    assert experiment.run(port=0), experiment.get_error()
    assert experiment.get_status() == "DONE"
    assert outcomes == [TrialState.SUCCEEDED, TrialState.EARLY_STOPPED]
    assert "assessor MedianstopAssessor ready" in experiment.paths.dispatcher_log.read_text()
