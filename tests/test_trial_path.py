"""`import nni` in trials (expmgr/trial_path): NNI's trial API through expmgr's light
`nni`, in real experiments; the handover to a real NNI 3.0; trials run by the user's
interpreter (PATH untouched, another Python version, no expmgr installed there); and a
trial that cannot reach its manager failing loudly.

Real NNI: set EXPMGR_TEST_NNI_PYTHON to a Python with nni==3.0, or let the `nni_python`
fixture install it once into a cached venv (EXPMGR_TEST_NNI=0 turns that off).
"""
from __future__ import annotations

import glob
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from expmgr import Experiment, ExperimentConfig
from expmgr import trial as trial_api
from tests.helpers.common import REPO, write_script
from tests.helpers.nni import activate, nni_python, sklearn_without_nni

NNI_EXAMPLES = Path(__file__).parent / "nni_examples"

# Every call of NNI 3.0's public trial API, in both spellings; what it saw goes to
# seen.json in the trial's folder (NNI_OUTPUT_DIR) for the test to read.
NNI_API_TRIAL = """
    import argparse, json, os, sys
    import nni
    import nni.trial
    from nni.utils import merge_parameter

    before = nni.get_current_parameter()
    params = nni.get_next_parameter()
    args = merge_parameter(argparse.Namespace(x=0, lr=0.5), params)
    defaults = merge_parameter({"x": 0, "lr": 0.5}, nni.trial.get_current_parameter())
    nni.report_intermediate_result(args.x)
    nni.trial.report_intermediate_result({"default": args.x + 1, "loss": 0.25})
    nni.report_final_result({"default": args.x * 10, "loss": 0.5})
    env = {name: os.environ.get(name) for name in ("NNI_PLATFORM", "NNI_EXP_ID", "NNI_TRIAL_JOB_ID", "NNI_SYS_DIR",
                                                   "NNI_OUTPUT_DIR", "NNI_TRIAL_SEQ_ID", "NNI_CODE_DIR", "PATH",
                                                   "PYTHONPATH")}
    env["cwd"] = os.getcwd()
    seen = {
        "nni_file": nni.__file__, "python": sys.executable, "version": list(sys.version_info[:2]),
        "before": before, "params": params, "again": nni.get_next_parameters(),
        "current": nni.get_current_parameter(), "current_x": nni.trial.get_current_parameter("x"),
        "args": vars(args), "defaults": defaults,
        "ids": [nni.get_experiment_id(), nni.get_trial_id(), nni.get_sequence_id()],
        "trial_ids": [nni.trial.get_experiment_id(), nni.trial.get_trial_id(), nni.trial.get_sequence_id()],
        "env": env,
    }
    with open(os.path.join(os.environ["NNI_OUTPUT_DIR"], "seen.json"), "w") as file:
        json.dump(seen, file)
"""


def run_nni_api_experiment(tmp_path: Path, code_dir: Path, command: str = "python3 trial.py") -> Experiment:
    write_script(code_dir, "trial.py", NNI_API_TRIAL)
    experiment = Experiment(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1, 2]}}, trial_command=command,
        trial_code_directory=code_dir, trial_concurrency=2, max_trial_number=2,
        tuner={"name": "GridSearch"}, experiment_working_directory=tmp_path / "home"))
    assert experiment.run(port=0)
    return experiment


