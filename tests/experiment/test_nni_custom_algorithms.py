"""Tuners and assessors written for NNI, run by expmgr's dispatcher without NNI: the light
``nni`` package (expmgr/trial_path) answers ``nni.tuner``, ``nni.assessor``, ``nni.utils`` and
``nni.NoMoreTrialError`` there; NNI's published ``examples/tuners/customized_tuner``,
registered with ``expctl algo register`` (nnictl's) and named in a config, runs unchanged."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from expmgr import Experiment, ExperimentConfig
from tests.helpers.common import REPO, write_script
from tests.helpers.nni import nni_beside_expmgr
from tests.helpers.nni import nni_python  # noqa: F401 - a fixture

CUSTOMIZED_TUNER = REPO / "tests" / "nni_examples" / "customized_tuner"

NNI_TUNER = """
    import nni
    from nni.tuner import Tuner
    from nni.utils import OptimizeMode, extract_scalar_reward

    class ListTuner(Tuner):
        '''Proposes the search space's x values in order, then says there are no more.'''

        def __init__(self, optimize_mode='maximize'):
            super().__init__()
            self.optimize_mode = OptimizeMode(optimize_mode)
            self.rewards = {}

        def update_search_space(self, search_space):
            self.values = list(search_space['x']['_value'])

        def generate_parameters(self, parameter_id, **kwargs):
            if not self.values:
                raise nni.NoMoreTrialError('all proposed')
            return {'x': self.values.pop(0)}

        def receive_trial_result(self, parameter_id, parameters, value, **kwargs):
            self.rewards[parameter_id] = extract_scalar_reward(value)

    class ManyAtOnceTuner(ListTuner):
        '''The same, implementing generate_multiple_parameters alone (NNI asks for either).'''

        generate_parameters = Tuner.generate_parameters

        def generate_multiple_parameters(self, parameter_id_list, **kwargs):
            proposed, self.values = self.values[:len(parameter_id_list)], self.values[len(parameter_id_list):]
            return [{'x': x} for x in proposed]
"""

NNI_ASSESSOR = """
    from nni.assessor import Assessor, AssessResult
    from nni.utils import extract_scalar_history

    class NegativeStopper(Assessor):
        '''Stops a trial whose first intermediate result is negative.'''

        def assess_trial(self, trial_job_id, trial_history):
            return AssessResult.Bad if extract_scalar_history(trial_history)[0] < 0 else AssessResult.Good
"""

# A negative x reports and then waits to be stopped (at most a minute: then it ends SUCCEEDED
# and the test fails on its state, without timing anything).
TRIAL = """
    import time
    import nni
    x = nni.get_next_parameter()['x']
    nni.report_intermediate_result({'default': x, 'loss': 0})
    deadline = time.monotonic() + 60
    while x < 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    nni.report_final_result(x)
"""


@pytest.mark.parametrize("tuner", ["ListTuner", "ManyAtOnceTuner"])
def test_a_tuner_and_an_assessor_written_for_nni_run_in_the_dispatcher_without_nni(tmp_path: Path, code_dir: Path,
                                                                                   tuner: str):
    assert importlib.util.find_spec("nni") is None, "this test is for an environment without NNI"
    algorithms = tmp_path / "algorithms"
    algorithms.mkdir()
    write_script(algorithms, "list_tuner.py", NNI_TUNER)
    write_script(algorithms, "negative_stopper.py", NNI_ASSESSOR)
    write_script(code_dir, "trial.py", TRIAL)
    experiment = Experiment(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [3, -1, 2]}}, trial_command="python3 trial.py",
        trial_code_directory=code_dir, trial_concurrency=1, max_trial_number=10,
        tuner={"className": f"list_tuner.{tuner}", "codeDirectory": algorithms,
               "classArgs": {"optimize_mode": "maximize"}},
        assessor={"className": "negative_stopper.NegativeStopper", "codeDirectory": algorithms},
        experiment_working_directory=tmp_path / "home"))
    assert experiment.run(port=0), experiment.paths.dispatcher_log.read_text()
    jobs = sorted(experiment.list_trial_jobs(), key=lambda job: job.sequenceId)
    assert [(job.parameters["x"], job.status) for job in jobs] == [
        (3, "SUCCEEDED"), (-1, "EARLY_STOPPED"), (2, "SUCCEEDED")], "nni.NoMoreTrialError ended the search at 3"
    assert f"tuner {tuner} ready" in experiment.paths.dispatcher_log.read_text()
    experiment.stop()


def expctl(*args: str, home: Path, cwd: Path, pythonpath: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXPMGR_", "NNI_"))}
    env.update(EXPMGR_HOME=str(home), PYTHONPATH=pythonpath)
    return subprocess.run([sys.executable, "-m", "expmgr.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


DEMO_CONFIG = """\
searchSpace:
  optimizer: {_type: choice, _value: [sgd, adam]}
  layers: {_type: randint, _value: [1, 4]}
  lr: {_type: uniform, _value: [0.001, 0.1]}
