"""GPUs as NNI's local training service gives them, on a machine without one: a stand-in
nvidia-smi (tests/helpers/fake_nvidia_smi.py) says which GPUs exist and which processes use them,
and the test changes that while a real experiment runs. Trials wait, with the reason in the
REST trial record and ``expctl trial ls``, while no GPU is free; the experiment ends in ERROR
at start only when no trial could ever be given what it asks."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from expmgr import Experiment, ExperimentConfig
from tests.helpers.common import REPO, wait_until, write_script
from tests.helpers.fake_nvidia_smi import FakeNvidiaSmi

# Waits for its own gate file (gate/<x>), then reports; prints the GPUs it was given.
GATED_GPU_TRIAL = """
    import os, pathlib, time
    import expmgr
    x = expmgr.get_next_parameter()["x"]
    print(os.environ["CUDA_VISIBLE_DEVICES"], flush=True)
    pids = os.environ.get("PID_FOLDER")
    if pids:  # this trial "uses" GPU 0 as nvidia-smi tells (tests/helpers/fake_nvidia_smi.py)
        (pathlib.Path(pids) / str(os.getpid())).write_text("")
    gate = pathlib.Path(os.environ["GATE_DIR"]) / str(x)
    deadline = time.monotonic() + 120
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    if pids:
        (pathlib.Path(pids) / str(os.getpid())).unlink()
    expmgr.report_final_result(x)
"""


@pytest.fixture
def gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeNvidiaSmi:
    return FakeNvidiaSmi(tmp_path, monkeypatch)


@pytest.fixture
def gates(tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write_script(code_dir, "trial.py", GATED_GPU_TRIAL)
    folder = tmp_path / "gates"
    folder.mkdir()
    monkeypatch.setenv("GATE_DIR", str(folder))
    return folder


def _config(tmp_path: Path, code_dir: Path, trials: int, **overrides: object) -> ExperimentConfig:
    fields: dict = dict(search_space={"x": {"_type": "choice", "_value": list(range(1, trials + 1))}},
                        trial_command="python3 trial.py", trial_code_directory=code_dir, trial_concurrency=1,
                        max_trial_number=trials, tuner={"name": "GridSearch"}, trial_gpu_number=1,
                        experiment_working_directory=tmp_path / "home")
    fields.update(overrides)
    return ExperimentConfig(**fields)


def _trial_view(port: int, trial_id: str) -> dict:
    """expmgr's REST record of a trial (the web UI's trial page reads it)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/expmgr/trials/{trial_id}", timeout=10) as answer:
        return json.loads(answer.read())


def _waiting(experiment: Experiment) -> list[dict]:
    """The REST records of the experiment's WAITING trials that say why they wait."""
    assert experiment.port is not None
    views = [_trial_view(experiment.port, t.trialJobId) for t in experiment.list_trial_jobs() if t.status == "WAITING"]
    return [view for view in views if view.get("waitingReason")]


def _trial_ls(experiment: Experiment, tmp_path: Path) -> list[dict]:
    env = {**os.environ, "EXPMGR_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-m", "expmgr.cli", "trial", "ls", experiment.id, "--json"], env=env,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _gpus_of(experiment: Experiment, trial_id: str) -> str:
    return (experiment.paths.trial_dir(trial_id) / "stdout").read_text().strip()


def test_a_trial_waits_with_its_reason_while_another_process_uses_the_gpu_and_starts_once_it_is_free(
        tmp_path: Path, code_dir: Path, gpus: FakeNvidiaSmi, gates: Path):
    gpus.show([0], processes={0: [os.getpid()]})  # this test's process is "another process" on GPU 0
    experiment = Experiment(_config(tmp_path, code_dir, trials=1,
                                    training_service={"platform": "local", "use_active_gpu": False}))
    experiment.start(port=0)
    try:
        [waiting] = wait_until(lambda: _waiting(experiment), what="a trial waiting for the GPU, with its reason")
        reason = waiting["waitingReason"]
        assert reason == ("waiting for a GPU: a trial needs 1 (trialGpuNumber); "
                          "GPU 0 is used by another process (useActiveGpu: false)")
        assert experiment.get_status() == "NO_MORE_TRIAL", "a busy GPU is no error: the trial waits"
        [row] = _trial_ls(experiment, tmp_path)
        assert (row["trial"], row["status"], row["waiting"]) == (waiting["trialJobId"], "WAITING", reason)

        gpus.show([0])  # the other process ended
        wait_until(lambda: _trial_view(experiment.port, waiting["trialJobId"])["status"] == "RUNNING",
                   what="the trial to start on the freed GPU")
        assert "waitingReason" not in _trial_view(experiment.port, waiting["trialJobId"])
        (gates / "1").write_text("")
        assert experiment.wait(timeout=120)
        assert experiment.get_status() == "DONE"
        assert _gpus_of(experiment, waiting["trialJobId"]) == "0"
        assert [row["waiting"] for row in _trial_ls(experiment, tmp_path)] == [None]
    finally:
        experiment.stop()