def check_nni_api_results(experiment: Experiment) -> list[dict]:
    """Both trials SUCCEEDED with every report stored and NNI's answers right; what each saw."""
    jobs = experiment.list_trial_jobs()
    assert [job.status for job in jobs] == ["SUCCEEDED"] * 2, [
        (experiment.paths.trial_dir(job.trialJobId) / "stderr").read_text() for job in jobs]
    results = sorted((r.parameter["x"], r.value) for r in experiment.export_data())
    assert results == [(1, {"default": 10, "loss": 0.5}), (2, {"default": 20, "loss": 0.5})]
    seen_all = []
    with experiment._open_store() as store:
        for job in jobs:
            x = job.parameters["x"]
            reported = [(m.type, m.value) for m in store.metrics(job.trialJobId)]
            assert [(kind, json.loads(value) if isinstance(value, str) else value) for kind, value in reported] == [
                ("PERIODICAL", x), ("PERIODICAL", {"default": x + 1, "loss": 0.25}),
                ("FINAL", {"default": x * 10, "loss": 0.5})]
            trial_dir = experiment.paths.trial_dir(job.trialJobId)
            seen = json.loads((trial_dir / "seen.json").read_text())
            assert seen["before"] is None
            assert seen["params"] == seen["again"] == seen["current"] == {"x": x}
            assert seen["current_x"] == x
            assert seen["args"] == {"x": x, "lr": 0.5} and seen["defaults"] == {"x": x, "lr": 0.5}
            assert seen["ids"] == seen["trial_ids"] == [experiment.id, job.trialJobId, job.sequenceId]
            assert os.path.samefile(seen["env"].pop("NNI_CODE_DIR"), seen["env"]["cwd"]), "the trial's folder"
            assert {k: v for k, v in seen["env"].items() if k.startswith("NNI_")} == {
                "NNI_PLATFORM": "local", "NNI_EXP_ID": experiment.id, "NNI_TRIAL_JOB_ID": job.trialJobId,
                "NNI_SYS_DIR": str(trial_dir), "NNI_OUTPUT_DIR": str(trial_dir),
                "NNI_TRIAL_SEQ_ID": str(job.sequenceId)}
            seen_all.append(seen)
    return seen_all


def test_nni_trial_api_answers_through_expmgr_in_a_real_experiment(tmp_path: Path, code_dir: Path):
    experiment = run_nni_api_experiment(tmp_path, code_dir)
    for seen in check_nni_api_results(experiment):
        assert seen["nni_file"] == os.path.join(trial_api.TRIAL_PATH, "nni", "__init__.py")


def test_trials_keep_the_users_path_and_get_the_trial_folder_first_on_pythonpath(tmp_path: Path, code_dir: Path):
    experiment = run_nni_api_experiment(tmp_path, code_dir)
    for seen in check_nni_api_results(experiment):
        assert seen["env"]["PATH"] == os.environ["PATH"]
        assert seen["env"]["PYTHONPATH"] == os.pathsep.join([trial_api.TRIAL_PATH, os.environ["PYTHONPATH"]])
        assert seen["python"] == shutil.which("python3")  # the PATH's python3: here the test's own