trialCommand: python3 trial.py
trialConcurrency: 2
maxTrialNumber: 4
tuner:
  name: demotuner
  classArgs:
    optimize_mode: maximize
trainingService:
  platform: local
"""


def test_nnis_customized_tuner_example_registered_with_expctl_algo_runs_without_nni(tmp_path: Path):
    assert importlib.util.find_spec("nni") is None, "this test is for an environment without NNI"
    package = tmp_path / "customized_tuner"
    shutil.copytree(CUSTOMIZED_TUNER, package)
    # NNI's README: `pip install -e .` in the example's folder; here, the same on PYTHONPATH.
    pythonpath = os.pathsep.join([str(REPO), str(package)])
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    write_script(project, "trial.py", """
        import nni
        p = nni.get_next_parameter()
        nni.report_final_result(p['lr'] * p['layers'] + (p['optimizer'] == 'adam'))
    """)
    (project / "config.yml").write_text(DEMO_CONFIG)
    run = lambda *args: expctl(*args, home=home, cwd=project, pythonpath=pythonpath)  # noqa: E731

    registered = run("algo", "register", "--meta_path", str(package / "meta_file.yml"))
    assert (registered.returncode, registered.stdout) == (0, "demotuner registered\n"), registered.stderr
    listed = run("algo", "list")
    assert listed.returncode == 0
    assert ["demotuner", "tuner", "user", "demo_tuner.DemoTuner"] in [line.split() for line in listed.stdout.splitlines()]
    shown = run("algo", "show", "demotuner")
    assert json.loads(shown.stdout) == {"algoType": "tuner", "builtinName": "demotuner",
                                        "className": "demo_tuner.DemoTuner",
                                        "classArgsValidator": "demo_tuner.MyClassArgsValidator"}

    created = run("create", "--config", "config.yml", "--port", "0", "--foreground", "--exit-when-done")
    assert created.returncode == 0, created.stdout + created.stderr
    [exp_id] = [path.name for path in home.iterdir() if path.is_dir()]
    trials = json.loads(run("trial", "ls", exp_id, "--json").stdout)
    assert len(trials) == 4 and {trial["status"] for trial in trials} == {"SUCCEEDED"}
    for trial in trials:
        parameters = trial["parameters"]
        assert parameters["optimizer"] in ("sgd", "adam") and parameters["layers"] in (1, 2, 3)
        assert 0.001 <= parameters["lr"] <= 0.1

    # nnictl's short spellings; once unregistered, the name is unknown again
    assert run("algo", "unreg", "demotuner").stdout == "demotuner unregistered\n"
    refused = run("create", "--config", "config.yml", "--port", "0", "--foreground")
    assert refused.returncode == 2 and "unknown tuner 'demotuner'" in refused.stderr, refused.stderr
    again = run("algo", "reg", "-m", str(package / "meta_file.yml"))
    assert again.returncode == 0, again.stderr
    assert run("algo", "show", "demotuner").returncode == 0


def test_algo_register_refuses_a_class_it_cannot_import_and_a_builtins_name(tmp_path: Path):
    home = tmp_path / "home"
    meta = tmp_path / "meta.yml"
    meta.write_text("algoType: tuner\nbuiltinName: mine\nclassName: no_such_module.MyTuner\n")
    refused = expctl("algo", "register", "-m", str(meta), home=home, cwd=tmp_path, pythonpath=str(REPO))
    assert refused.returncode == 2
    assert "mine: className 'no_such_module.MyTuner': cannot import 'no_such_module'" in refused.stderr
    meta.write_text("algoType: tuner\nbuiltinName: TPE\nclassName: json.JSONDecoder\n")
    refused = expctl("algo", "register", "-m", str(meta), home=home, cwd=tmp_path, pythonpath=str(REPO))
    assert refused.returncode == 2 and "cannot overwrite the built-in algorithm 'TPE'" in refused.stderr
    meta.write_text("algoType: optimizer\nbuiltinName: mine\nclassName: json.JSONDecoder\n")
    refused = expctl("algo", "register", "-m", str(meta), home=home, cwd=tmp_path, pythonpath=str(REPO))
    assert refused.returncode == 2 and "algoType: expected one of tuner, assessor, advisor" in refused.stderr
    unknown = expctl("algo", "unregister", "mine", home=home, cwd=tmp_path, pythonpath=str(REPO))
    assert unknown.returncode == 2 and "no algorithm registered as 'mine'" in unknown.stderr


def test_a_registered_algorithms_class_args_validator_checks_the_config_when_it_is_loaded(tmp_path: Path):
    package = tmp_path / "package"
    package.mkdir()
    write_script(package, "sized_tuner.py", """
        from schema import Schema, Optional
        from nni.tuner import Tuner
        from nni.utils import ClassArgsValidator

        class SizedTuner(Tuner):
            def __init__(self, size=1):
                self.size = size

        class SizeValidator(ClassArgsValidator):
            def validate_class_args(self, **kwargs):
                Schema({Optional('size'): self.range('size', int, 1, 10)}).validate(kwargs)
    """)
    (package / "meta.yml").write_text("algoType: tuner\nbuiltinName: sized\nclassName: sized_tuner.SizedTuner\n"
                                      "classArgsValidator: sized_tuner.SizeValidator\n")
    home, pythonpath = tmp_path / "home", os.pathsep.join([str(REPO), str(package)])
    assert expctl("algo", "register", "-m", "meta.yml", home=home, cwd=package, pythonpath=pythonpath).returncode == 0
    (tmp_path / "config.yml").write_text(DEMO_CONFIG.replace("name: demotuner", "name: sized").replace(
        "optimize_mode: maximize", "size: 20"))
    refused = expctl("create", "--config", "config.yml", "--port", "0", home=home, cwd=tmp_path,
                     pythonpath=pythonpath)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "tuner.classArgs" in refused.stderr
    assert "sized's classArgsValidator sized_tuner.SizeValidator refused them: " in refused.stderr
    assert "size should be in range of (1, 10)!" in refused.stderr
    assert not any(path.is_dir() for path in home.iterdir()), "no experiment was made"


def test_with_nni_installed_beside_expmgr_the_dispatcher_gives_nnis_own_classes_and_takes_their_answers(
        tmp_path: Path, code_dir: Path, nni_python: str, monkeypatch: pytest.MonkeyPatch):  # noqa: F811 - the fixture
    """A real NNI's ``nni.NoMoreTrialError`` ends the search and its ``AssessResult.Bad`` stops
    a trial, as expmgr's own do."""
    monkeypatch.setenv("PYTHONPATH", nni_beside_expmgr(tmp_path, nni_python))  # the dispatcher's environment
    algorithms = tmp_path / "algorithms"
    algorithms.mkdir()
    write_script(algorithms, "list_tuner.py", NNI_TUNER + """
    import nni.tuner
    assert 'site-packages' in nni.tuner.__file__, nni.tuner.__file__   # NNI's own, not expmgr's light one
    """)
    write_script(algorithms, "negative_stopper.py", NNI_ASSESSOR)
    write_script(code_dir, "trial.py", TRIAL)
    experiment = Experiment(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [3, -1]}}, trial_command="python3 trial.py",
        trial_code_directory=code_dir, trial_concurrency=1, max_trial_number=10,
        tuner={"className": "list_tuner.ListTuner", "codeDirectory": algorithms},
        assessor={"className": "negative_stopper.NegativeStopper", "codeDirectory": algorithms},
        experiment_working_directory=tmp_path / "home"))
    assert experiment.run(port=0), experiment.paths.dispatcher_log.read_text()
    jobs = sorted(experiment.list_trial_jobs(), key=lambda job: job.sequenceId)
    assert [(job.parameters["x"], job.status) for job in jobs] == [(3, "SUCCEEDED"), (-1, "EARLY_STOPPED")]
    experiment.stop()
