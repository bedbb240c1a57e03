"""NNI 3.0's Python API call forms (``nni.experiment.Experiment``) against expmgr, with real
experiments: ``Experiment('local')`` filled in through ``experiment.config``, ``run`` and
``start`` with NNI's parameters and return values, ``Experiment(None, id).resume(port)`` /
``.view(port)``, NNI's query methods and records, and NNI's published Python-API tutorials
run with only their import line (and their trial count) changed."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from expmgr import ExperimentConfig as TopLevelExperimentConfig
from expmgr.config import ConfigError
from expmgr.experiment import AlgorithmConfig, Experiment, ExperimentConfig, ExperimentError, TrialJob, TrialResult
from tests.helpers.common import REPO, wait_until, write_script
from tests.helpers.nni import activate, nni_python, sklearn_without_nni  # noqa: F401 - nni_python: a fixture
from tests.helpers.nni import nni_beside_expmgr

NNI_EXAMPLES = REPO / "tests" / "nni_examples"
TUTORIALS = NNI_EXAMPLES / "tutorials"

REPORTING_TRIAL = """
    import nni
    params = nni.get_next_parameter()
    nni.report_intermediate_result(params["x"])
    nni.report_intermediate_result(params["x"] + 0.5)
    nni.report_final_result({"default": params["x"] * 10, "loss": 1})
"""

GATED_TRIAL = """
    import os, time
    import nni
    params = nni.get_next_parameter()
    deadline = time.monotonic() + 60
    while not os.path.exists(os.environ["GATE_FILE"]) and time.monotonic() < deadline:
        time.sleep(0.01)
    nni.report_final_result(params["x"])
