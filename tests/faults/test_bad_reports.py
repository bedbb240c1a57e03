"""A bad report is that report's problem: real trials write bad lines to their
metrics.jsonl or send reports the store cannot take, and the experiment still
finishes DONE, each bad line named in experiment.log and the trial's trial.log,
and a resume works."""
from __future__ import annotations

import json
from pathlib import Path

from expmgr import Experiment, ExperimentConfig
from expmgr.layout import TrialFolder
from tests.helpers.common import write_script

# Line 2 of the trial's metrics.jsonl, by kind (line 1 is a good report).
BAD_LINES = {
    "invalid_utf8": b'{"attempt": 1, "sequence": 5, "type": "PERIODICAL", "value": {"default": 1, "tag": "\xff\xfe"}}',
    "too_long": b'{"attempt": 1, "sequence": 5, "type": "PERIODICAL", "value": {"default": 1, "pad": "'
                + b"x" * 200_000 + b'"}}',
    "nested_too_deep": b"[" * 100_000 + b"]" * 100_000,
    "not_json": b'{"attempt": 1, "sequence": 5, "type": "FINAL", "value": 7',
    "sequence_beyond_int64": b'{"attempt": 1, "sequence": 18446744073709551616, "type": "FINAL", "value": 7}',
    "not_a_number": b'{"attempt": 1, "sequence": 5, "type": "FINAL", "value": "high"}',
}
HUGE = 2**64 - 1
BEYOND_FLOAT = 10**400
"""An integer no float can hold: stored exactly, never a number to sort by."""

TRIAL = f"""
    import os, expmgr
    BAD_LINES = {BAD_LINES!r}
    kind = expmgr.get_next_parameter()["kind"]
    expmgr.report_intermediate_result(1)
    if kind in BAD_LINES:
        with open(os.path.join(os.environ["EXPMGR_TRIAL_DIR"], "metrics.jsonl"), "ab") as file:
            file.write(BAD_LINES[kind] + b"\\n")
    # integers SQLite cannot bind, or no float can hold: stored exactly
    expmgr.report_final_result({{"huge_integer": {HUGE}, "beyond_float": {BEYOND_FLOAT}}}.get(kind, 3))
"""


def _config(tmp_path: Path, code_dir: Path, kinds: list[str]) -> ExperimentConfig:
    return ExperimentConfig(search_space={"kind": {"_type": "choice", "_value": kinds}},
                            trial_command="python3 trial.py", trial_code_directory=code_dir, trial_concurrency=3,
                            max_trial_number=len(kinds), tuner={"name": "GridSearch"},
                            experiment_working_directory=tmp_path / "home")


def test_each_kind_of_bad_metrics_line_is_skipped_and_named_and_the_experiment_finishes_and_resumes(
        tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", TRIAL)
    kinds = [*BAD_LINES, "huge_integer", "beyond_float"]
    exact = {"huge_integer": HUGE, "beyond_float": BEYOND_FLOAT}
    experiment = Experiment(_config(tmp_path, code_dir, kinds))
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=90), "a bad line must not leave its trial RUNNING"
    finally:
        experiment.stop()
    assert experiment.get_status() == "DONE", experiment.get_error()
    trials = experiment.list_trial_jobs()
    assert [t.status for t in trials] == ["SUCCEEDED"] * len(kinds)
    log = experiment.paths.experiment_log.read_text()
    for trial in trials:
        kind = trial.parameters["kind"]
        files = TrialFolder(experiment.paths.trial_dir(trial.trialJobId))
        if kind in exact:
            assert trial.finalMetric == exact[kind] and isinstance(trial.finalMetric, int), "stored exactly"
            continue
        assert trial.finalMetric == 3, f"{kind}: the good reports after the bad line are kept"
        skipped = f"{files.metrics}:2: report skipped"
        assert skipped in files.trial_log.read_text(), kind
        assert skipped in log, kind
    assert sorted(r.value for r in experiment.export_data()) \
        == [3] * len(BAD_LINES) + [HUGE, BEYOND_FLOAT]

    resumed = Experiment.resume(experiment.id, port=0, home=tmp_path / "home")
    assert resumed.get_status() == "DONE", resumed.get_error()
    assert [t.status for t in resumed.list_trial_jobs()] == ["SUCCEEDED"] * len(kinds)


