"""Changes to a running experiment (REST, ``expctl update``, ``Experiment.update_*``) are
checked with the config file's rules and limits before anything changes: a refused one
is a 400 naming the field and value, and the experiment goes on exactly as before."""
from __future__ import annotations

import json
import os
import subprocess
import textwrap
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from expmgr import Experiment, ExperimentConfig
from expmgr.experiment import ExperimentError
from tests.helpers.common import REPO, wait_until, write_script

API = "/api/v1/nni"
SPACE = {"x": {"_type": "randint", "_value": [0, 1000]}}


def put_raw(port: int, update_type: str, body: str) -> tuple[int, dict]:
    """PUT experiment?update_type=... with ``body`` as written (JSON text, big numbers kept)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{API}/experiment?update_type={update_type}",
                                     data=body.encode(), method="PUT",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def get(port: int, route: str) -> object:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{API}/{route}", timeout=30) as response:
        return json.loads(response.read())


@pytest.fixture
def running(tmp_path: Path, code_dir: Path):
    """A GridSearch experiment with no trial limit, one long trial at a time."""
    write_script(code_dir, "trial.py", "import time\ntime.sleep(120)\n")
    experiment = Experiment(ExperimentConfig(
        search_space=SPACE, trial_command="python3 trial.py", trial_code_directory=code_dir,
        trial_concurrency=1, max_trial_number=None, tuner={"name": "GridSearch"}, trial_grace_period=1,
        experiment_working_directory=tmp_path / "home"))
    experiment.start(port=0)
    wait_until(lambda: [t["status"] for t in get(experiment.port, "trial-jobs")] == ["RUNNING"],
               what="the first trial running")
    yield experiment
    experiment.stop()


NONSENSE = [
    ("TRIAL_CONCURRENCY", "trialConcurrency", "1e35", "expected a positive integer, got 1e+35"),
    ("TRIAL_CONCURRENCY", "trialConcurrency", "1" + "0" * 35, "at most 10,000"),
    ("TRIAL_CONCURRENCY", "trialConcurrency", "3.0", "expected a positive integer, got 3.0"),
    ("TRIAL_CONCURRENCY", "trialConcurrency", "true", "expected a positive integer, got True"),
    ("TRIAL_CONCURRENCY", "trialConcurrency", "10001", "at most 10,000"),
    ("TRIAL_CONCURRENCY", "trialConcurrency", "0", "expected a positive integer, got 0"),
    ("MAX_TRIAL_NUM", "maxTrialNumber", "9" * 40, "at most 1,000,000,000"),
    ("MAX_TRIAL_NUM", "maxTrialNumber", "0", "expected a positive integer, got 0"),
    # null would remove a limit (in a file, null is the key left out): a change gives a value.
    *[(update_type, field, "null", "expected a value, got null") for update_type, field in [
        ("MAX_TRIAL_NUM", "maxTrialNumber"), ("MAX_EXEC_DURATION", "maxExperimentDuration"),
        ("TRIAL_CONCURRENCY", "trialConcurrency"), ("SEARCH_SPACE", "searchSpace")]],
    ("MAX_EXEC_DURATION", "maxExperimentDuration", "1" + "0" * 35, "at most 3650d"),
    ("SEARCH_SPACE", "searchSpace", '{"x": {"_type": "randint", "_value": [0, 100000000000000000000000]}}',
     "searchSpace.x._value[1]: randint bounds must fit a 64-bit integer"),
    ("SEARCH_SPACE", "searchSpace", '{"x": {"_type": "randint", "_value": [0, 10000000]}}',
     "searchSpace.x: GridSearch tuner: the grid has more than 1,000,000 combinations"),
    ("SEARCH_SPACE", "searchSpace", '{"x": {"_type": "uniform", "_value": [0, 1e999]}}',
     "searchSpace.x._value[1]: uniform needs finite numbers"),
]


def test_nonsense_updates_are_400s_naming_field_and_value_and_change_nothing(running: Experiment):
    port = running.port
    before = get(port, "experiment")["params"]
    for update_type, field, value, message in NONSENSE:
        status, answer = put_raw(port, update_type, f'{{"params": {{"{field}": {value}}}}}')
        assert status == 400, (field, value, answer)
        assert answer["error"].startswith(f"{field}") and message in answer["error"], (field, answer)
        assert get(port, "experiment")["params"] == before, f"{field} {value[:40]} changed the config"
    for value in ("NaN", "-Infinity", '{"default": NaN}', "1" + "0" * 400):   # never given to the tuner
        request = urllib.request.Request(f"http://127.0.0.1:{port}{API}/experiment/import-data", method="POST",
                                         data=f'[{{"parameter": {{"x": 1}}, "value": {value}}}]'.encode(),
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 400
        assert json.loads(refused.value.read())["error"] == "[0].value: not a finite number; tuners are given " \
                                                            "finite results only"
    assert get(port, "experiment")["status"] == "RUNNING"
    assert len(get(port, "trial-jobs")) == 1, "no trial launched by a refused update"
    # The tuner still works: a sound update is taken and a second trial starts.
    assert put_raw(port, "TRIAL_CONCURRENCY", '{"params": {"trialConcurrency": 2}}') == (200, {})
    wait_until(lambda: [t["status"] for t in get(port, "trial-jobs")] == ["RUNNING", "RUNNING"],
               what="a second trial after a sound update")
    assert get(port, "experiment")["status"] == "RUNNING"


def test_python_and_expctl_updates_have_the_same_limits(running: Experiment, tmp_path: Path):
    with pytest.raises(ExperimentError, match="trialConcurrency: at most 10,000"):
        running.update_trial_concurrency(10**35)
    with pytest.raises(ExperimentError, match="searchSpace.x._value.1.: randint bounds must fit a 64-bit integer"):
        running.update_search_space({"x": {"_type": "randint", "_value": [0, 2**64]}})
    env = {**os.environ, "EXPMGR_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-m", "expmgr.cli", "update", running.id, "concurrency", "100000"],
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "trialConcurrency: at most 10,000" in result.stderr, result.stderr
    result = subprocess.run([sys.executable, "-m", "expmgr.cli", "update", running.id, "duration", "1e400"],
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "duration" in result.stderr, result.stderr
    profile = running.get_experiment_profile()
    assert profile["params"]["trialConcurrency"] == 1 and profile["params"]["searchSpace"] == SPACE
    assert profile["status"] == "RUNNING"


REPORTING_TRIAL = """
    import os, time
    import expmgr
    expmgr.get_next_parameter()
    # Report every 20 ms and write how long each report took, until the test releases it.
    gate, timings = os.environ["GATE"], os.environ["TIMINGS"]
    step, deadline = 0, time.monotonic() + 120
    while not os.path.exists(gate) and time.monotonic() < deadline:
        started = time.monotonic()
        expmgr.report_intermediate_result(step)
        with open(timings, "a") as out:
            out.write(f"{time.monotonic() - started}\\n")
        step += 1
        time.sleep(0.02)
    expmgr.report_final_result(1.0)