"""


def filled_in(code_dir: Path, trials: int = 2) -> Experiment:
    """NNI's tutorial form: ``Experiment('local')``, then the config's fields one by one."""
    experiment = Experiment('local')
    experiment.config.trial_command = 'python3 trial.py'
    experiment.config.trial_code_directory = code_dir
    experiment.config.search_space = {'x': {'_type': 'choice', '_value': list(range(1, trials + 1))}}
    experiment.config.tuner.name = 'GridSearch'
    experiment.config.max_trial_number = trials
    experiment.config.trial_concurrency = 2
    experiment.config.training_service.use_active_gpu = False
    return experiment


# -- the config NNI's users fill in -----------------------------------------------------------

def test_a_platforms_empty_config_has_sections_to_fill_in_that_count_as_absent_while_empty():
    config = ExperimentConfig('local')
    assert TopLevelExperimentConfig is ExperimentConfig  # `from expmgr import ExperimentConfig` too
    assert config.training_service.platform == 'local'
    config.tuner.name = 'TPE'
    config.tuner.class_args['optimize_mode'] = 'minimize'
    config.trial_command, config.trial_concurrency = 'python3 trial.py', 1
    config.search_space = {'x': {'_type': 'uniform', '_value': [0, 1]}}
    canonical = config.canonical()
    assert canonical.tuner == AlgorithmConfig(name='TPE', class_args={'optimize_mode': 'minimize'})
    assert canonical.assessor is None, "the assessor left empty is no assessor"
    assert 'assessor' not in config.to_dict() and config.minimizes

    unfilled = ExperimentConfig('local')
    unfilled.trial_command, unfilled.trial_concurrency = 'python3 trial.py', 1
    unfilled.search_space = {'x': {'_type': 'uniform', '_value': [0, 1]}}
    with pytest.raises(ConfigError, match="tuner: required"):
        unfilled.canonical()


def test_a_platform_expmgr_does_not_run_is_refused_by_name():
    with pytest.raises(ConfigError, match="not supported: kubeflow") as refused:
        Experiment('kubeflow')
    assert refused.value.field == "trainingService.platform"


def test_an_experiment_without_config_says_how_to_get_one():
    with pytest.raises(ExperimentError, match=r"has no config: give one .*Experiment\(None, id\)\.resume"):
        Experiment(None).start(port=0)


# -- run, start and the queries, as NNI's ---------------------------------------------------------

def test_filled_in_experiment_runs_and_answers_nnis_queries_in_nnis_shapes(home: Path, code_dir: Path):
    write_script(code_dir, "trial.py", REPORTING_TRIAL)
    experiment = filled_in(code_dir)
    assert experiment.run(0) is True  # NNI's: True when DONE
    assert isinstance(experiment.port, int) and experiment.url_prefix is None
    jobs = experiment.list_trial_jobs()
    assert sorted(job.status for job in jobs) == ["SUCCEEDED", "SUCCEEDED"]
    for job in jobs:
        x = job.parameters["x"]
        one = experiment.get_trial_job(job.trialJobId)
        assert isinstance(one, TrialJob) and one == job
        assert one.hyperParameters[0].parameters == {"x": x} and one.stderrPath.endswith("/stderr")
        [final] = one.finalMetricData
        assert (final.type, final.data, final.trialJobId) == ("FINAL", {"default": x * 10, "loss": 1}, job.trialJobId)
        assert one.finalMetric == final.data
        metrics = experiment.get_job_metrics()[job.trialJobId]
        assert [(m.type, m.data, m.trialJobId) for m in metrics] == [
            ("PERIODICAL", x, job.trialJobId), ("PERIODICAL", x + 0.5, job.trialJobId),
            ("FINAL", {"default": x * 10, "loss": 1}, job.trialJobId)]
        assert [m.sequence for m in metrics[:2]] == [0, 1]
        assert experiment.get_job_metrics(job.trialJobId) == {job.trialJobId: metrics}
    assert set(experiment.get_job_metrics()) == {job.trialJobId for job in jobs}
    assert sorted(experiment.export_data(), key=lambda r: r.parameter["x"]) == [
        TrialResult(parameter={"x": x}, value={"default": x * 10, "loss": 1},
                    trialJobId=next(j.trialJobId for j in jobs if j.parameters["x"] == x)) for x in (1, 2)]
    with pytest.raises(ExperimentError, match="has no trial 'nosuch'"):
        experiment.get_trial_job("nosuch")

    metadata = experiment.get_experiment_metadata(experiment.id)
    assert (metadata["id"], metadata["status"], metadata["platform"]) == (experiment.id, "DONE", "local")
    assert metadata["logDir"] == str(home)
    assert [m["id"] for m in experiment.get_all_experiments_metadata()] == [experiment.id]
    assert experiment.get_experiment_metadata("nosuch") == {}
    experiment.stop()


def test_run_without_waiting_returns_none_and_debug_logs_at_debug_level(home: Path, code_dir: Path,
                                                                        tmp_path: Path, monkeypatch):
    write_script(code_dir, "trial.py", GATED_TRIAL)
    gate = tmp_path / "release"
    monkeypatch.setenv("GATE_FILE", str(gate))
    experiment = filled_in(code_dir)
    try:
        assert experiment.run(0, wait_completion=False, debug=True) is None
        wait_until(lambda: any(job.status == "RUNNING" for job in experiment.list_trial_jobs()),
                   what="a running trial: run() returned before the end")
        assert experiment.get_experiment_profile()["params"]["logLevel"] == "debug"
        assert experiment.config.debug is False, "the user's config is left as it was"
        gate.touch()
        assert experiment.wait(timeout=120)
        assert experiment.get_status() == "DONE"
        assert "] DEBUG (" in experiment.paths.experiment_log.read_text()
    finally:
        experiment.stop()


def test_start_takes_nnis_debug_and_the_url_prefix_attribute(home: Path, code_dir: Path, tmp_path: Path,
                                                             monkeypatch):
    write_script(code_dir, "trial.py", GATED_TRIAL)
    monkeypatch.setenv("GATE_FILE", str(tmp_path / "release"))
    experiment = filled_in(code_dir)
    experiment.url_prefix = 'expmgr'
    try:
        experiment.start(0, False)
        assert experiment.url_prefix == 'expmgr'
        assert experiment.get_experiment_profile()["params"]["logLevel"] == "info"
        with urllib.request.urlopen(f"http://127.0.0.1:{experiment.port}/expmgr/api/v1/nni/check-status",
                                    timeout=10) as answer:
            assert json.loads(answer.read())["status"] in ("INITIALIZED", "RUNNING")
    finally:
        (tmp_path / "release").touch()
        experiment.stop()


def test_a_connected_experiment_answers_the_same_queries(home: Path, code_dir: Path, tmp_path: Path,
                                                         monkeypatch):
    write_script(code_dir, "trial.py", GATED_TRIAL)
    monkeypatch.setenv("GATE_FILE", str(tmp_path / "release"))
    experiment = filled_in(code_dir)
    try:
        experiment.start(0)
        trial_id = wait_until(lambda: next(iter(experiment.list_trial_jobs()), None), what="a trial").trialJobId
        connected = Experiment.connect(experiment.port)
        assert connected.id == experiment.id and connected.port == experiment.port
        assert connected.get_trial_job(trial_id).trialJobId == trial_id
        metadata = connected.get_experiment_metadata(experiment.id)
        assert (metadata["pid"], metadata["port"]) == (os.getpid(), experiment.port), "it runs in this process"
        assert connected.get_job_metrics() == {}
    finally:
        (tmp_path / "release").touch()
        experiment.stop()


# -- resume and view: NNI 3.0's instance form beside the class form ---------------------------------

def test_resume_and_view_on_an_experiment_made_from_its_id(home: Path, code_dir: Path):
    write_script(code_dir, "trial.py", REPORTING_TRIAL)
    first = filled_in(code_dir)
    assert first.run(0)
    first.stop()

    stored = Experiment(None, first.id)
    assert stored.has_checkpoint() and not Experiment(None, "nosuch").has_checkpoint()
    assert stored.resume(0) is True, "resumed: nothing left to run, DONE again"
    assert stored.config is not None and stored.config.tuner.name == "GridSearch"
    assert len(stored.list_trial_jobs()) == 2, "the trials done before count"
    stored.stop()

    viewing = Experiment(None, first.id)
    assert viewing.view(0, True) is viewing
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{viewing.port}/api/v1/nni/trial-jobs", timeout=10) as answer:
            assert len(json.loads(answer.read())) == 2
    finally:
        viewing.stop()

    by_class = Experiment.view(first.id, 0, non_blocking=True)  # expmgr's form (and NNI's older one)
    try:
        assert isinstance(by_class, Experiment) and len(by_class.export_data()) == 2
    finally:
        by_class.stop()
    with pytest.raises(ExperimentError, match="no experiment 'nosuch'"):
        Experiment(None, "nosuch").resume(0)


def test_run_or_resume_runs_a_new_id_and_resumes_a_stored_one(home: Path, code_dir: Path):
    write_script(code_dir, "trial.py", REPORTING_TRIAL)
    first = filled_in(code_dir)
    config = first.config
    first = Experiment(config, "my-experiment_1")
    assert not first.has_checkpoint()
    assert first.run_or_resume(0) is True and first.id == "my-experiment_1"
    first.save_checkpoint()  # nothing to do: the store has it all
    first.stop()

    again = Experiment(None, "my-experiment_1")
    again.load_checkpoint()
    assert again.config is not None and again.config.search_space == config.search_space
    assert again.run_or_resume(0) is True
    assert len(again.list_trial_jobs()) == 2, "resumed, not run anew"
    again.stop()
    with pytest.raises(ExperimentError, match="invalid experiment id '../x'"):
        Experiment(None, "../x")


def test_resume_without_waiting_returns_none(home: Path, code_dir: Path):
    write_script(code_dir, "trial.py", REPORTING_TRIAL)
    first = filled_in(code_dir)
    assert first.run(0)
    first.stop()
    resumed = Experiment(None, first.id)
    try:
        assert resumed.resume(0, False) is None
        assert resumed.wait(timeout=120) and resumed.get_status() == "DONE"
    finally:
        resumed.stop()


# -- NNI's published Python-API tutorial ---------------------------------------------------------------

# The tutorial's model imports torchvision and downloads its data set: with torch alone (the
# test extra's) its trials could not run, so the stand-in replaces it then too.
QUICKSTARTS = {"hpo_quickstart_pytorch": ("torch, torchvision", {"features", "lr", "momentum"}),
               "hpo_quickstart_tensorflow": ("tensorflow",
                                             {"dense_units", "activation_type", "dropout_rate", "learning_rate"})}


def run_tutorial(tmp_path: Path, name: str, pythonpath: str = str(REPO)) -> Experiment:
    """``expctl run --port 0 main.py`` in a copy of NNI's tutorial (its ``from nni.experiment
    import Experiment`` as published); the experiment it ran, viewed (for its queries). Where
    the trials' ``python`` cannot import the tutorial's framework (torch, tensorflow), the
    stand-in model replaces model.py (tests/nni_examples/tutorials/stand_ins): the trials' NNI
    calls are the same."""
    project = tmp_path / name
    shutil.copytree(TUTORIALS / name, project)
    trial_python = shutil.which("python")
    assert trial_python, "the tutorial's trial command is `python model.py`"
    framework = QUICKSTARTS[name][0]
    has_framework = subprocess.run([trial_python, "-c", f"import {framework}"], capture_output=True, timeout=120,
                                   check=False).returncode == 0
    if not has_framework:
        shutil.copy(TUTORIALS / "stand_ins" / "quickstart_model.py", project / "model.py")
    assert "from nni.experiment import Experiment\n" in (project / "main.py").read_text(), "NNI's import line"
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXPMGR_", "NNI_"))}
    env.update(EXPMGR_HOME=str(home), PYTHONPATH=pythonpath)
    # --port 0: the script's run(8080) on a free port (8080 may be taken on a shared test machine).
    ran = subprocess.run([sys.executable, "-m", "expmgr.cli", "run", "--port", "0", "main.py"], cwd=project, env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    [exp_dir] = [path for path in home.iterdir() if path.is_dir()]
    return Experiment.view(exp_dir.name, 0, non_blocking=True, home=home)


def check_quickstart(experiment: Experiment, name: str) -> None:
    try:
        assert experiment.get_status() == "DONE"
        jobs = experiment.list_trial_jobs()
        assert len(jobs) == 3  # max_trial_number in the copied main.py
        assert {job.status for job in jobs} == {"SUCCEEDED"}, [
            (experiment.paths.trial_dir(job.trialJobId) / "stderr").read_text() for job in jobs]
        metrics = experiment.get_job_metrics()
        for job in jobs:
            assert set(job.parameters) == QUICKSTARTS[name][1]
            kinds = [metric.type for metric in metrics[job.trialJobId]]
            assert kinds == ["PERIODICAL"] * 5 + ["FINAL"], "five epochs, then the final accuracy"
            assert 0 < job.finalMetric < 1
        assert len(experiment.export_data()) == 3
        assert experiment.get_experiment_profile()["params"]["tuner"] == {
            "name": "TPE", "classArgs": {"optimize_mode": "maximize"}}
    finally:
        experiment.stop()


@pytest.mark.parametrize("name", sorted(QUICKSTARTS))
def test_nnis_quickstart_tutorial_runs_unchanged_with_expctl_run(tmp_path: Path, name: str):
    check_quickstart(run_tutorial(tmp_path, name), name)


def test_nnis_pytorch_quickstart_tutorial_runs_with_real_nni_in_the_trials_environment(
        tmp_path: Path, nni_python: str, monkeypatch: pytest.MonkeyPatch):  # noqa: F811 - the fixture
    activate(monkeypatch, nni_python)  # the trials' `python` is the one with NNI 3.0
    experiment = run_tutorial(tmp_path, "hpo_quickstart_pytorch")
    check_quickstart(experiment, "hpo_quickstart_pytorch")
    for job in experiment.list_trial_jobs():
        stderr = (experiment.paths.trial_dir(job.trialJobId) / "stderr").read_text()
        assert "Running trial code without runtime" not in stderr  # NNI's standalone mode: not taken


def test_nnis_sklearn_python_api_notebook_runs_cell_by_cell_unchanged_with_expctl_runs_nni_names(
        tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch):
    """NNI's examples/trials/sklearn/classification/python_api_start.ipynb (its
    ``from nni.experiment import Experiment`` as published), its code cells run in order in a
    copy of the example's folder (its trials run main.py there), with what ``expctl run`` gives
    a notebook (``nni_names``); after the cell that starts the experiment the test waits for
    its end, as its user would before the cells that look at the results."""
    from expmgr.experiment.nni_scripts import nni_names, notebook_cells
    if sklearn_without_nni() != sys.executable:
        pytest.skip("the trials' python3 (this one) has no scikit-learn")
    project = tmp_path / "sklearn_classification"
    shutil.copytree(NNI_EXAMPLES / "sklearn_classification", project)
    monkeypatch.chdir(project)  # trial_code_directory './'
    cells = notebook_cells(project / "python_api_start.ipynb")
    assert "from nni.experiment import Experiment\n" in cells[1], "NNI's import line"
    namespace: dict = {}
    shown = {}
    # port 0: the notebook's start(8080) on a free port (8080 may be taken on a shared test machine)
    with nni_names(port=0):
        try:
            for cell in cells:
                try:
                    shown[cell] = eval(compile(cell, "cell", "eval"), namespace)  # a cell that shows a value
                except SyntaxError:
                    exec(compile(cell, "cell", "exec"), namespace)
                if cell == "experiment.start(8080)":
                    assert namespace["experiment"].wait(timeout=240)
        finally:
            if "experiment" in namespace:
                namespace["experiment"].stop()
    experiment = namespace["experiment"]
    assert isinstance(experiment, Experiment), "expmgr's Experiment, under NNI's name"
    assert shown["experiment.get_status()"] == "DONE"
    results = shown["experiment.export_data()"]
    assert len(results) == 3 and all(0.5 < result.value <= 1.0 for result in results)  # the digits' accuracy
    metrics = shown["experiment.get_job_metrics()"]
    assert sorted(metrics) == sorted(result.trialJobId for result in results)
    assert all([metric.type for metric in trial_metrics] == ["FINAL"] for trial_metrics in metrics.values())
    assert {job.status for job in experiment.list_trial_jobs()} == {"SUCCEEDED"}
    assert "nni" not in sys.modules, "nni_names leaves this process's modules as they were"


def test_expctl_run_runs_a_notebooks_code_cells_in_order_and_shows_their_values(tmp_path: Path):
    """NNI's python_api_start.ipynb as Jupyter's "Run All" runs it: it starts the experiment,
    shows its status and data at once and stops it."""
    project = tmp_path / "sklearn_classification"
    shutil.copytree(NNI_EXAMPLES / "sklearn_classification", project)
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXPMGR_", "NNI_"))}
    env.update(EXPMGR_HOME=str(home), PYTHONPATH=str(REPO))
    ran = subprocess.run([sys.executable, "-m", "expmgr.cli", "run", "-p", "0", str(project / "python_api_start.ipynb")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    shown = [line for line in ran.stdout.splitlines() if not line.startswith("[20")]  # the cells' values, not logs
    assert shown[0] in ("'INITIALIZED'", "'RUNNING'") and shown[1].startswith("["), ran.stdout
    [exp_dir] = [path for path in home.iterdir() if path.is_dir()]
    viewed = Experiment.view(exp_dir.name, 0, non_blocking=True, home=home)
    try:
        assert viewed.get_status() == "STOPPED", "its last cell stopped it"
        assert viewed.config is not None and viewed.config.experiment_name == "Example"
        assert os.path.samefile(viewed.config.trial_code_directory, project), "run in the notebook's folder"
    finally:
        viewed.stop()


def test_expctl_run_gives_the_script_its_arguments_and_exit_status_and_pythons_traceback(tmp_path: Path):
    script = write_script(tmp_path, "launch.py", """
        import sys
        from nni.experiment import Experiment, ExperimentConfig
        import nni
        print(sys.argv[1:], Experiment.__module__, nni.Experiment is Experiment, __name__)
        if sys.argv[1] == "fail":
            raise ValueError("the script's own error")
        sys.exit(int(sys.argv[1]))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXPMGR_", "NNI_"))}
    env.update(EXPMGR_HOME=str(tmp_path / "home"), PYTHONPATH=str(REPO))
    run = lambda *args: subprocess.run([sys.executable, "-m", "expmgr.cli", "run", *args], cwd=tmp_path,  # noqa: E731
                                       env=env, capture_output=True, text=True, timeout=120, check=False)
    exited = run(str(script), "3", "--flag")
    assert exited.returncode == 3, exited.stderr
    assert exited.stdout == "['3', '--flag'] expmgr.experiment.experiment True __main__\n"
    failed = run(str(script), "fail")
    assert failed.returncode == 1
    assert failed.stderr.startswith("Traceback (most recent call last):\n  File \"" + str(script)), failed.stderr
    assert failed.stderr.endswith("ValueError: the script's own error\n")
    missing = run("nosuch.py")
    assert missing.returncode == 2 and "no such file: nosuch.py" in missing.stderr


