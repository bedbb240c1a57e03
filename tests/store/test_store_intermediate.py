"""Every intermediate (PERIODICAL) result a trial reports is kept: in the store (count,
values and order, for each reader) and through a real experiment to NNI's metric-data."""
from __future__ import annotations

import json
import time
from pathlib import Path

from expmgr import Experiment, ExperimentConfig
from expmgr.store import (
    ExperimentProfile,
    ExperimentStore,
    MetricRecord,
    TrialRecord,
)
from expmgr.states import ExperimentState, TrialState
from tests.helpers.common import write_script
from tests.helpers.server import get

# Values of several kinds: the store must give back each as written.
VALUES = {
    "t1": [0.5, 2, -1.25, {"default": 0.75, "loss": 3}, 0.0, 1e-12],
    "t2": [10, 9.5, {"default": 8}],
}


def test_every_intermediate_metric_written_is_read_back_in_order(tmp_path: Path):
    path = tmp_path / "db" / "experiment.sqlite"
    store = ExperimentStore.create(path, ExperimentProfile(
        id="abcd1234", name="t", config={"trialConcurrency": 2}, status=ExperimentState.RUNNING,
        error=None, start_time=time.time(), end_time=None, port=None, log_dir=str(tmp_path),
        platform="local", minimizes=False))
    try:
        for sequence_id, trial_id in enumerate(VALUES):
            store.add_trial(TrialRecord(trial_id, sequence_id, {"x": sequence_id}, TrialState.WAITING, time.time()))
            store.start_attempt(trial_id, 1, time.time())
        # Interleaved, as two running trials report.
        written = []
        for sequence in range(max(len(values) for values in VALUES.values())):
            for trial_id, values in VALUES.items():
                if sequence < len(values):
                    assert store.add_metric(MetricRecord(trial_id, 1, sequence, "PERIODICAL", values[sequence]))
                    written.append((trial_id, "PERIODICAL", sequence, values[sequence]))
        for trial_id, values in VALUES.items():
            assert store.add_metric(MetricRecord(trial_id, 1, len(values), "FINAL", values[-1]))
            written.append((trial_id, "FINAL", len(values), values[-1]))
    finally:
        store.close()

    reader = ExperimentStore.open(path, readonly=True)
    try:
        def shape(metrics: list[MetricRecord]) -> list[tuple]:
            return [(m.trial_id, m.type, m.sequence, m.value) for m in metrics]
        assert shape(reader.metrics()) == written
        for trial_id, values in VALUES.items():
            periodical = [m for m in reader.metrics(trial_id) if m.type == "PERIODICAL"]
            assert len(periodical) == len(values)
            assert [m.value for m in periodical] == values and [m.sequence for m in periodical] == list(range(len(values)))
        assert shape(reader.metrics_of_sequence_range(0, 1)) == written
        assert shape(reader.metrics_of_sequence_range(1, 1)) == [w for w in written if w[0] == "t2"]
        latest = {(m.trial_id, m.type): m.value for m in reader.latest_metrics()}
        assert latest == {(t, kind): values[-1] for t, values in VALUES.items() for kind in ("PERIODICAL", "FINAL")}
    finally:
        reader.close()


REPORTS = 7


def test_n_intermediate_reports_are_n_rows_of_metric_data(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", f"""
        import expmgr
        x = expmgr.get_next_parameter()["x"]
        for step in range({REPORTS}):
            expmgr.report_intermediate_result(x * 100 + step * 0.5)
        expmgr.report_final_result(x)
    """)
    home = tmp_path / "home"
    experiment = Experiment(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1, 2]}}, trial_command="python3 trial.py",
        trial_code_directory=code_dir, trial_concurrency=2, max_trial_number=2, tuner={"name": "GridSearch"},
        experiment_working_directory=home))
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=120) and experiment.get_status() == "DONE"
    finally:
        experiment.stop()
    view = Experiment.view(experiment.id, port=0, non_blocking=True, home=home)
    try:
        trials = {json.loads(t["hyperParameters"][0])["parameters"]["x"]: t["trialJobId"]
                  for t in get(view.port, "/api/v1/nni/trial-jobs")}
        everything = get(view.port, "/api/v1/nni/metric-data")
        for x, trial_id in trials.items():
            metrics = get(view.port, f"/api/v1/nni/metric-data/{trial_id}")
            assert metrics == [m for m in everything if m["trialJobId"] == trial_id]
            periodical = [m for m in metrics if m["type"] == "PERIODICAL"]
            assert len(periodical) == REPORTS
            assert [json.loads(json.loads(m["data"])) for m in periodical] == [x * 100 + s * 0.5 for s in range(REPORTS)]
            assert [m["type"] for m in metrics] == ["PERIODICAL"] * REPORTS + ["FINAL"]
    finally:
        view.stop()
