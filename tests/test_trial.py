"""The trial API, in real trial processes: run by hand, and in an experiment whose
manager cannot be reached when the trial reports."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from expmgr import Experiment, ExperimentConfig
from tests.helpers.common import ENV_WITH_REPO, wait_until, write_script


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
        os.environ["EXPMGR_MANAGER_PORT"] = "1"   # nothing listens there: every send fails,
        os.environ["EXPMGR_MANAGER_SOCKET"] += ".gone"   # over the report socket and then over HTTP
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


class _OneElementTensor:
    """What a tensor library's one-element tensor looks like to the trial API: ``item()``,
    ``__array__``, ``numel()``, and an ``__index__`` that truncates (``int(t)`` is 0)."""

    def __init__(self, *values: float) -> None:
        self.values = values
        self.shape = (len(values),) if len(values) != 1 else ()

    def item(self) -> float:
        if len(self.values) != 1:
            raise RuntimeError(f"a Tensor with {len(self.values)} elements cannot be converted to Scalar")
        return self.values[0]

    def numel(self) -> int:
        return len(self.values)

    def __array__(self) -> object:
        import numpy
        return numpy.array(self.values[0] if len(self.values) == 1 else self.values)

    def __index__(self) -> int:
        return int(self.values[0])

    def __float__(self) -> float:
        return float(self.item())


def test_arrays_and_tensors_of_one_element_are_their_value_never_truncated():
    from decimal import Decimal
    from fractions import Fraction
    from expmgr.trial import _plain_metric
    numpy = pytest.importorskip("numpy")
    assert _plain_metric(numpy.array(0.5)) == 0.5 and type(_plain_metric(numpy.array(0.5))) is float
    assert _plain_metric(numpy.array([0.75])) == 0.75
    assert _plain_metric(numpy.array(3)) == 3 and type(_plain_metric(numpy.array(3))) is int
    assert _plain_metric(_OneElementTensor(0.97)) == 0.97
    assert _plain_metric(Decimal("0.125")) == 0.125 and _plain_metric(Fraction(1, 4)) == 0.25
    assert _plain_metric({"default": _OneElementTensor(0.8), "loss": _OneElementTensor(1.25),
                          "acc": numpy.array(0.5)}) == {"default": 0.8, "loss": 1.25, "acc": 0.5}


@pytest.mark.parametrize("make", [
    lambda numpy: numpy.array([0.1, 0.2, 0.3]), lambda numpy: numpy.array([]), lambda numpy: numpy.zeros((2, 2)),
    lambda numpy: _OneElementTensor(0.1, 0.2, 0.3), lambda numpy: numpy.bool_(True)],
    ids=["3-element array", "empty array", "2x2 array", "3-element tensor", "numpy bool"])
def test_many_elements_or_no_number_is_refused_naming_the_call(make):
    from expmgr.trial import _plain_metric
    numpy = pytest.importorskip("numpy")
    value = make(numpy)
    for metric, where in ((value, "the metric"), ({"default": value}, "its 'default'"),
                          ({"default": 1.0, "loss": value}, "its 'loss'")):
        with pytest.raises(TypeError, match=rf"^report_final_result\(\): {where} is .*not a number"):
            _plain_metric(metric, "report_final_result()")


def test_a_trial_reporting_tensors_and_0d_arrays_stores_their_values(tmp_path: Path, code_dir: Path):
    """torch where pip gave it (the test extra on Python 3.11), else a stand-in with its interface."""
    import importlib.util
    if importlib.util.find_spec("torch") is not None:
        make_tensor = "import torch\ntensor = torch.tensor"
    else:
        make_tensor = f"import sys\nsys.path.insert(0, {str(Path(__file__).parent.parent)!r})\n" \
                      "from tests.test_trial import _OneElementTensor as tensor"
    write_script(code_dir, "trial.py", make_tensor + """
import numpy
import expmgr
expmgr.get_next_parameter()
expmgr.report_intermediate_result(numpy.array(0.5))
expmgr.report_intermediate_result(tensor(0.25))
expmgr.report_final_result({"default": tensor(0.75), "loss": tensor(1.25), "acc": numpy.array(0.5)})
try:
    expmgr.report_final_result(numpy.array([0.1, 0.2, 0.3]))
except TypeError as error:
    print("refused:", error)
