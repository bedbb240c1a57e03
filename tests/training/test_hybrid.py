"""The hybrid training service (NNI's ``trainingService: [local, remote]``): a list of services
filling the experiment's slots together. Its composition is generic, so it is checked with
two real local services composed directly (the config refuses one platform twice in a list,
not the composition), with real trial processes; then the factory, the stored platform and
the trial files of a hybrid config (local+remote)."""
from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

import psutil
import pytest

from expmgr import Experiment, ExperimentConfig
from expmgr import trial as trial_api
from expmgr.config import PLATFORMS, ResolvedConfig, ResolvedLocalConfig
from expmgr.layout import ExperimentPaths, TrialFolder
from expmgr.store import open_store
from expmgr.store.registry import Registry
from expmgr.training import TrainingServiceError, TrialLaunch, create_training_service, trial_files
from expmgr.training._folder import SharedTrialFolders
from expmgr.training.hybrid import HybridTrainingService
from expmgr.training.local import LocalTrainingService
from tests.helpers.common import REPO
from tests.helpers.trial_events import Recorder

DEADLINE = 30.0
ONE_GPU = ResolvedLocalConfig(gpu_indices=(0,), max_trial_number_per_gpu=1, use_active_gpu=True)
"""A member with one slot: one GPU, one trial on it (no nvidia-smi needed: gpuIndices is taken as is;
what other processes run on it does not count)."""
HOSTS = ("127.0.0.1", "localhost")
"""Each member's manager host, which a local service names as its trials' host: which member
told an attempt's start shows in the host it gives."""


class Hybrid:
    """Two real local services composed as one, and what the test needs around them."""

    def __init__(self, tmp_path: Path, configs: tuple[ResolvedLocalConfig, ResolvedLocalConfig],
                 gpus: tuple[int | None, int | None]) -> None:
        self.code = tmp_path / "code"
        self.code.mkdir()
        self.paths = ExperimentPaths(tmp_path / "exp")
        self.paths.create()
        self.events = Recorder()
        self.members = [LocalTrainingService(config, gpu, self.events, self.paths, manager_host=host)
                        for config, gpu, host in zip(configs, gpus, HOSTS)]
        self.service = HybridTrainingService(self.members)

    def launch_of(self, trial_id: str, command: str = "sleep 60", attempt: int = 1) -> TrialLaunch:
        record = {"parameter_id": 0, "parameter_source": "algorithm", "parameters": {}, "parameter_index": 0}
        return TrialLaunch(trial_id=trial_id, attempt=attempt, command=command, code_directory=self.code,
                           parameter_record=record,
                           env={trial_api.ENV_TRIAL_ID: trial_id, trial_api.ENV_ATTEMPT: str(attempt)})

    def runs_on(self, trial_id: str) -> list[int]:
        """The members whose process of ``trial_id`` is alive (signal 0 only asks)."""
        return [index for index, member in enumerate(self.members) if member.signal(trial_id, 0)]

    async def until(self, condition: Callable[[], Any], what: str) -> None:
        deadline = time.monotonic() + DEADLINE
        while not condition():
            assert time.monotonic() < deadline, f"timed out after {DEADLINE}s waiting for {what}"
            await asyncio.sleep(0.02)


def run_hybrid(tmp_path: Path, test: Callable[[Hybrid], Awaitable[None]],
               configs: tuple[ResolvedLocalConfig, ResolvedLocalConfig] = (ResolvedLocalConfig(), ResolvedLocalConfig()),
               gpus: tuple[int | None, int | None] = (None, None)) -> Recorder:
    hybrid = Hybrid(tmp_path, configs, gpus)

    async def main() -> None:
        await hybrid.service.start()
        try:
            await test(hybrid)
        finally:
            await hybrid.service.stop(grace_period=1.0)

    asyncio.run(main())
    assert hybrid.events.order_problems(stopped=True) == [], "events out of the order TrialEvents states"
    return hybrid.events


