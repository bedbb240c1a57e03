"""``optimize_mode: minimize`` decides the best trial everywhere it is shown: a real
experiment whose results are known (the lowest is the best), read through the Python
API, ``expctl top`` and ``expctl trial ls --sort``."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from expmgr import Experiment, ExperimentConfig
from tests.helpers.common import REPO, write_script

# The result is the parameter: 3, 1, 4, 2 in that order, so neither the first nor the last
# trial is the best either way, and the highest (4) is the worst when minimizing.
RESULTS = [3, 1, 4, 2]


def test_a_minimizing_experiment_names_its_lowest_result_the_best(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", """
        import expmgr
        expmgr.report_final_result(expmgr.get_next_parameter()["x"])
    """)
    home = tmp_path / "home"
    experiment = Experiment(ExperimentConfig(
        search_space={"combine_params": {"_type": "choice", "_value": [{"x": x} for x in RESULTS]}},
        trial_command="python3 trial.py", trial_code_directory=code_dir, trial_concurrency=2,
        max_trial_number=len(RESULTS), tuner={"name": "Batch", "class_args": {"optimize_mode": "minimize"}},
        experiment_working_directory=home))
    experiment.start(port=0)
    try:
        assert experiment.wait(timeout=120)
        assert experiment.get_status() == "DONE"
        assert sorted(r.value for r in experiment.export_data()) == [1, 2, 3, 4]
        best = experiment.best_trial()
        assert best is not None and best.value == 1 and best.parameter == {"x": 1}
    finally:
        experiment.stop()

    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}

    def expctl(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "expmgr.cli", *args], env=env, capture_output=True,
                              text=True, timeout=120, check=False)
    top = expctl("top", experiment.id, "--once")
    assert top.returncode == 0, top.stderr
    assert f"best 1 ({best.trialJobId})" in top.stdout
    ranked = expctl("trial", "ls", experiment.id, "--sort", "default", "--json")
    assert ranked.returncode == 0, ranked.stderr
    finals = [row["final"] for row in json.loads(ranked.stdout)]
    # A number, or (as before issue 12) its JSON text.
    assert [json.loads(f) if isinstance(f, str) else f for f in finals] == [1, 2, 3, 4], "best first"