def other_interpreter() -> str | None:
    """The oldest Python 3.8+ on this machine of another version than this one's, if any."""
    candidates = sorted({*glob.glob("/usr/bin/python3.[0-9]*"), *glob.glob("/usr/local/bin/python3.[0-9]*"),
                         *glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3"))})
    found = []
    for path in candidates:
        if path.endswith("-config") or not os.access(path, os.X_OK):
            continue
        probe = subprocess.run([path, "-c", "import sys; print(*sys.version_info[:2])"],
                               capture_output=True, text=True, timeout=30, check=False)
        version = tuple(map(int, probe.stdout.split())) if probe.returncode == 0 else ()
        if version >= (3, 8) and version != sys.version_info[:2]:
            found.append((version, path))
    return min(found)[1] if found else None


def test_a_trial_run_by_another_python_version_without_expmgr_reports_to_the_manager(
        tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch):
    python = other_interpreter()
    if python is None:
        pytest.skip("no Python 3.8+ of another version than this one on this machine")
    # The trial's interpreter sees neither this checkout nor the test's environment:
    # only what the local service puts on its PYTHONPATH.
    monkeypatch.delenv("PYTHONPATH")
    monkeypatch.setenv("PYTHONNOUSERSITE", "1")
    no_expmgr = subprocess.run([python, "-c", "import expmgr"], cwd=tmp_path, capture_output=True, timeout=30,
                               check=False)
    assert no_expmgr.returncode != 0, f"{python} has expmgr installed: not the case this test is for"
    experiment = run_nni_api_experiment(tmp_path, code_dir, command=f"{python} trial.py")
    for seen in check_nni_api_results(experiment):
        assert seen["version"] != list(sys.version_info[:2])
        assert seen["nni_file"] == os.path.join(trial_api.TRIAL_PATH, "nni", "__init__.py")


def test_expmgr_trial_api_is_importable_by_an_interpreter_without_expmgr(tmp_path: Path):
    python = other_interpreter() or sys.executable
    script = write_script(tmp_path, "trial.py", """
        import expmgr, nni
        print(expmgr.get_next_parameter(), nni.get_trial_id(), expmgr.__file__)
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXPMGR_", "NNI_"))}
    env["PYTHONPATH"] = trial_api.trial_pythonpath(None)
    result = subprocess.run([python, str(script)], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].split() == ["{}", "STANDALONE", str(REPO / "expmgr" / "__init__.py")]


def test_a_trial_launched_without_its_managers_environment_fails_loudly(tmp_path: Path, code_dir: Path):
    # The command drops expmgr's variables (as a wrapper clearing the environment might):
    # NNI_PLATFORM says "launched as a trial", so empty parameters would be a silent lie.
    write_script(code_dir, "trial.py", """
        import nni
        params = nni.get_next_parameter()
        nni.report_final_result(len(params))
    """)
    experiment = Experiment(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1]}},
        trial_command="env -u EXPMGR_TRIAL_ID -u EXPMGR_TRIAL_DIR python3 trial.py",
        trial_code_directory=code_dir, trial_concurrency=1, max_trial_number=1, max_trial_retries=0,
        tuner={"name": "GridSearch"}, experiment_working_directory=tmp_path / "home"))
    experiment.run(port=0)
    [job] = experiment.list_trial_jobs()
    assert job.status == "FAILED"
    assert experiment.export_data() == []
    stderr = (experiment.paths.trial_dir(job.trialJobId) / "stderr").read_text()
    assert "TrialConnectionError: this process was launched as a trial (NNI_PLATFORM=local)" in stderr
    assert "cannot reach its experiment's manager" in stderr


def test_a_trial_that_cannot_read_its_parameters_fails_loudly(tmp_path: Path):
    script = write_script(tmp_path, "trial.py", "import nni\nprint(nni.get_next_parameter())\n")
    trial_dir = tmp_path / "trial"
    trial_dir.mkdir()  # no parameter.json
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXPMGR_", "NNI_"))}
    env.update(trial_api.nni_environment({trial_api.ENV_TRIAL_ID: "abc", trial_api.ENV_TRIAL_DIR: str(trial_dir)},
                                         str(tmp_path)))
    env.update({trial_api.ENV_TRIAL_ID: "abc", trial_api.ENV_TRIAL_DIR: str(trial_dir),
                "PYTHONPATH": trial_api.trial_pythonpath(None)})
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 1 and result.stdout == ""
    assert f"trial abc cannot read its parameters from {trial_dir / 'parameter.json'}" in result.stderr


def test_run_by_hand_the_light_nni_behaves_as_nnis_standalone_mode(tmp_path: Path):
    script = write_script(tmp_path, "trial.py", """
        import nni
        print("params", nni.get_next_parameter(), nni.get_current_parameter())
        nni.report_intermediate_result(0.5)
        nni.report_final_result({"default": 0.75})
        print("ids", nni.get_experiment_id(), nni.get_trial_id(), nni.get_sequence_id())
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXPMGR_", "NNI_"))}
    env["PYTHONPATH"] = trial_api.trial_pythonpath(None)
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert "params {} {}" in result.stdout
    assert "intermediate result: 0.5" in result.stdout and "final result: {'default': 0.75}" in result.stdout
    assert "ids STANDALONE STANDALONE 0" in result.stdout


# -- a real NNI in the trial's environment ---------------------------------------------


def test_a_real_nni_in_the_trials_environment_takes_over_and_reports_to_expmgr(
        tmp_path: Path, code_dir: Path, nni_python: str, monkeypatch: pytest.MonkeyPatch):
    activate(monkeypatch, nni_python)
    experiment = run_nni_api_experiment(tmp_path, code_dir)
    for seen in check_nni_api_results(experiment):
        assert seen["python"] == os.path.join(os.path.dirname(nni_python), "python3")
        assert not seen["nni_file"].startswith(trial_api.TRIAL_PATH), "the real NNI, not expmgr's light one"
    for job in experiment.list_trial_jobs():
        stderr = (experiment.paths.trial_dir(job.trialJobId) / "stderr").read_text()
        assert "Running trial code without runtime" not in stderr  # NNI's standalone-mode warning


# -- NNI's published example -------------------------------------------------------------


def run_nni_example(tmp_path: Path, name: str, python: str) -> list[dict]:
    """``expctl create --config config.yml --foreground`` in a copy of NNI's example, with
    ``python``'s environment activated; the experiment's trials, as ``expctl trial ls --json``."""
    project = tmp_path / name
    shutil.copytree(NNI_EXAMPLES / name, project)
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXPMGR_", "NNI_"))}
    env.update(EXPMGR_HOME=str(home), PYTHONPATH=str(REPO),
               PATH=os.pathsep.join([os.path.dirname(python), os.environ["PATH"]]))
    expctl = [sys.executable, "-m", "expmgr.cli"]
    created = subprocess.run([*expctl, "create", "--config", "config.yml", "--port", "0", "--foreground",
                              "--exit-when-done"],
                             cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert created.returncode == 0, created.stdout + created.stderr
    [exp_dir] = [path for path in home.iterdir() if path.is_dir()]
    listed = subprocess.run([*expctl, "trial", "ls", exp_dir.name, "--json"], env=env, capture_output=True,
                            text=True, timeout=120, check=False)
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)


def check_sklearn_trials(trials: list[dict], lowest: float = 0.5) -> None:
    """Three trials (maxTrialNumber in the copied config), each SUCCEEDED with a stored final
    result above ``lowest``: the digits classifier's accuracy, the diabetes regression's R²
    (at most 1, and unbounded below: NNI's search space has Lars, which scores far below 0)."""
    assert len(trials) == 3
    for trial in trials:
        assert trial["status"] == "SUCCEEDED", trial
        final = json.loads(trial["final"]) if isinstance(trial["final"], str) else trial["final"]
        assert isinstance(final, float) and math.isfinite(final) and lowest < final <= 1.0, trial


def test_nnis_sklearn_classification_example_runs_unchanged_without_real_nni(tmp_path: Path):
    python = sklearn_without_nni()
    if python is None:
        pytest.skip("no Python with scikit-learn and without nni (EXPMGR_TEST_SKLEARN_PYTHON)")
    check_sklearn_trials(run_nni_example(tmp_path, "sklearn_classification", python))


def test_nnis_sklearn_classification_example_runs_unchanged_with_real_nni(tmp_path: Path, nni_python: str):
    check_sklearn_trials(run_nni_example(tmp_path, "sklearn_classification", nni_python))


def test_nnis_sklearn_regression_example_runs_unchanged_without_real_nni(tmp_path: Path):
    python = sklearn_without_nni()
    if python is None:
        pytest.skip("no Python with scikit-learn and without nni (EXPMGR_TEST_SKLEARN_PYTHON)")
    check_sklearn_trials(run_nni_example(tmp_path, "sklearn_regression", python), lowest=-math.inf)


def test_nnis_sklearn_regression_example_runs_unchanged_with_real_nni(tmp_path: Path, nni_python: str):
    check_sklearn_trials(run_nni_example(tmp_path, "sklearn_regression", nni_python), lowest=-math.inf)


# -- NNI's other names a trial may touch -------------------------------------------------------

NNI_OTHER_NAMES_TRIAL = """
    import json, os
    import nni, nni.trial
    from nni.utils import MetricType, OptimizeMode, extract_scalar_history, extract_scalar_reward

    params = nni.get_next_parameter()
    nni.report_intermediate_result(params["x"])
    nni.trial.overwrite_intermediate_seq(5)   # a trial going on from a checkpoint at step 5
    nni.report_intermediate_result(params["x"] + 1)
    nni.trial.overwrite_intermediate_seq(1)   # backwards: a number used already is not given again
    nni.report_final_result({"default": params["x"] * 10, "loss": 1})
    try:
        raise nni.NoMoreTrialError("explored")
    except Exception as error:
        no_more = [type(error).__name__, str(error)]
    seen = {
        "version": nni.__version__, "no_more": no_more,
        "absent": [hasattr(nni, name) for name in ("randint", "lognormal", "qlognormal")],  # as in NNI 3.0
        "reward": [extract_scalar_reward(0.5), extract_scalar_reward({"default": 3, "loss": 1}),
                   extract_scalar_reward({"acc": 2}, scalar_key="acc")],
        "history": extract_scalar_history([1, {"default": 2.5}]),
        "metric_types": [MetricType.FINAL, MetricType.PERIODICAL, MetricType.REQUEST_PARAMETER],
        "modes": [OptimizeMode("maximize").name, OptimizeMode.Minimize.value],
        "choice": [nni.choice("x", [1, 2]).as_legacy_dict(), repr(nni.choice("x", [1, 2]))],
        "numericals": [repr(nni.uniform("a", 0, 1)), repr(nni.quniform("b", 2.5, 5.5, 2.0)),
                       repr(nni.loguniform("c", 1e-05, 0.001)), repr(nni.qloguniform("d", 1e-05, 0.001, 0.0001)),
                       repr(nni.normal("e", 0.0, 1.0)), repr(nni.qnormal("f", 0.0, 1.0, 0.1))],
    }
    try:
        nni.uniform("a", 1, 0)
    except ValueError as error:
        seen["bad_uniform"] = str(error)
    with open(os.path.join(os.environ["NNI_OUTPUT_DIR"], "seen.json"), "w") as file:
        json.dump(seen, file)
"""


def test_nnis_other_trial_names_answer_as_nni_3_0s_in_a_real_experiment(tmp_path: Path, code_dir: Path):
    write_script(code_dir, "trial.py", NNI_OTHER_NAMES_TRIAL)
    experiment = Experiment(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1, 2]}}, trial_command="python3 trial.py",
        trial_code_directory=code_dir, trial_concurrency=2, max_trial_number=2,
        tuner={"name": "GridSearch"}, experiment_working_directory=tmp_path / "home"))
    assert experiment.run(port=0)
    jobs = experiment.list_trial_jobs()
    assert [job.status for job in jobs] == ["SUCCEEDED"] * 2, [
        (experiment.paths.trial_dir(job.trialJobId) / "stderr").read_text() for job in jobs]
    metrics = experiment.get_job_metrics()
    for job in jobs:
        x = job.parameters["x"]
        assert [(m.type, m.sequence, m.data) for m in metrics[job.trialJobId]] == [
            ("PERIODICAL", 0, x), ("PERIODICAL", 5, x + 1), ("FINAL", 6, {"default": x * 10, "loss": 1})]
        seen = json.loads((experiment.paths.trial_dir(job.trialJobId) / "seen.json").read_text())
        assert seen == {
            "version": "3.0", "no_more": ["NoMoreTrialError", "explored"], "absent": [False, False, False],
            "reward": [0.5, 3, 2], "history": [1, 2.5],
            "metric_types": ["FINAL", "PERIODICAL", "REQUEST_PARAMETER"], "modes": ["Maximize", "minimize"],
            # NNI 3.0's own answers (nni/mutable/shortcut.py and mutable.py at 767ed7f22)
            "choice": [{"_type": "choice", "_value": [1, 2]}, "Categorical([1, 2], label='x')"],
            "numericals": ["Numerical(0, 1, label='a')", "Numerical(2.5, 5.5, q=2.0, label='b')",
                           "Numerical(1e-05, 0.001, log_distributed=True, label='c')",
                           "Numerical(1e-05, 0.001, q=0.0001, log_distributed=True, label='d')",
                           "Numerical(-inf, inf, mu=0.0, sigma=1.0, label='e')",
                           "Numerical(-inf, inf, mu=0.0, sigma=1.0, q=0.1, label='f')"],
            "bad_uniform": "low must be strictly smaller than high.",
        }


def test_silence_stdout_keeps_nnis_records_off_stdout_of_a_trial_run_by_hand(tmp_path: Path):
    script = write_script(tmp_path, "trial.py", """
        import nni
        nni.silence_stdout()
        print("params", nni.get_next_parameter())
        nni.report_final_result(0.75)
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXPMGR_", "NNI_"))}
    env["PYTHONPATH"] = trial_api.trial_pythonpath(None)
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "params {}\n", "NNI's standalone warnings and the logged report: not on stdout"
