"""Each family of algorithms driving a real experiment: real trial processes, a real
dispatcher hosting the tuner or assessor, a real store."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from expmgr import Experiment, ExperimentConfig
from expmgr.layout import TrialFolder
from expmgr.store import open_store
from tests.helpers.common import write_script

# A learning curve x * step for STEPS steps. Trials whose x is in HOLD stay open after
# their last report until they are stopped (60 s at most), so the assessor's verdict,
# not a race with the trial's own end, decides whether they end EARLY_STOPPED.
CURVE_TRIAL = """
    import json, os, time
    import expmgr
    x = expmgr.get_next_parameter()["x"]
    steps = int(os.environ["STEPS"])
    for step in range(1, steps + 1):
        expmgr.report_intermediate_result(x * step)
    if x in json.loads(os.environ["HOLD"]):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.05)
    expmgr.report_final_result(x * steps)
"""


def _curve_experiment(tmp_path: Path, code_dir: Path, monkeypatch, xs: list[int], hold: list[int], steps: int,
                      assessor: dict) -> Experiment:
    """Trials with x taken in the order of ``xs``, one at a time, under ``assessor``."""
    write_script(code_dir, "trial.py", CURVE_TRIAL)
    monkeypatch.setenv("STEPS", str(steps))
    monkeypatch.setenv("HOLD", json.dumps(hold))
    return Experiment(_config(tmp_path, code_dir, search_space={"x": {"_type": "choice", "_value": xs}},
                              max_trial_number=len(xs), tuner={"name": "GridSearch"}, assessor=assessor))


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


PBT_TRIAL = """
    import json, os
    import expmgr
    lr = expmgr.get_next_parameter()["lr"]
    checkpoint = os.path.join(expmgr.get_checkpoint_dir(), "state.json")
    state = {"score": 0.0, "writer": None}
    if os.path.exists(checkpoint):
        with open(checkpoint) as file:
            state = json.load(file)
    print("resumed from", state["writer"], "at", state["score"])
    state = {"score": state["score"] + lr, "writer": expmgr.get_trial_id()}
    with open(checkpoint, "w") as file:
        json.dump(state, file)
    expmgr.report_final_result(state["score"])
