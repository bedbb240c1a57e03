"""The trial API, in real trial processes: run by hand, and in an experiment whose
manager cannot be reached when the trial reports."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from expmgr import Experiment, ExperimentConfig
from tests.conftest import ENV_WITH_REPO, write_script


def test_trial_script_run_by_hand_gets_empty_parameters_and_logs_its_metrics(tmp_path: Path):
    script = write_script(tmp_path, "trial.py", """
        import expmgr
        print("params", expmgr.get_next_parameter())
        expmgr.report_intermediate_result(0.5)
        expmgr.report_final_result({"default": 0.75, "loss": 0.1})
        print("ids", expmgr.get_experiment_id(), expmgr.get_trial_id(), expmgr.get_sequence_id())
    """)
    env = {k: v for k, v in ENV_WITH_REPO.items() if not k.startswith("EXPMGR_")}
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "params {}" in result.stdout
    assert "WARNING" in result.stdout and "outside an experiment" in result.stdout
    assert "intermediate result: 0.5" in result.stdout
    assert "final result: {'default': 0.75, 'loss': 0.1}" in result.stdout
    assert "ids STANDALONE STANDALONE 0" in result.stdout
    assert not list(tmp_path.glob("metrics.jsonl"))


@pytest.mark.parametrize("metric", ["'0.5'", "True", "{'loss': 1}", "{'default': 'high'}", "None"])
def test_reporting_a_non_numeric_metric_is_an_error(tmp_path: Path, metric: str):
    script = write_script(tmp_path, "trial.py", f"import expmgr\nexpmgr.report_final_result({metric})\n")
    result = subprocess.run([sys.executable, str(script)], env=ENV_WITH_REPO, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1
    assert "a metric" in result.stderr


def test_reports_made_while_the_manager_is_unreachable_are_picked_up_from_metrics_jsonl(
        tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", """
        import os
        os.environ["EXPMGR_MANAGER_PORT"] = "1"   # nothing listens there: every send fails
        import expmgr
        x = expmgr.get_next_parameter()["x"]
        expmgr.report_intermediate_result(x)
        expmgr.report_final_result(x * 2)
    """)
    config = ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1, 2]}}, trial_command="python3 trial.py",
        trial_code_directory=code_dir, trial_concurrency=1, max_trial_number=2,
        tuner={"name": "GridSearch"}, experiment_working_directory=tmp_path / "home")
    experiment = Experiment(config)
    assert experiment.run(port=0)
    results = sorted((r.parameter["x"], r.value) for r in experiment.export_data())
    assert results == [(1, 2), (2, 4)]
    trial = experiment.list_trial_jobs()[0]
    files = experiment.paths.trial_dir(trial.trialJobId)
    assert "could not send a metric report" in (files / "stderr").read_text()
    lines = [json.loads(line) for line in (files / "metrics.jsonl").read_text().splitlines()]
    assert [line["type"] for line in lines] == ["PERIODICAL", "FINAL"]
    assert json.loads((files / "parameter.json").read_text())["parameters"] == trial.parameters


def test_report_encoding_matches_json_for_the_values_a_metric_holds():
    import json
    import math
    from expmgr.trial import _json_dumps, _json_loads, _plain_metric
    numpy = pytest.importorskip("numpy")
    samples = [0.1, -3, 1e-300, 2**70, "naïve \"quoted\"\n", [1, 2.5, None, True], {"default": 0.5, "k": {"x": [1]}}]
    for value in samples:
        assert json.loads(_json_dumps(value)) == value
        assert _json_loads(json.dumps(value)) == value
    assert math.isnan(_json_loads(_json_dumps(float("nan"))))
    assert _plain_metric(numpy.float32(0.25)) == 0.25 and type(_plain_metric(numpy.float32(0.25))) is float
    assert type(_plain_metric(numpy.int64(3))) is int
    assert _plain_metric({"default": numpy.float64(0.5), "loss": 1}) == {"default": 0.5, "loss": 1}
    multi = _plain_metric({"default": 0.5, "latency": numpy.float32(12.5), "count": numpy.int64(3), "tag": "a"})
    assert multi == {"default": 0.5, "latency": 12.5, "count": 3, "tag": "a"}
    assert (type(multi["latency"]), type(multi["count"])) == (float, int)
    with pytest.raises(ValueError, match="extra data"):
        _json_loads('{"a": 1} x')


def run_one_trial(tmp_path: Path, code_dir: Path, **config: object) -> Path:
    """Run code_dir/trial.py once in an experiment; return its trial folder."""
    experiment = Experiment(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1]}}, trial_command="python3 trial.py",
        trial_code_directory=code_dir, trial_concurrency=1, max_trial_number=1,
        tuner={"name": "GridSearch"}, experiment_working_directory=tmp_path / "home", **config))
    assert experiment.run(port=0)
    return experiment.paths.trial_dir(experiment.list_trial_jobs()[0].trialJobId)


def test_trial_nni_records_go_to_trial_log_and_raw_streams_stay_apart(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", """
        import sys
        import expmgr
        params = expmgr.get_next_parameter()
        import logging                      # imported after expmgr: still routed
        logging.basicConfig(level=logging.DEBUG)  # the user's own root setup must not echo nni records
        logging.getLogger("nni.model").debug("debug from the trial")
        logging.getLogger("nni.model").info("info from the trial")
        logging.getLogger("mylib").warning("a third-party warning")
        print("printed to stdout")
        print("printed to stderr", file=sys.stderr)
        expmgr.report_final_result(1.0)
    """)
    files = run_one_trial(tmp_path, code_dir, log_level="debug")
    trial_log = (files / "trial.log").read_text()
    stdout, stderr = (files / "stdout").read_text(), (files / "stderr").read_text()
    assert "DEBUG (nni.model) debug from the trial" in trial_log
    assert "INFO (nni.model) info from the trial" in trial_log
    assert "printed" not in trial_log and "third-party" not in trial_log
    assert stdout == "printed to stdout\n"
    assert "printed to stderr" in stderr and "a third-party warning" in stderr
    assert "from the trial" not in stdout + stderr


def test_trial_log_level_follows_the_experiment(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", """
        import logging
        import expmgr
        logging.getLogger("nni.model").info("info record")
        logging.getLogger("nni.model").warning("warning record")
    """)
    files = run_one_trial(tmp_path, code_dir, log_level="warning")
    assert (files / "trial.log").read_text().splitlines()[-1].endswith("WARNING (nni.model) warning record")
    assert "info record" not in (files / "trial.log").read_text()
