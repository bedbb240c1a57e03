"""An experiment deleted from the registry while a command waits on it (``expctl stop``,
``expctl log --follow``, a connected ``Experiment.stop()``): a message naming the
experiment and a failure, not an AttributeError. The experiment's process is a stand-in
registered under a made-up id, so that the entry can go at a chosen moment."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from expmgr.config import ExperimentConfig
from expmgr.experiment import Experiment, ExperimentError
from expmgr.layout import ExperimentPaths
from expmgr.server.auth import Access
from expmgr.states import ExperimentState
from expmgr.store import ExperimentProfile, create_store
from expmgr.store.registry import Registry, RegistryEntry
from tests.helpers.common import REPO, wait_until

EXP_ID = "de1eted0"
PORT = 1  # listed, never connected to: stop() signals the process, it calls no route

STAND_IN = """\
import signal, sys, time
from pathlib import Path
from expmgr.store.registry import Registry

def deleted_on_stop(signum, frame):
    Registry(Path(sys.argv[1])).remove(sys.argv[2])  # as if deleted while it stopped
    sys.exit(0)

if sys.argv[3] == "delete-on-sigterm":
    signal.signal(signal.SIGTERM, deleted_on_stop)
print("ready", flush=True)
time.sleep(120)
"""


@pytest.fixture
def stand_in(tmp_path: Path):
    """Start ``stand_in(mode)``: a process registered as running experiment EXP_ID in
    ``tmp_path / "home"``, with its folder; its paths are returned. Killed at the end."""
    home = tmp_path / "home"
    started: list[subprocess.Popen] = []

    def start(mode: str) -> ExperimentPaths:
        process = subprocess.Popen([sys.executable, "-c", STAND_IN, str(home), EXP_ID, mode],
                                   stdout=subprocess.PIPE, text=True,
                                   env={**os.environ, "PYTHONPATH": str(REPO)})
        started.append(process)
        assert process.stdout is not None and process.stdout.readline() == "ready\n"  # its handler is set
        paths = ExperimentPaths(home / EXP_ID)
        paths.create()
        Registry(home).add(RegistryEntry(id=EXP_ID, name=None, dir=str(paths.root), port=PORT, pid=process.pid,
                                         status=ExperimentState.RUNNING, start_time=time.time()))
        return paths

    yield home, start
    for process in started:
        process.kill()
        process.wait()
        assert process.stdout is not None
        process.stdout.close()


def expctl(home: Path, *args: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "expmgr.cli", *args], env=env, text=True, **kwargs)


def test_stop_of_an_experiment_deleted_while_it_stops_names_it_and_fails(stand_in):
    home, start = stand_in
    start("delete-on-sigterm")
    stop = expctl(home, "stop", EXP_ID, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = stop.communicate(timeout=60)
    assert Registry(home).get(EXP_ID) is None  # the stand-in got the signal and deleted it
    assert stop.returncode == 1, (out, err)
    assert f"experiment {EXP_ID} is no longer in the registry" in err and "deleted meanwhile" in err
    assert "Traceback" not in err


def test_log_follow_of_an_experiment_deleted_meanwhile_names_it_and_fails(stand_in, tmp_path: Path):
    home, start = stand_in
    paths = start("keep-running")
    paths.experiment_log.write_text("first line\n")
    out_file, err_file = tmp_path / "out", tmp_path / "err"
    with open(out_file, "w") as out, open(err_file, "w") as err:
        follow = expctl(home, "log", "experiment", EXP_ID, "--follow", stdout=out, stderr=err)
        try:
            wait_until(lambda: "first line" in out_file.read_text(), what="the log's start printed")
            assert follow.poll() is None  # following
            Registry(home).remove(EXP_ID)
            follow.wait(timeout=60)
        finally:
            follow.kill()
            follow.wait()
    assert follow.returncode == 1
    message = err_file.read_text()
    assert f"experiment {EXP_ID} is no longer in the registry" in message and "Traceback" not in message


def test_connected_stop_of_an_experiment_deleted_meanwhile_raises_experiment_error(stand_in):
    home, start = stand_in
    paths = start("keep-running")
    config = ExperimentConfig(search_space={"x": {"_type": "choice", "_value": [1]}}, trial_command="true",
                              trial_code_directory=home, trial_concurrency=1, tuner={"name": "Random"},
                              experiment_working_directory=home).canonical()
    with create_store(paths, ExperimentProfile(id=EXP_ID, name=None, config=config.to_dict(),
                                               status=ExperimentState.RUNNING, error=None, start_time=time.time(),
                                               end_time=None, port=PORT, log_dir=str(paths.root),
                                               platform="local", minimizes=False)):
        pass
    Access().save(paths.access_file)
    experiment = Experiment.connect(PORT, home=home)
    Registry(home).remove(EXP_ID)
    with pytest.raises(ExperimentError, match=f"experiment {EXP_ID} is no longer in the registry"):
        experiment.stop()