def test_trials_fill_the_slots_of_every_member_and_each_start_names_its_members_host(tmp_path: Path):
    async def test(h: Hybrid) -> None:
        assert h.service.has_capacity() and h.service.waiting_reason() is None
        await h.service.launch(h.launch_of("a"))
        assert h.service.has_capacity(), "the second member's slot is free"
        await h.service.launch(h.launch_of("b"))
        assert (h.runs_on("a"), h.runs_on("b")) == ([0], [1])
        assert not h.service.has_capacity(), "both members' one slot is taken"
        reason = h.service.waiting_reason()
        assert reason is not None and reason.startswith("trainingService[0]: waiting for a GPU") \
            and " | trainingService[1]: waiting for a GPU" in reason, reason
        assert h.events.hosts == {("a", 1): HOSTS[0], ("b", 1): HOSTS[1]}, "each member tells its own trials' start"

        assert h.service.signal("b", signal.SIGKILL)
        await h.until(lambda: h.events.exit_of("b"), "b's exit")
        assert h.service.has_capacity()
        await h.service.launch(h.launch_of("c"))   # the first member is full: passed over
        assert h.runs_on("c") == [1] and h.events.hosts[("c", 1)] == HOSTS[1]

    run_hybrid(tmp_path, test, configs=(ONE_GPU, ONE_GPU), gpus=(1, 1))


def test_members_take_new_trials_in_turn_so_a_member_always_with_room_does_not_take_them_all(tmp_path: Path):
    """Local without GPUs always has room (trialConcurrency alone bounds it): in list order,
    it would run every trial and the next member none."""
    async def test(h: Hybrid) -> None:
        for trial_id in "abcd":
            await h.service.launch(h.launch_of(trial_id))
        assert [h.runs_on(trial_id) for trial_id in "abcd"] == [[0], [1], [0], [1]]

    run_hybrid(tmp_path, test)


def test_a_signal_reaches_the_trial_on_the_member_running_it_and_no_other(tmp_path: Path):
    async def test(h: Hybrid) -> None:
        await h.service.launch(h.launch_of("a"))
        await h.service.launch(h.launch_of("b"))
        assert h.service.signal("b", signal.SIGTERM)
        await h.until(lambda: h.events.exit_of("b"), "b's exit")
        assert h.events.exit_of("b") == ("exited", "b", 1, None, signal.SIGTERM)
        assert h.events.exit_of("a") is None and h.runs_on("a") == [0], "the other member's trial runs on"
        assert not h.service.signal("b", signal.SIGTERM), "an ended trial cannot be signalled"
        assert not h.service.signal("never", signal.SIGTERM), "nor one never launched"

        # A later attempt may run on the other member: its signals go there.
        await h.service.launch(h.launch_of("b", attempt=2))
        assert h.runs_on("b") == [0]
        assert h.service.signal("b", signal.SIGKILL)
        await h.until(lambda: ("exited", "b", 2, None, signal.SIGKILL) in h.events.events, "b's second exit")

    run_hybrid(tmp_path, test)


def _our_live_processes() -> set[int]:
    """This test process's descendants still running (an ended one not yet reaped is not)."""
    alive = set()
    for process in psutil.Process().children(recursive=True):
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                alive.add(process.pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def test_stop_ends_every_members_trials_within_the_grace_period_and_leaves_no_process(tmp_path: Path):
    stubborn = ("import pathlib, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "pathlib.Path('ready').write_text('')\ntime.sleep(60)\n")
    before = _our_live_processes()

    async def test(h: Hybrid) -> None:
        (h.code / "stubborn.py").write_text(stubborn)
        await h.service.launch(h.launch_of("polite"))
        await h.service.launch(h.launch_of("stubborn", "python3 stubborn.py"))
        await h.until(lambda: (h.code / "ready").exists(), "the trial to ignore SIGTERM")
        assert len(_our_live_processes() - before) == 4, "two trials and each member's watchdog"
        await h.service.stop(grace_period=0.5)
        assert h.events.exit_of("polite") == ("exited", "polite", 1, None, signal.SIGTERM)
        assert h.events.exit_of("stubborn") == ("exited", "stubborn", 1, None, signal.SIGKILL)
        assert _our_live_processes() - before == set(), "no trial and no watchdog left"
        told = len(h.events.events)
        await h.service.stop(grace_period=0.5)   # idempotent
        assert len(h.events.events) == told

    run_hybrid(tmp_path, test)


def test_a_member_that_cannot_start_is_named_in_one_line_and_the_others_are_stopped(tmp_path: Path):
    before = _our_live_processes()
    # trialGpuNumber 2 on a member with one GPU: no trial could ever start there.
    hybrid = Hybrid(tmp_path, (ResolvedLocalConfig(), ONE_GPU), gpus=(None, 2))
    with pytest.raises(TrainingServiceError) as refused:
        asyncio.run(hybrid.service.start())
    message = str(refused.value)
    assert message.startswith("trainingService[1]: trialGpuNumber is 2 but trainingService.gpuIndices [0] gives "
                              "1 GPU(s)") and "\n" not in message, message
    assert _our_live_processes() - before == set(), "the member that started (and its watchdog) is stopped"
    assert not hybrid.service.has_capacity(), "a hybrid that did not start has no room"


def test_a_leftover_process_is_ended_by_the_member_that_can_find_it(tmp_path: Path):
    async def test(h: Hybrid) -> None:
        leftover = subprocess.Popen(["sleep", "60"], start_new_session=True)
        try:
            started = psutil.Process(leftover.pid).create_time()
            assert not h.service.end_leftover("old", leftover.pid, started + 5), "another process's pid"
            assert h.service.end_leftover("old", leftover.pid, started)
            leftover.wait(timeout=DEADLINE)
        finally:
            if leftover.poll() is None:
                leftover.kill()
                leftover.wait()

    run_hybrid(tmp_path, test)


def _hybrid_config(tmp_path: Path, code_dir: Path) -> ExperimentConfig:
    # Port 1 of loopback: nothing listens there, so the remote member cannot start.
    return ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [0, 1]}}, trial_command="python3 -c pass",
        trial_code_directory=code_dir, trial_concurrency=2, max_trial_number=2, tuner={"name": "GridSearch"},
        experiment_working_directory=tmp_path / "home",
        training_service=[{"platform": "local"},
                          {"platform": "remote", "machineList": [{"host": "127.0.0.1", "port": 1, "user": "nobody"}]}])