"""


def test_a_large_import_goes_in_chunks_and_the_experiment_keeps_answering(tmp_path: Path, code_dir: Path,
                                                                          monkeypatch: pytest.MonkeyPatch):
    write_script(code_dir, "trial.py", REPORTING_TRIAL)
    monkeypatch.setenv("GATE", str(tmp_path / "release"))
    monkeypatch.setenv("TIMINGS", str(tmp_path / "timings"))
    # Above the default import limit (16 MiB), as a user may set it: chunks keep it working.
    monkeypatch.setenv("EXPMGR_MAX_IMPORT_BODY", str(64 * 1024 * 1024))
    experiment = Experiment(ExperimentConfig(
        search_space=SPACE, trial_command="python3 trial.py", trial_code_directory=code_dir,
        trial_concurrency=1, max_trial_number=1, tuner={"name": "GridSearch"}, trial_grace_period=1,
        experiment_working_directory=tmp_path / "home"))
    experiment.start(port=0)
    try:
        port = experiment.port
        wait_until(lambda: (tmp_path / "timings").exists(), what="the trial reporting")
        # 200,000 records, ~32 MB of UTF-8; JSON-escaped for the dispatcher channel they make
        # ~80 MB, more than one frame may hold (which killed the dispatcher before).
        note = "\N{GRINNING FACE}" * 30
        records = [{"parameter": {"x": i % 1000, "note": note}, "value": i / 7} for i in range(200_000)]
        body = json.dumps(records, ensure_ascii=False).encode()
        del records
        reports_before = len((tmp_path / "timings").read_text().splitlines())
        import_began = time.monotonic()
        request = urllib.request.Request(f"http://127.0.0.1:{port}{API}/experiment/import-data", data=body,
                                         method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            assert response.status == 200
        del body
        # The import is applied in chunks while the trial's reports go on being answered.
        wait_until(lambda: "200000 results imported into the tuner" in experiment.paths.experiment_log.read_text(),
                   timeout=120, what="the import to reach the tuner")
        import_took = time.monotonic() - import_began
        timings = [float(line) for line in (tmp_path / "timings").read_text().splitlines()]
        assert len(timings) > reports_before + 5, "the trial kept reporting during the import"
        # Relative to the import, not a fixed number of seconds (a loaded machine slows both):
        # a report arriving as the import began would wait for all of it, were it not chunked.
        assert max(timings) < import_took / 2, f"a report waited {max(timings):.1f} s of the import's {import_took:.1f} s"
        print(f"reports during the import: {len(timings) - reports_before}, slowest {max(timings):.2f} s "
              f"of the import's {import_took:.2f} s")
        assert get(port, "experiment")["status"] == "NO_MORE_TRIAL", "not ERROR: its one trial still runs"
        assert get(port, "trial-jobs")[0]["status"] == "RUNNING", "the trial was not cancelled"
        (tmp_path / "release").touch()
        assert experiment.wait(timeout=60)
        assert experiment.get_status() == "DONE"
    finally:
        (tmp_path / "release").touch()
        experiment.stop()


def test_a_used_up_grid_given_a_new_search_space_runs_its_new_points(tmp_path: Path, code_dir: Path):
    """A grid of one point at concurrency 2 has no more trials while its one trial runs
    (NO_MORE_TRIAL); a new search space gives it more, which run before the experiment ends."""
    write_script(code_dir, "trial.py", textwrap.dedent("""\
        import os, time
        import expmgr
        x = expmgr.get_next_parameter()["x"]
        while not os.path.exists("go"):
            time.sleep(0.05)
        expmgr.report_final_result(x)
        """))
    experiment = Experiment(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1]}}, trial_command="python3 trial.py",
        trial_code_directory=code_dir, trial_concurrency=2, max_trial_number=None,
        tuner={"name": "GridSearch"}, experiment_working_directory=tmp_path / "home"))
    experiment.start(port=0)
    try:
        port = experiment.port
        wait_until(lambda: get(port, "check-status")["status"] == "NO_MORE_TRIAL", what="the grid used up")
        assert len(get(port, "trial-jobs")) == 1
        experiment.update_search_space({"x": {"_type": "choice", "_value": [1, 2]}})
        wait_until(lambda: len(get(port, "trial-jobs")) == 2, what="the new point's trial")
        (code_dir / "go").touch()
        assert experiment.wait(60)
        finals = sorted(json.loads(t["finalMetricData"][0]["data"]) for t in get(port, "trial-jobs"))
        assert finals == ["1", "2"]  # NNI sends the value as JSON text inside the JSON string
    finally:
        experiment.stop()


# The issue-21 probes: each was answered 200 and the experiment was in ERROR 2 s later.
OVERFLOWING = [
    ('{"x": {"_type": "quniform", "_value": [0, 1e300, 1e-300]}}', "searchSpace.x._value[2]: quniform: q = 1e-300"),
    ('{"x": {"_type": "qlognormal", "_value": [700, 10, 1]}}', "searchSpace.x._value: qlognormal: exp(mu + 10 sigma)"),
    ('{"x": {"_type": "randint", "_value": [-9223372036854775808, 9223372036854775807]}}',
     "searchSpace.x._value: randint: upper - lower must be at most"),
]


@pytest.mark.parametrize("tuner", ["Random", "TPE", "Evolution"])
def test_a_space_whose_draws_overflow_is_a_400_and_the_experiment_runs_on(tmp_path: Path, code_dir: Path,
                                                                           tuner: str):
    write_script(code_dir, "trial.py", "import time\ntime.sleep(120)\n")
    experiment = Experiment(ExperimentConfig(
        search_space=SPACE, trial_command="python3 trial.py", trial_code_directory=code_dir,
        trial_concurrency=1, max_trial_number=None, tuner={"name": tuner}, trial_grace_period=1,
        experiment_working_directory=tmp_path / "home"))
    experiment.start(port=0)
    try:
        port = experiment.port
        wait_until(lambda: [t["status"] for t in get(port, "trial-jobs")] == ["RUNNING"], what="the first trial")
        for space, message in OVERFLOWING:
            status, answer = put_raw(port, "SEARCH_SPACE", f'{{"params": {{"searchSpace": {space}}}}}')
            assert (status, answer["error"].startswith(message)) == (400, True), (space, answer)
        assert put_raw(port, "TRIAL_CONCURRENCY", '{"params": {"trialConcurrency": 2}}') == (200, {})
        wait_until(lambda: [t["status"] for t in get(port, "trial-jobs")] == ["RUNNING", "RUNNING"],
                   what="a second trial: the tuner still works")
        profile = get(port, "experiment")
        assert profile["status"] == "RUNNING" and profile["params"]["searchSpace"] == SPACE
    finally:
        experiment.stop()


PICKY_TUNER = """
    from expmgr.algorithms import Tuner

    class PickyTuner(Tuner):
        '''Refuses a space with a parameter "bad" always, one with "stale" once it has generated.'''

        def __init__(self):
            self.generated = 0

        def update_search_space(self, search_space):
            if "bad" in search_space:
                raise ValueError("PickyTuner takes no parameter named bad")
            if "stale" in search_space and self.generated:
                raise RuntimeError("PickyTuner cannot change to stale after it began")
            self.space = search_space

        def generate_parameters(self, parameter_id, **kwargs):
            self.generated += 1
            return {name: parameter_id for name in self.space}

        def receive_trial_result(self, parameter_id, parameters, value, **kwargs):
            pass
