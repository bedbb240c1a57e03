"""As NNI's, an experiment's server stays after its search ended by itself: ``run()``
and ``wait()`` return at DONE, REST answers (read-only) until ``stop()`` or the
interpreter's exit. Real trials, a real server, a real store."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from expmgr import Experiment, ExperimentConfig
from expmgr.store.registry import Registry
from tests.helpers.common import ENV_WITH_REPO, refuses_connections, rest_call as call, wait_until, write_script


def config(code_dir: Path, home: Path) -> ExperimentConfig:
    return ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1, 2, 3]}},
        trial_command="python3 trial.py", trial_code_directory=code_dir, trial_concurrency=2,
        max_trial_number=3, tuner={"name": "GridSearch"}, experiment_working_directory=home)


@pytest.fixture
def experiment_config(code_dir: Path, tmp_path: Path) -> ExperimentConfig:
    write_script(code_dir, "trial.py", """
        import expmgr
        expmgr.report_final_result(expmgr.get_next_parameter()["x"] * 2)
    """)
    return config(code_dir, tmp_path / "home")


def children() -> list[psutil.Process]:
    return psutil.Process().children(recursive=True)


def test_start_poll_export_stop_as_nni_scripts_do(experiment_config: ExperimentConfig):
    experiment = Experiment(experiment_config)
    experiment.start(port=0)
    wait_until(lambda: experiment.get_status() == "DONE", timeout=60, what="DONE")
    assert sorted(result.value for result in experiment.export_data()) == [2, 4, 6]
    assert experiment.wait(timeout=30)
    status, view = call(experiment.port, "GET", "check-status")
    assert (status, view["status"]) == (200, "DONE"), "the server answers after DONE"
    status, exported = call(experiment.port, "GET", "export-data")
    assert status == 200 and len(exported) == 3
    assert not children(), "after DONE only the server is left: no dispatcher, watchdog or trial"
    entry = Registry(experiment_config.experiment_working_directory).get(experiment.id)
    assert entry.status.value == "DONE" and entry.pid is not None
    experiment.stop()
    assert refuses_connections(experiment.port)
    assert Registry(experiment_config.experiment_working_directory).get(experiment.id).pid is None
    assert experiment.get_status() == "DONE", "the store is still read after stop()"


def test_run_returns_at_done_and_the_server_refuses_writes_until_stop(experiment_config: ExperimentConfig):
    experiment = Experiment(experiment_config)
    assert experiment.run(port=0) is True
    status, profile = call(experiment.port, "GET", "experiment")
    assert status == 200 and profile["status"] == "DONE" and profile["readOnly"] is True
    status, trials = call(experiment.port, "GET", "trial-jobs")
    assert status == 200 and len(trials) == 3
    # Only a raise of its budget is taken after DONE (test_more_trials_after_done.py); nothing else.
    update = call(experiment.port, "PUT", "experiment?update_type=TRIAL_CONCURRENCY",
                  {"params": {"trialConcurrency": 3}})
    assert update[0] == 400 and "trialConcurrency: cannot be changed" in update[1]["error"], update
    kill = call(experiment.port, "DELETE", f"trial-jobs/{trials[0]['trialJobId']}")
    imported = call(experiment.port, "POST", "experiment/import-data", [])
    for answer in (kill, imported):
        assert answer[0] == 409 and "read-only" in answer[1]["error"], answer
    with pytest.raises(Exception, match="trialConcurrency: cannot be changed: experiment .* is DONE"):
        experiment.update_trial_concurrency(3)
    experiment.stop()
    experiment.stop()  # idempotent
    assert refuses_connections(experiment.port)


def test_a_script_that_returns_after_run_stops_its_server_at_exit(experiment_config: ExperimentConfig,
                                                                 tmp_path: Path):
    """atexit stops it: the interpreter exits, the registry no longer names its pid, nothing is left."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(f"""
        from expmgr import Experiment, ExperimentConfig
        import json
        config = ExperimentConfig.from_dict(json.loads({json.dumps(json.dumps(experiment_config.to_dict(), default=str))}))
        experiment = Experiment(config)
        assert experiment.run(port=0)
        print("ID", experiment.id, experiment.port, flush=True)
    """))
    result = subprocess.run([sys.executable, str(script)], env=ENV_WITH_REPO, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    _, exp_id, port = result.stdout.splitlines()[-1].split()
    entry = Registry(experiment_config.experiment_working_directory).get(exp_id)
    assert entry.status.value == "DONE" and entry.pid is None
    assert refuses_connections(int(port))
    root, code_dir = str(Path(entry.dir)), str(experiment_config.trial_code_directory)
    assert not [process for process in psutil.process_iter(["cmdline", "cwd"])
                if root in " ".join(process.info["cmdline"] or []) or process.info["cwd"] == code_dir], \
        "no dispatcher, watchdog or trial of it outlives the script"
