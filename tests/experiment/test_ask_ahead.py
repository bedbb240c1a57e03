"""Asking ahead in a real experiment: the tuners that ask ahead (GridSearch, Batch) hand out
exactly their sequence, within maxTrialNumber; what the dispatcher computed ahead and never
handed out is not a trial."""
from __future__ import annotations

from pathlib import Path

import pytest

from expmgr import Experiment, ExperimentConfig
from tests.helpers.common import write_script

BATCH = [{"x": 10}, {"x": 11}, {"x": 12}, {"x": 10}, {"x": 14}]


@pytest.mark.parametrize("tuner, space, budget, expected", [
    ("GridSearch", {"x": {"_type": "choice", "_value": list(range(6))}}, 4, list(range(4))),
    ("GridSearch", {"x": {"_type": "choice", "_value": list(range(6))}}, 10, list(range(6))),
    ("Batch", {"combine_params": {"_type": "choice", "_value": BATCH}}, 3, [10, 11, 12]),
    ("Batch", {"combine_params": {"_type": "choice", "_value": BATCH}}, 9, [10, 11, 12, 10, 14]),
])
def test_the_tuners_that_ask_ahead_run_exactly_their_sequence_within_the_budget(
        tmp_path: Path, code_dir: Path, tuner, space, budget, expected):
    write_script(code_dir, "trial.py", """
        import expmgr
        expmgr.report_final_result(expmgr.get_next_parameter()["x"])
    """)
    experiment = Experiment(ExperimentConfig(
        search_space=space, trial_command="python3 trial.py", trial_code_directory=code_dir,
        trial_concurrency=2, max_trial_number=budget, tuner={"name": tuner},
        experiment_working_directory=tmp_path / "home"))
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=120)
        assert experiment.get_status() == "DONE"
        trials = sorted(experiment.list_trial_jobs(), key=lambda t: t.sequenceId)
        assert [t.parameters["x"] for t in trials] == expected
        assert [t.sequenceId for t in trials] == list(range(len(expected)))
        assert all(t.status == "SUCCEEDED" for t in trials)
        log = experiment.paths.dispatcher_log.read_text()
        assert "(it asks ahead)" in log
    finally:
        experiment.stop()