"""


def test_a_tuner_that_raises_on_an_update_keeps_the_old_space_and_the_experiment_runs(tmp_path: Path,
                                                                                       code_dir: Path):
    write_script(code_dir, "trial.py", "import time\ntime.sleep(120)\n")
    write_script(code_dir, "picky.py", PICKY_TUNER)
    experiment = Experiment(ExperimentConfig(
        search_space=SPACE, trial_command="python3 trial.py", trial_code_directory=code_dir,
        trial_concurrency=1, max_trial_number=None, trial_grace_period=1,
        tuner={"className": "picky.PickyTuner", "codeDirectory": str(code_dir)},
        experiment_working_directory=tmp_path / "home"))
    experiment.start(port=0)
    try:
        port = experiment.port
        wait_until(lambda: [t["status"] for t in get(port, "trial-jobs")] == ["RUNNING"], what="the first trial")
        # Refused by a tuner built afresh to check it; then by the running tuner itself.
        for name, said in (("bad", "ValueError: PickyTuner takes no parameter named bad"),
                           ("stale", "RuntimeError: PickyTuner cannot change to stale after it began")):
            said = f"cannot use this search space ({said})"
            space = json.dumps({name: {"_type": "choice", "_value": [1]}})
            status, answer = put_raw(port, "SEARCH_SPACE", f'{{"params": {{"searchSpace": {space}}}}}')
            assert status == 400, answer
            assert answer["error"] == f"searchSpace: {said}; the tuner keeps the old search space"
            assert get(port, "experiment")["params"]["searchSpace"] == SPACE
        with pytest.raises(ExperimentError, match="PickyTuner takes no parameter named bad"):
            experiment.update_search_space({"bad": {"_type": "choice", "_value": [1]}})
        (tmp_path / "bad.json").write_text(json.dumps({"bad": {"_type": "choice", "_value": [1]}}))
        env = {**os.environ, "EXPMGR_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
        result = subprocess.run([sys.executable, "-m", "expmgr.cli", "update", experiment.id, "searchspace",
                                 str(tmp_path / "bad.json")], env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode != 0 and "PickyTuner takes no parameter named bad" in result.stderr, result
        assert put_raw(port, "TRIAL_CONCURRENCY", '{"params": {"trialConcurrency": 2}}') == (200, {})
        wait_until(lambda: len(get(port, "trial-jobs")) == 2, what="a second trial, from the old space")
        drawn = [json.loads(t["hyperParameters"][0])["parameters"] for t in get(port, "trial-jobs")]
        assert sorted(drawn, key=str) == [{"x": 0}, {"x": 1}], drawn
        assert get(port, "experiment")["status"] == "RUNNING"
        good = {"y": {"_type": "choice", "_value": [1]}}
        experiment.update_search_space(good)
        assert get(port, "experiment")["params"]["searchSpace"] == good
    finally:
        experiment.stop()
