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

from tests.helpers.common import ENV_WITH_REPO, write_script

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


DAEMON = """\
import atexit, json, sys
atexit.register(lambda: print(json.dumps(sorted(sys.modules))))  # after its server closed
from expmgr.cli.__main__ import main
sys.exit(main(["create", "--config", "config.yml", "--port", "0", "--foreground", "--exit-when-done"]))
"""
NOT_IN_THE_DAEMON = ("numpy", "expmgr.algorithms.tpe_parzen", "zipfile", "urllib.request")
"""It imports every expctl command's module, and reads YAML: ruamel.yaml is needed there."""


def test_the_process_of_expctl_create_imports_neither_numpy_nor_what_only_other_commands_use(
        code_dir: Path, tmp_path: Path):
    write_script(code_dir, "trial.py", """
        import expmgr
        expmgr.report_final_result(expmgr.get_next_parameter()["x"])
    """)
    write_script(code_dir, "config.yml", """
        searchSpace:
          x: {_type: uniform, _value: [0, 1]}
        trialCommand: python3 trial.py
        trialConcurrency: 2
        maxTrialNumber: 3
        tuner:
          name: TPE
    """)
    # As the daemon runs (it is `expctl create ... --foreground` in a session of its own).
    result = subprocess.run([sys.executable, "-c", DAEMON], cwd=code_dir, capture_output=True, text=True,
                            timeout=120, env={**ENV_WITH_REPO, "EXPMGR_HOME": str(tmp_path / "home")})
    assert result.returncode == 0, result.stdout + result.stderr
    modules = json.loads(result.stdout.splitlines()[-1])
    assert [name for name in NOT_IN_THE_DAEMON if name in modules] == []


CHECK_CONFIG = """\
import json, sys
from expmgr import ExperimentConfig
from expmgr.config.resolved import ResolvedConfig

ResolvedConfig.from_config(ExperimentConfig(   # what start() does: builds the tuner to check it
    search_space={"x": {"_type": "uniform", "_value": [0, 1]}}, trial_command="true", trial_concurrency=1,
    tuner=json.loads(sys.argv[1])))
print(json.dumps("numpy" in sys.modules))
"""


@pytest.mark.parametrize("tuner", [
    {"name": "Anneal", "classArgs": {"seed": 1}},
    {"name": "Evolution", "classArgs": {"seed": 1}},
    {"name": "Hyperband", "classArgs": {"R": 9, "eta": 3, "seed": 1}},
    {"name": "PBT", "classArgs": {"all_checkpoint_dir": "checkpoints", "seed": 1}},
    {"name": "TPE", "classArgs": {"seed": 1}},
], ids=lambda tuner: tuner["name"])
def test_checking_the_config_of_a_tuner_that_draws_with_numpy_does_not_import_numpy(tuner: dict, tmp_path: Path):
    result = subprocess.run([sys.executable, "-c", CHECK_CONFIG, json.dumps(tuner)], capture_output=True, text=True,
                            timeout=60, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) is False, f"{tuner['name']}: numpy imported by the config check"