def test_reports_the_store_cannot_take_are_refused_to_the_trial_with_400_and_the_experiment_goes_on(
        tmp_path: Path, code_dir: Path):
    """Over HTTP: an oversized value, a sequence beyond int64, a body nested too deep;
    and ``report_*`` refuses an oversized report before it reaches metrics.jsonl."""
    write_script(code_dir, "trial.py", """
        import json, os, urllib.error, urllib.request
        import expmgr
        from expmgr import trial
        expmgr.get_next_parameter()
        port, trial_id = os.environ["EXPMGR_MANAGER_PORT"], expmgr.get_trial_id()
        url = f"http://127.0.0.1:{port}/api/v1/expmgr/trials/{trial_id}/metrics"
        def post(body):
            request = urllib.request.Request(url, body, method="POST", headers={
                "Content-Type": "application/json", trial.TOKEN_HEADER: os.environ[trial.ENV_TOKEN]})
            try:
                with urllib.request.urlopen(request, timeout=30) as answer:
                    return answer.status, answer.read().decode()
            except urllib.error.HTTPError as error:
                return error.code, error.read().decode()
        big = {"default": 1, "pad": "x" * 70000}
        for name, body in [
                ("oversized", json.dumps({"attempt": 1, "sequence": 50, "type": "PERIODICAL", "value": big}).encode()),
                ("huge_sequence", b'{"attempt": 1, "sequence": 18446744073709551616, "type": "FINAL", "value": 1}'),
                ("too_deep", b"[" * 30000 + b"]" * 30000)]:
            status, text = post(body)
            print("ANSWER", name, status, text, flush=True)
        try:
            expmgr.report_intermediate_result(big)
        except ValueError as error:
            print("REFUSED", error, flush=True)
        expmgr.report_final_result(HUGE)
    """.replace("HUGE", str(HUGE)))
    config = _config(tmp_path, code_dir, ["one"])
    experiment = Experiment(config)
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=60)
    finally:
        experiment.stop()
    assert experiment.get_status() == "DONE", experiment.get_error()
    [trial] = experiment.list_trial_jobs()
    files = TrialFolder(experiment.paths.trial_dir(trial.trialJobId))
    stdout = files.stdout.read_text()
    answers = {line.split()[1]: line.split(" ", 3)[2:] for line in stdout.splitlines() if line.startswith("ANSWER")}
    # refused by the server's body limit for reports before the body is read
    assert answers["oversized"][0] == "413" and "more than the 65536 bytes" in answers["oversized"][1]
    status, text = answers["huge_sequence"]
    assert status == "400" and "sequence: expected a non-negative integer" in text
    assert answers["too_deep"][0] == "400" and "body: not JSON" in answers["too_deep"][1]
    assert "REFUSED a report is at most 65536 bytes" in stdout
    assert len(files.metrics.read_text().splitlines()) == 1, "the refused report never reached metrics.jsonl"
    assert trial.status == "SUCCEEDED" and trial.finalMetric == HUGE


def test_an_intermediate_result_beyond_any_float_does_not_crash_the_assessor(tmp_path: Path, code_dir: Path):
    """10**400 is stored exactly; the assessor (in the dispatcher) gets an infinity, not an
    integer it cannot compare, which would end the experiment in ERROR."""
    write_script(code_dir, "trial.py", f"""
        import expmgr
        x = expmgr.get_next_parameter()["x"]
        for step in range(3):
            expmgr.report_intermediate_result({BEYOND_FLOAT} if x == 1 else step)
        expmgr.report_final_result(x)
    """)
    experiment = Experiment(ExperimentConfig(
        # the big one first: the tuner is asked for more trials after it, so a dead dispatcher shows
        search_space={"x": {"_type": "choice", "_value": [1, 0, 2]}}, trial_command="python3 trial.py",
        trial_code_directory=code_dir, trial_concurrency=1, max_trial_number=3, tuner={"name": "GridSearch"},
        assessor={"name": "Medianstop"}, experiment_working_directory=tmp_path / "home"))
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=60)
    finally:
        experiment.stop()
    assert experiment.get_status() == "DONE", experiment.get_error()
    [big] = [t for t in experiment.list_trial_jobs() if t.parameters["x"] == 1]
    assert big.status == "SUCCEEDED" and big.finalMetric == 1
    assert f"{BEYOND_FLOAT}" in experiment.paths.database.read_bytes().decode("latin-1"), "stored exactly"
