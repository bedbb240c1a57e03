"""The training-service contract suite's runner: each contract test runs one service (local,
local-warm, local-kept, ray, remote, remote-kept) through ``run_service`` with a ``Context`` (from tests/training/test_contract.py)."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

import psutil
import pytest

from expmgr import trial as trial_api
from expmgr.config import ExperimentConfig, ResolvedConfig
from expmgr.layout import ExperimentPaths, TrialFolder
from expmgr.logreader import LogFile, open_kept, read_blocks
from expmgr.rotation import dropped_bytes, rotated_files
from expmgr.training import TrainingService, TrialFilesError, TrialLaunch, create_training_service, trial_files
from tests.helpers.ray_cluster import ray_cluster, ray_cluster_module  # noqa: F401
from tests.helpers.trial_events import Recorder
from tests.helpers.ssh_hosts import SshHost, ssh_client_home, ssh_host_pair, ssh_hosts  # noqa: F401

SERVICE_CONFIGS: dict[str, dict[str, Any]] = {
    "local": {"platform": "local"},
    "local-warm": {"platform": "local", "trialWarmStart": "auto"},  # Python trials forked from a template
    "local-kept": {"platform": "local", "reattachWindow": "10m"},  # trials under keepers, kept for a resume
    "ray": {"platform": "ray", "trialResources": {"cpu": 1}},  # address: the test cluster's
    "remote": {"platform": "remote"},  # machineList: one test sshd host
    "remote-kept": {"platform": "remote", "reattachWindow": "10m"},  # the host's agent keeps trials for a resume
}
DEADLINE = 30.0
REMOTE_HOST: list[SshHost] = []
"""The remote service's test host, while a remote test runs (its files are read there)."""


@pytest.fixture(params=list(SERVICE_CONFIGS))
def service(request: pytest.FixtureRequest) -> str:
    if request.param == "ray":
        SERVICE_CONFIGS["ray"]["address"] = request.getfixturevalue("ray_cluster").address
    if request.param.startswith("remote"):  # skipped with the harness's reason where sshd hosts cannot run
        hosts = request.getfixturevalue("ssh_host_pair")
        client_home = request.getfixturevalue("ssh_client_home")
        shutil.copy(hosts.known_hosts, client_home / ".ssh" / "known_hosts")
        host = hosts.hosts[0]
        SERVICE_CONFIGS[request.param]["machineList"] = [hosts.machine(host)]
        REMOTE_HOST[:] = [host]
        # Every test's experiment is "exp": its folder on the host goes with the test.
        request.addfinalizer(lambda: shutil.rmtree(host.home / ".expmgr", ignore_errors=True))
        request.addfinalizer(REMOTE_HOST.clear)
    return request.param


class Context:
    def __init__(self, service: TrainingService, events: Recorder, paths: ExperimentPaths, code: Path,
                 config: ResolvedConfig) -> None:
        self.service, self.events, self.paths, self.code = service, events, paths, code
        self.config = config
        self.host = REMOTE_HOST[0] if REMOTE_HOST else None
        self.code_there = code if self.host is None else self.host.home / ".expmgr" / paths.root.name / "code"
        """The code folder as trials see it where they run (its copy on a remote host)."""

    def trial_dir_there(self, trial_id: str) -> Path:
        """The trial's folder where it runs (on a remote host: not the manager's copy)."""
        if self.host is None:
            return self.paths.trial_dir(trial_id)
        return self.host.home / ".expmgr" / self.paths.root.name / "trials" / trial_id

    def write_code(self, name: str, text: str) -> None:
        """A file of the trial code, written after the service started (and sent its copy)."""
        for folder in {self.code, self.code_there}:
            (folder / name).write_text(text)
        if self.host is not None:   # the host's user's, as the upload made it (a successor uploads again)
            os.chown(self.code_there / name, self.host.uid, self.host.uid)

    def make_there(self, path: Path, text: str) -> None:
        """A file where the trial runs, as its user would make it."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if self.host is not None:
            for made in (path, path.parent):
                os.chown(made, self.host.uid, self.host.uid)

    def launch_of(self, trial_id: str, command: str, attempt: int = 1,
                  parameters: dict[str, Any] | None = None) -> TrialLaunch:
        """A launch as the runner asks for it: the trial's folder is the service's to make."""
        record = {"parameter_id": 0, "parameter_source": "algorithm", "parameters": parameters or {},
                  "parameter_index": 0}
        return TrialLaunch(trial_id=trial_id, attempt=attempt, command=command, code_directory=self.code,
                           parameter_record=record,
                           env={trial_api.ENV_TRIAL_ID: trial_id, trial_api.ENV_ATTEMPT: str(attempt)})

    async def successor(self) -> tuple[TrainingService, Recorder]:
        """A new service of the same experiment, started as a resume starts it (after this one
        let go of its trials, or died); the caller stops it."""
        events = Recorder()
        service = create_training_service(self.config, events, self.paths)
        await service.start()
        return service, events

    async def until(self, condition: Callable[[], Any], what: str, timeout: float = DEADLINE) -> Any:
        deadline = time.monotonic() + timeout
        while not (result := condition()):
            assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
            await asyncio.sleep(0.02)
        return result


def run_service(name: str, tmp_path: Path, test: Callable[[Context], Awaitable[None]],
                report_socket: Path | None = None, **config: Any) -> None:
    code = tmp_path / "code"
    code.mkdir()
    config.setdefault("training_service", SERVICE_CONFIGS[name])
    config.setdefault("trial_command", "true")
    checked = ResolvedConfig.from_config(ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [0]}}, trial_code_directory=code,
        tuner={"name": "GridSearch"}, experiment_working_directory=tmp_path / "home", trial_concurrency=1,
        **config))
    assert checked.training_service.platform == name.split("-")[0]
    paths = ExperimentPaths(tmp_path / "home" / "exp")
    paths.create()
    events = Recorder()

    async def main() -> None:
        service = create_training_service(checked, events, paths, report_socket=report_socket)
        await service.start()
        try:
            await test(Context(service, events, paths, code, checked))
        finally:
            await service.stop(grace_period=1.0)

    asyncio.run(main())
    # Every test of the contract also checks the order of each attempt's events.
    assert events.order_problems(stopped=True) == [], "events out of the order TrialEvents states"