def test_with_nni_installed_beside_expmgr_expctl_run_gives_the_script_expmgrs_experiment_and_nni_the_rest(
        tmp_path: Path, nni_python: str):  # noqa: F811 - the fixture
    pythonpath = nni_beside_expmgr(tmp_path, nni_python)
    script = write_script(tmp_path, "probe.py", """
        import json
        import nni
        from nni.experiment import Experiment
        print(json.dumps({"nni": nni.__file__, "version": nni.__version__,
                          "experiment": Experiment.__module__,
                          "same": nni.Experiment is Experiment, "traced": type(nni.trace(dict)).__name__,
                          "choice": nni.choice("x", [1, 2]).as_legacy_dict()}))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXPMGR_", "NNI_"))}
    env.update(EXPMGR_HOME=str(tmp_path / "home"), PYTHONPATH=pythonpath)
    ran = subprocess.run([sys.executable, "-m", "expmgr.cli", "run", str(script)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout)
    assert seen["nni"].startswith(os.path.dirname(os.path.dirname(nni_python))), "NNI's own nni"
    assert seen["version"].startswith("3.0")
    assert seen["experiment"] == "expmgr.experiment.experiment" and seen["same"], "expmgr's manager"
    assert seen["choice"] == {"_type": "choice", "_value": [1, 2]}, "the rest of NNI is NNI's"
    experiment = run_tutorial(tmp_path, "hpo_quickstart_pytorch", pythonpath)
    check_quickstart(experiment, "hpo_quickstart_pytorch")
