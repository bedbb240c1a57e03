"""The progress line after a resume goes on from the earlier runs: trials ended and the
best result so far are read from the store (issue 12, item 7: it restarted from zero)."""
from __future__ import annotations

import re
from pathlib import Path

from expmgr import Experiment, ExperimentConfig
from tests.helpers.common import wait_until, write_script

BLOCKING_TRIAL = """
    import os, time
    import expmgr
    x = expmgr.get_next_parameter()["x"]
    while x == 2 and not os.path.exists(os.path.join(os.environ["RELEASE_DIR"], "release")):
        time.sleep(0.05)
    expmgr.report_final_result(x)
"""


def test_the_first_progress_line_after_a_resume_counts_the_earlier_trials_and_keeps_their_best(
        tmp_path: Path, code_dir: Path, monkeypatch):
    write_script(code_dir, "trial.py", BLOCKING_TRIAL)
    monkeypatch.setenv("RELEASE_DIR", str(tmp_path))
    config = ExperimentConfig(search_space={"x": {"_type": "choice", "_value": [5, 1, 2, 3]}},
                              trial_command="python3 trial.py", trial_code_directory=code_dir,
                              trial_concurrency=1, max_trial_number=4, tuner={"name": "GridSearch"},
                              trial_grace_period=1, experiment_working_directory=tmp_path / "home")
    first = Experiment(config)
    first.start(port=0)
    wait_until(lambda: sum(t.status == "SUCCEEDED" for t in first.list_trial_jobs()) == 2
               and any(t.status == "RUNNING" for t in first.list_trial_jobs()), what="two trials done, one blocked")
    best_id = next(t.trialJobId for t in first.list_trial_jobs() if t.parameters["x"] == 5)
    first.stop()
    log = first.paths.experiment_log
    lines_before = len(log.read_text().splitlines())

    (tmp_path / "release").touch()
    resumed = Experiment.resume(first.id, port=0, home=tmp_path / "home")
    assert resumed.get_status() == "DONE"
    progress = [line for line in log.read_text().splitlines()[lines_before:] if "progress: " in line]
    assert re.search(rf"progress: 3/4 trials ended \(3 succeeded\), \d running, best 5 \(trial {best_id}\)$",
                     progress[0]), progress
    assert re.search(r"progress: 4/4 trials ended \(4 succeeded\), 0 running, best 5 ", progress[-1]), progress