""")
    files = run_one_trial(tmp_path, code_dir)
    lines = [json.loads(line) for line in (files / "metrics.jsonl").read_text().splitlines()]
    assert [line["value"] for line in lines] == [0.5, 0.25, {"default": 0.75, "loss": 1.25, "acc": 0.5}]
    assert "refused: report_final_result(): the metric is an array of 3 elements" in (files / "stdout").read_text()


def test_an_array_reported_as_a_result_fails_the_trial_with_a_message_naming_the_call(tmp_path: Path,
                                                                                      code_dir: Path):
    write_script(code_dir, "trial.py", """
        import numpy
        import expmgr
        expmgr.get_next_parameter()
        expmgr.report_final_result(numpy.array([0.1, 0.2, 0.3]))
    """)
    files = run_one_trial_unchecked(tmp_path, code_dir)
    assert "report_final_result(): the metric is an array of 3 elements" in (files / "stderr").read_text()
    assert not (files / "metrics.jsonl").exists()


def run_one_trial(tmp_path: Path, code_dir: Path, **config: object) -> Path:
    """Run code_dir/trial.py once in an experiment; return its trial folder."""
    return run_one_trial_unchecked(tmp_path, code_dir, must_succeed=True, **config)


def run_one_trial_unchecked(tmp_path: Path, code_dir: Path, must_succeed: bool = False, **config: object) -> Path:
    """As run_one_trial, for a trial that may fail."""
    experiment = Experiment(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1]}}, trial_command="python3 trial.py",
        trial_code_directory=code_dir, trial_concurrency=1, max_trial_number=1,
        tuner={"name": "GridSearch"}, experiment_working_directory=tmp_path / "home", **config))
    succeeded = experiment.run(port=0)
    assert succeeded or not must_succeed
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


COUNTING_TRIAL = """
    import os, time
    import expmgr
    expmgr.get_next_parameter()
    folder = os.environ["EXPMGR_TRIAL_DIR"]
    count = os.open(os.path.join(folder, "count"), os.O_WRONLY | os.O_CREAT)
    for i in range(1_000_000):
        print(f"line {i}")                   # buffered by Python unless the trial is told otherwise
        os.pwrite(count, f"{i + 1:>10}".encode(), 0)    # how many lines were printed, unbuffered
        time.sleep(0.005)
"""


def _assert_printed_lines_all_kept(files: Path, at_least: int = 0) -> None:
    count = files / "count"
    printed = int(count.read_text() or 0) if count.exists() else 0
    lines = (files / "stdout").read_text().splitlines()
    # Killed between a print and its count, the file holds one line more than counted.
    assert printed >= at_least and len(lines) in (printed, printed + 1)
    assert lines == [f"line {i}" for i in range(len(lines))]


def test_a_trial_stopped_by_max_trial_duration_keeps_every_line_it_printed(tmp_path: Path, code_dir: Path,
                                                                          monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)  # as in a user's shell
    write_script(code_dir, "trial.py", COUNTING_TRIAL)
    # Killed 3 s after its start, however many lines it printed by then (hundreds, unless a
    # loaded machine took that long to start it): every one is in its stdout.
    files = run_one_trial_unchecked(tmp_path, code_dir, max_trial_duration="3s", trial_grace_period="5s")
    _assert_printed_lines_all_kept(files)


def test_a_cancelled_trial_keeps_every_line_it_printed(tmp_path: Path, code_dir: Path,
                                                       monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    write_script(code_dir, "trial.py", COUNTING_TRIAL)
    experiment = Experiment(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1]}}, trial_command="python3 trial.py",
        trial_code_directory=code_dir, trial_concurrency=1, max_trial_number=1,
        tuner={"name": "GridSearch"}, experiment_working_directory=tmp_path / "home"))
    experiment.start(port=0)
    try:
        trial_id = wait_until(lambda: next((t.trialJobId for t in experiment.list_trial_jobs()
                                            if t.status == "RUNNING"), None), what="the running trial")
        files = experiment.paths.trial_dir(trial_id)
        wait_until(lambda: (files / "count").exists() and int((files / "count").read_text() or 0) >= 50,
                   what="50 lines printed")
        experiment.kill_trial_job(trial_id)
        wait_until(lambda: experiment.get_trial_job(trial_id).status == "USER_CANCELED", what="the cancel")
    finally:
        experiment.stop()
    _assert_printed_lines_all_kept(files, at_least=50)