def test_a_hybrid_config_builds_a_hybrid_of_each_members_own_service(tmp_path: Path, code_dir: Path):
    resolved = ResolvedConfig.from_config(_hybrid_config(tmp_path, code_dir))
    service = create_training_service(resolved, Recorder(), ExperimentPaths(tmp_path / "exp"))
    assert isinstance(service, HybridTrainingService)
    assert service.names == ("trainingService[0] (local)", "trainingService[1] (remote)")
    assert isinstance(service.members[0], LocalTrainingService)
    assert service.files.folder("Xy3zQ") == str(ExperimentPaths(tmp_path / "exp").trial_dir("Xy3zQ")), (
        "a trial not given to a member yet: the first member's files (every member's trials/<id>/)")
    asyncio.run(service.stop(0))   # nothing started: returns


def test_a_hybrid_experiment_is_stored_and_listed_as_local_plus_remote_and_a_member_failing_to_start_ends_it(
        tmp_path: Path, code_dir: Path, home: Path):
    experiment = Experiment(_hybrid_config(tmp_path, code_dir))
    assert experiment.run(port=0) is False
    assert experiment.get_status() == "ERROR"
    error = experiment.get_error()
    assert error.startswith("trainingService[1] (remote): ") and "\n" not in error.strip(), error
    assert experiment.list_trial_jobs() == [], "no trial ran"

    with open_store(ExperimentPaths(tmp_path / "home" / experiment.id), readonly=True) as store:
        assert store.profile().platform == "local+remote"
    [entry] = Registry(tmp_path / "home").entries()
    assert entry.platform == "local+remote"
    assert experiment.get_experiment_metadata(experiment.id)["platform"] == "local+remote", "NNI's experiments-info"
    env = {**os.environ, "EXPMGR_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    listed = subprocess.run([sys.executable, "-m", "expmgr.cli", "experiment", "list", "--all", "--json"],
                            env=env, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert [row["platform"] for row in json.loads(listed.stdout)] == ["local+remote"]


def test_a_stored_hybrid_experiments_trial_files_are_the_shared_trial_folders(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    paths = ExperimentPaths(tmp_path / "exp")
    folder = TrialFolder(paths.trial_dir("Xy3zQ"))
    folder.root.mkdir(parents=True)
    folder.stdout.write_text("from the remote host\n")
    for platform in ("local+remote", "remote+local"):
        files = trial_files(paths, platform)
        assert isinstance(files, SharedTrialFolders), platform
        assert files.log("Xy3zQ", "stdout").path == folder.stdout and files.folder("Xy3zQ") == str(folder.root)

    with pytest.raises(TrainingServiceError, match=r"^no trial files for platform 'nosuch' \(in 'local\+nosuch'\): "
                                                   r"expected one of local, ray, remote$"):
        trial_files(paths, "local+nosuch")
    # A platform whose trials' files are kept another way cannot be read with the others'.
    monkeypatch.setitem(PLATFORMS, "elsewhere", dataclasses.replace(
        PLATFORMS["remote"], name="elsewhere", files="expmgr.training.files:TrialFiles"))
    with pytest.raises(TrainingServiceError, match=r"^no trial files for platform 'local\+elsewhere': its training "
                                                   r"services keep their trials' files in different ways"):
        trial_files(paths, "local+elsewhere")