def test_use_active_gpu_gives_trials_a_gpu_that_another_process_uses(
        tmp_path: Path, code_dir: Path, gpus: FakeNvidiaSmi, gates: Path):
    gpus.show([0, 1], processes={0: [os.getpid()], 1: [os.getpid()]})
    (gates / "1").write_text("")
    experiment = Experiment(_config(tmp_path, code_dir, trials=1,
                                    training_service={"platform": "local", "use_active_gpu": True}))
    assert experiment.run(port=0)
    [trial] = experiment.list_trial_jobs()
    assert trial.status == "SUCCEEDED" and _gpus_of(experiment, trial.trialJobId) == "0"


def test_trials_share_a_gpu_up_to_max_trial_number_per_gpu_and_their_own_processes_never_make_it_busy(
        tmp_path: Path, code_dir: Path, gpus: FakeNvidiaSmi, gates: Path, monkeypatch: pytest.MonkeyPatch):
    pid_folder = tmp_path / "gpu0-pids"
    pid_folder.mkdir()
    monkeypatch.setenv("PID_FOLDER", str(pid_folder))
    # GPU 1 runs another user's process; GPU 0 the processes of this experiment's trials.
    gpus.show([0, 1], processes={1: [os.getpid()]}, pid_folder=pid_folder)
    experiment = Experiment(_config(
        tmp_path, code_dir, trials=3, trial_concurrency=3,
        training_service={"platform": "local", "use_active_gpu": False, "max_trial_number_per_gpu": 2}))
    experiment.start(port=0)
    try:
        [waiting] = wait_until(lambda: _waiting(experiment), what="the third trial waiting, with its reason")
        assert waiting["waitingReason"] == (
            "waiting for a GPU: a trial needs 1 (trialGpuNumber); GPU 0 runs 2 trial(s) of this experiment "
            "(maxTrialNumberPerGpu: 2); GPU 1 is used by another process (useActiveGpu: false)")
        running = [t for t in experiment.list_trial_jobs() if t.status == "RUNNING"]
        assert len(running) == 2
        wait_until(lambda: len(os.listdir(pid_folder)) == 2, what="both trials on GPU 0 as nvidia-smi tells")
        asked = gpus.queries()
        wait_until(lambda: gpus.queries() >= asked + 2, what="nvidia-smi asked after both trials were listed")

        # One trial ends: the waiting one gets its place on GPU 0 beside the other, whose process
        # nvidia-smi lists on GPU 0: a trial of this experiment, so no "other process".
        first, second = sorted(running, key=lambda t: t.sequenceId)
        (gates / "1").write_text("")
        wait_until(lambda: _trial_view(experiment.port, waiting["trialJobId"])["status"] == "RUNNING",
                   what="the waiting trial to start beside the running one")
        assert _trial_view(experiment.port, second.trialJobId)["status"] == "RUNNING"
        (gates / "2").write_text("")
        (gates / "3").write_text("")
        assert experiment.wait(timeout=120)
        assert experiment.get_status() == "DONE"
        assert {_gpus_of(experiment, t.trialJobId) for t in experiment.list_trial_jobs()} == {"0"}
    finally:
        experiment.stop()


@pytest.mark.parametrize("gpu_indices, listed, error", [
    ([0], [0, 1], "trialGpuNumber is 2 but trainingService.gpuIndices [0] gives 1 GPU(s) on this machine; "
                  "nvidia-smi lists 0, 1: no trial could ever start; lower trialGpuNumber or list more GPUs "
                  "in gpuIndices"),
    ([0, 3], [0, 1], "trialGpuNumber is 2 but trainingService.gpuIndices [0, 3] gives 1 GPU(s) on this machine; "
                     "nvidia-smi lists 0, 1: no trial could ever start"),
    (None, [0], "trialGpuNumber is 2 but this machine has 1 GPU(s) (nvidia-smi lists 0): no trial could ever "
                "start; lower trialGpuNumber"),
])
def test_the_experiment_ends_in_error_at_start_only_when_no_trial_could_ever_get_its_gpus(
        tmp_path: Path, code_dir: Path, gpus: FakeNvidiaSmi, gates: Path, gpu_indices: list[int] | None,
        listed: list[int], error: str):
    gpus.show(listed, processes={index: [os.getpid()] for index in listed})  # busy now: not why it fails
    experiment = Experiment(_config(tmp_path, code_dir, trials=1, trial_gpu_number=2,
                                    training_service={"platform": "local", "gpu_indices": gpu_indices}))
    assert experiment.run(port=0) is False
    assert experiment.get_status() == "ERROR"
    message = experiment.get_error()
    assert error in message and "\n" not in message.strip(), message
    assert experiment.list_trial_jobs() == []


def test_without_nvidia_smi_asking_for_gpus_is_an_error_at_start_that_says_what_to_do(
        tmp_path: Path, code_dir: Path, gates: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable))  # python3, and no nvidia-smi
    experiment = Experiment(_config(tmp_path, code_dir, trials=1))
    assert experiment.run(port=0) is False
    assert "trialGpuNumber is 1 but nvidia-smi finds no GPU on this machine" in experiment.get_error()
    assert "trainingService.gpuIndices" in experiment.get_error()
