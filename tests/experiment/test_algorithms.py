"""Each family of algorithms driving a real experiment: real trial processes, a real
dispatcher hosting the tuner or assessor, a real store."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from expmgr import Experiment, ExperimentConfig
from expmgr.states import TrialState
from tests.conftest import write_script

# Trials whose parameter ``hold`` is true stay open after their last report until they
# are stopped (60 s at most), so an assessor's verdict, not a race with the trial's
# end, decides whether they end EARLY_STOPPED.
CURVE_TRIAL = """
    import time
    import expmgr
    p = expmgr.get_next_parameter()
    for step in range(1, p["steps"] + 1):
        expmgr.report_intermediate_result(p["x"] * step)
    if p["hold"]:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.05)
    expmgr.report_final_result(p["x"] * p["steps"])
"""


def _config(tmp_path: Path, code_dir: Path, **fields) -> ExperimentConfig:
    base = dict(trial_command="python3 trial.py", trial_code_directory=code_dir, trial_concurrency=1,
                experiment_working_directory=tmp_path / "home", trial_grace_period=5)
    base.update(fields)
    return ExperimentConfig(**base)


def _trials(experiment: Experiment) -> list[tuple[dict, str, object]]:
    """(parameters, status, final value) of every trial, in submission order."""
    finals = {r.trialJobId: r.value for r in experiment.export_data()}
    return [(t.parameters, t.status, finals.get(t.trialJobId))
            for t in sorted(experiment.list_trial_jobs(), key=lambda t: t.sequenceId)]


# -- tuners ----------------------------------------------------------------------------------

def test_tpe_experiment_is_repeatable_under_a_seed_and_stays_in_the_space(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", """
        import expmgr
        p = expmgr.get_next_parameter()
        expmgr.report_final_result((p["x"] - 3) ** 2 + (0 if p["kind"] == "b" else 4) + p["n"])
    """)
    space = {"x": {"_type": "uniform", "_value": [-10, 10]},
             "kind": {"_type": "choice", "_value": ["a", "b", "c"]},
             "n": {"_type": "randint", "_value": [0, 3]}}
    runs = []
    for name in ("first", "second"):
        config = _config(tmp_path / name, code_dir, search_space=space, max_trial_number=8,
                         tuner={"name": "tpe", "class_args": {"optimize_mode": "minimize", "seed": 7,
                                                              "tpe_args": {"n_startup_jobs": 3}}})
        experiment = Experiment(config)
        assert experiment.run(port=0)
        runs.append(_trials(experiment))
    assert runs[0] == runs[1], "the same seed gives the same trials"
    assert [status for _, status, _ in runs[0]] == ["SUCCEEDED"] * 8
    for params, _, _ in runs[0]:
        assert -10 <= params["x"] <= 10 and params["kind"] in ("a", "b", "c") and params["n"] in (0, 1, 2)


WAITING_FOREVER_TUNER = """
    from expmgr.algorithms.tuner import NoTrialYetError, Tuner

    class WaitingTuner(Tuner):
        def update_search_space(self, search_space):
            self.given = 0

        def generate_parameters(self, parameter_id, **kwargs):
            if self.given == 2:
                raise NoTrialYetError()
            self.given += 1
            return {"x": self.given}

        def receive_trial_result(self, parameter_id, parameters, value, **kwargs):
            pass
"""


def test_tuner_that_waits_with_no_trial_running_ends_the_search(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", "import expmgr\nexpmgr.report_final_result(expmgr.get_next_parameter()['x'])\n")
    tuner_dir = tmp_path / "tuner"
    tuner_dir.mkdir()
    write_script(tuner_dir, "waiting.py", WAITING_FOREVER_TUNER)
    config = _config(tmp_path, code_dir, search_space={"x": {"_type": "choice", "_value": [1, 2]}},
                     trial_concurrency=2, max_trial_number=10,
                     tuner={"class_name": "waiting.WaitingTuner", "code_directory": tuner_dir})
    experiment = Experiment(config)
    assert experiment.run(port=0)
    assert experiment.get_status() == "DONE"
    assert [status for _, status, _ in _trials(experiment)] == ["SUCCEEDED"] * 2
    log = experiment.paths.experiment_log.read_text()
    assert "the tuner waits for results but no trial is running" in log
