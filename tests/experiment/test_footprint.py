"""What the experiment process loads: the tuner runs in the dispatcher process, so an
experiment's own process never imports numpy, although it builds the configured tuner once
to check its classArgs and search space; and one built in Python imports no YAML library,
although it writes its config.yml. Real experiments, each in a process of its own (a module
once imported stays), with real trials."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import write_script

RUN = """\
import json, sys
from expmgr import Experiment, ExperimentConfig

config = ExperimentConfig(
    search_space={
        "lr": {"_type": "loguniform", "_value": [1e-4, 0.1]},
        "units": {"_type": "quniform", "_value": [16, 128, 16]},
        "model": {"_type": "choice", "_value": [{"_name": "cnn", "k": {"_type": "randint", "_value": [1, 5]}},
                                                "mlp"]},
    },
    trial_command="python3 trial.py", trial_code_directory=sys.argv[3], trial_concurrency=2, max_trial_number=3,
    tuner=json.loads(sys.argv[1]), experiment_working_directory=sys.argv[2])
experiment = Experiment(config)
succeeded = experiment.run(port=0)   # returns at DONE; the server stays until stop()
print(json.dumps({"succeeded": succeeded, "modules": sorted(sys.modules)}))
experiment.stop()
"""
NOT_IN_THE_EXPERIMENT_PROCESS = ("numpy", "expmgr.algorithms.tpe_parzen", "ruamel.yaml")


@pytest.mark.parametrize("tuner", [
    {"name": "Random", "classArgs": {"seed": 1}},
    {"name": "TPE", "classArgs": {"optimize_mode": "maximize", "seed": 1, "tpe_args": {"n_startup_jobs": 2}}},
], ids=["Random", "TPE"])
def test_an_experiment_with_a_random_or_tpe_tuner_imports_neither_numpy_nor_yaml_in_its_process(
        tuner: dict, code_dir: Path, tmp_path: Path):
    write_script(code_dir, "trial.py", """
        import expmgr
        params = expmgr.get_next_parameter()
        expmgr.report_final_result(params["lr"] * params["units"])
    """)
    result = subprocess.run([sys.executable, "-c", RUN, json.dumps(tuner), str(tmp_path / "home"), str(code_dir)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    [ran] = [json.loads(line) for line in result.stdout.splitlines() if line.startswith('{"succeeded"')]
    assert ran["succeeded"], result.stderr
    assert [name for name in NOT_IN_THE_EXPERIMENT_PROCESS if name in ran["modules"]] == []