"""


def test_pbt_trials_resume_from_the_checkpoint_of_the_member_they_exploit(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", PBT_TRIAL)
    config = _config(tmp_path, code_dir, search_space={"lr": {"_type": "uniform", "_value": [0, 1]}},
                     trial_concurrency=2, max_trial_number=12,
                     tuner={"name": "PBT", "class_args": {"population_size": 4, "fraction": 0.25, "seed": 3}})
    experiment = Experiment(config)
    assert experiment.run(port=0)
    with open_store(experiment.paths, readonly=True) as store:
        trials = store.trials()
        finals = {trial_id: metric.value for trial_id, metric in store.final_metrics().items()}
        sources = store.checkpoint_sources()
    assert [t.status.value for t in trials] == ["SUCCEEDED"] * 12
    generations = [trials[0:4], trials[4:8], trials[8:12]]
    assert not any(t.trial_id in sources for t in generations[0])
    for previous, current in zip(generations, generations[1:]):
        # A generation starts only when the one before has ended: every source is in it.
        assert {sources[t.trial_id] for t in current} <= {t.trial_id for t in previous}
        assert min(t.submit_time for t in current) >= max(t.end_time for t in previous)
        ranked = sorted(previous, key=lambda t: finals[t.trial_id])
        worst, best = ranked[0].trial_id, ranked[-1].trial_id
        used = [sources[t.trial_id] for t in current]
        assert worst not in used and used.count(best) == 2, "the worst member exploits the best one"
    for trial in trials[4:]:
        source = sources[trial.trial_id]
        stdout = TrialFolder(experiment.paths.trial_dir(trial.trial_id)).stdout.read_text()
        assert f"resumed from {source} at {finals[source]}" in stdout
        assert abs(finals[trial.trial_id] - (finals[source] + trial.parameters["lr"])) < 1e-9


def test_optuna_nsga2_optimizes_two_metrics_of_a_real_experiment(tmp_path: Path, code_dir: Path):
    pytest.importorskip("optuna")
    write_script(code_dir, "trial.py", """
        import expmgr
        import numpy
        x = expmgr.get_next_parameter()["x"]
        # Accuracy grows with x, latency too: no x is best at both.
        expmgr.report_final_result({"default": x, "latency": numpy.float32(1 + 10 * x * x)})
    """)
    config = _config(tmp_path, code_dir, search_space={"x": {"_type": "uniform", "_value": [0, 1]}},
                     trial_concurrency=2, max_trial_number=8,
                     tuner={"name": "Optuna", "class_args": {
                         "sampler": "NSGAII", "sampler_args": {"population_size": 4}, "seed": 2,
                         "objectives": {"default": "maximize", "latency": "minimize"}}})
    experiment = Experiment(config)
    assert experiment.run(port=0)
    trials = _trials(experiment)
    assert [status for _, status, _ in trials] == ["SUCCEEDED"] * 8
    for params, _, value in trials:
        assert value == {"default": params["x"], "latency": pytest.approx(1 + 10 * params["x"] ** 2)}
        assert type(value["latency"]) is float
    assert "cannot use the result" not in experiment.paths.dispatcher_log.read_text()



@pytest.mark.parametrize("tuner", [
    {"name": "GPTuner", "class_args": {"optimize_mode": "minimize", "cold_start_num": 3, "seed": 3,
                                       "selection_num_warm_up": 1000, "selection_num_starting_points": 5}},
    # NNI's own className of Metis: our Metis, without NNI installed
    {"class_name": "nni.algorithms.hpo.metis_tuner.MetisTuner",
     "class_args": {"optimize_mode": "minimize", "cold_start_num": 3, "seed": 3, "selection_num_starting_points": 100}},
], ids=["GpTuner", "MetisTuner"])
def test_gp_and_metis_run_a_real_experiment_as_nni_configs_spell_them(tmp_path: Path, code_dir: Path, tuner,
                                                                      request):
    pytest.importorskip("sklearn")
    write_script(code_dir, "trial.py", """
        import expmgr
        p = expmgr.get_next_parameter()
        expmgr.report_final_result((p["x"] - 3) ** 2 + p["n"] + (0 if p["units"] == 32 else 1))
    """)
    space = {"x": {"_type": "uniform", "_value": [-10, 10]},
             "n": {"_type": "randint", "_value": [0, 3]},
             "units": {"_type": "choice", "_value": [16, 32, 64]}}
    config = _config(tmp_path, code_dir, search_space=space, max_trial_number=7, tuner=tuner)
    experiment = Experiment(config)
    assert experiment.run(port=0)
    trials = _trials(experiment)
    assert [status for _, status, _ in trials] == ["SUCCEEDED"] * 7
    for params, _, value in trials:
        assert -10 <= params["x"] <= 10 and params["n"] in (0, 1, 2) and params["units"] in (16, 32, 64)
        assert value == pytest.approx((params["x"] - 3) ** 2 + params["n"] + (0 if params["units"] == 32 else 1))
    assert len({json.dumps(params, sort_keys=True) for params, _, _ in trials}) == 7
    log = experiment.paths.dispatcher_log.read_text()
    assert f"tuner {request.node.callspec.id} ready" in log and "Traceback" not in log

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


# -- assessors and schedulers ------------------------------------------------------------

def test_medianstop_stops_the_trial_below_the_median_and_ends_its_process(tmp_path, code_dir, monkeypatch):
    # At step 3 the third trial's best (3) is below the median of the others' running
    # averages (12 and 10); the second (15 against 12) goes on.
    experiment = _curve_experiment(tmp_path, code_dir, monkeypatch, xs=[6, 5, 1], hold=[1], steps=6,
                                   assessor={"name": "Medianstop", "class_args": {"start_step": 3}})
    assert experiment.run(port=0)
    statuses = {params["x"]: status for params, status, _ in _trials(experiment)}
    assert statuses == {6: "SUCCEEDED", 5: "SUCCEEDED", 1: "EARLY_STOPPED"}
    assert "the assessor stops trial" in experiment.paths.experiment_log.read_text()


def test_asha_stops_a_trial_outside_the_top_of_its_rung_at_once(tmp_path, code_dir, monkeypatch):
    # Rungs at steps 1, 2 and 4 (grace 1, factor 2, max_t 8): the first trial is alone in
    # each rung, the second beats it; the third is below both at step 1 and stops there,
    # without waiting for any rung to fill.
    experiment = _curve_experiment(tmp_path, code_dir, monkeypatch, xs=[5, 6, 1], hold=[1], steps=8,
                                   assessor={"name": "ASHA", "class_args": {
                                       "grace_period": 1, "reduction_factor": 2, "max_t": 8}})
    assert experiment.run(port=0)
    statuses = {params["x"]: status for params, status, _ in _trials(experiment)}
    assert statuses == {5: "SUCCEEDED", 6: "SUCCEEDED", 1: "EARLY_STOPPED"}
