"""How a trial's end is logged: a failure, a crash, a preemption and their retries are
WARNINGs, a success INFO (issue 12, item 7: they all looked like successes)."""
from __future__ import annotations

import re
from pathlib import Path

from expmgr import Experiment, ExperimentConfig
from tests.helpers.common import write_script

ENDING_TRIAL = """
    import os, signal, sys
    import expmgr
    how = expmgr.get_next_parameter()["how"]
    if how == "fail":
        sys.exit(3)
    if how == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "preempt" and expmgr.get_attempt() == 1:
        expmgr.mark_preempting()
        sys.exit(128 + 15)
    expmgr.report_final_result(1.0)
"""


def test_failures_crashes_preemptions_and_retries_are_warnings_successes_info(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", ENDING_TRIAL)
    config = ExperimentConfig(search_space={"how": {"_type": "choice", "_value": ["ok", "fail", "crash", "preempt"]}},
                              trial_command="python3 trial.py", trial_code_directory=code_dir,
                              trial_concurrency=1, max_trial_number=4, max_trial_retries=1,
                              tuner={"name": "GridSearch"}, experiment_working_directory=tmp_path / "home")
    experiment = Experiment(config)
    experiment.run(port=0)
    log = experiment.paths.experiment_log.read_text()
    ends: dict[str, list[tuple[str, str]]] = {}   # each trial's end lines: (level, what)
    for level, trial_id, what in re.findall(r"\] (\w+) \(nni\.\w+[^)]*\) trial (\w+) (.*)", log):
        if re.search(r"SUCCEEDED|FAILED|CRASHED|PREEMPTED", what):
            ends.setdefault(trial_id, []).append((level, re.sub(r"^attempt \d ", "", what)))
    assert sorted(ends.values()) == sorted([
        [("INFO", "SUCCEEDED (exit code 0)")],
        [("WARNING", "FAILED (exit code 3); retrying"), ("WARNING", "FAILED (exit code 3)")],
        [("WARNING", "CRASHED (signal 9); retrying"), ("WARNING", "CRASHED (signal 9)")],
        [("WARNING", "PREEMPTED; it runs again first"), ("INFO", "SUCCEEDED (exit code 0)")],
    ]), log
