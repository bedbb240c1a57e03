"""Hyperband driving a real experiment: rungs wait for running trials (NoTrialYetError),
promoted trials carry a larger TRIAL_BUDGET and continue from the checkpoint of the
trial they were promoted from."""
from __future__ import annotations

from pathlib import Path

from expmgr import Experiment, ExperimentConfig
from tests.helpers.common import write_script

# Trains "epochs" up to TRIAL_BUDGET, continuing from the checkpoint folder when it has one;
# the final result is x (independent of the budget) and the epochs it trained itself.
TRIAL = """
    import json, os
    import expmgr
    params = expmgr.get_next_parameter()
    path = os.path.join(expmgr.get_checkpoint_dir(), "state.json")
    done = 0
    if os.path.exists(path):
        with open(path) as file:
            done = json.load(file)["epochs"]
    with open(path, "w") as file:
        json.dump({"epochs": params["TRIAL_BUDGET"]}, file)
    expmgr.report_final_result({"default": params["x"], "trained": params["TRIAL_BUDGET"] - done})
"""


def test_serial_hyperband_runs_a_whole_bracket_with_more_slots_than_a_rung_needs(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", TRIAL)
    config = ExperimentConfig(
        trial_command="python3 trial.py", trial_code_directory=code_dir, trial_concurrency=4,
        experiment_working_directory=tmp_path / "home", trial_grace_period=5,
        search_space={"x": {"_type": "uniform", "_value": [0, 1]}}, max_trial_number=13,
        tuner={"name": "Hyperband", "class_args": {"R": 9, "eta": 3, "exec_mode": "serial", "seed": 0}},
    )
    experiment = Experiment(config)
    assert experiment.run(port=0)
    trials = sorted(experiment.list_trial_jobs(), key=lambda t: t.sequenceId)
    finals = {r.trialJobId: r.value for r in experiment.export_data()}
    assert [t.status for t in trials] == ["SUCCEEDED"] * 13
    budgets = [t.parameters["TRIAL_BUDGET"] for t in trials]
    assert budgets == [1] * 9 + [3] * 3 + [9]  # the rungs of bracket s=2, each after the last
    xs = [t.parameters["x"] for t in trials]
    assert sorted(xs[9:12]) == sorted(xs[:9])[-3:] and xs[12] == max(xs[:9])
    trained = [finals[t.trialJobId]["trained"] for t in trials]
    assert trained == [1] * 9 + [2] * 3 + [6]  # promotions continue from their checkpoints
