"""The manager starts the dispatcher before anything else (its start-up overlaps the rest),
so a start that fails after that must stop it."""
from __future__ import annotations

import logging
import time
from pathlib import Path

import psutil
import pytest

from expmgr import ExperimentConfig
from expmgr.config import ResolvedConfig
from expmgr.experiment.listening import server_sockets
from expmgr.experiment.manager import Manager
from expmgr.layout import ExperimentPaths
from expmgr.states import ExperimentState
from expmgr.store import ExperimentProfile, create_store
from expmgr.store.registry import Registry
from tests.helpers.common import wait_until


def dispatchers_of(paths: ExperimentPaths) -> list[psutil.Process]:
    """This experiment's dispatcher processes still running (found by their log file)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if str(paths.dispatcher_log) in child.cmdline() and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child)
        except psutil.Error:
            pass
    return found


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the start fails in its thread
def test_a_start_that_fails_after_the_dispatcher_started_leaves_no_dispatcher(tmp_path: Path, code_dir: Path):
    config = ResolvedConfig.from_config(ExperimentConfig(
        search_space={"x": {"_type": "uniform", "_value": [0, 1]}}, trial_command="python3 -c pass",
        trial_code_directory=code_dir, trial_concurrency=1, max_trial_number=1, tuner={"name": "Random"},
        experiment_working_directory=tmp_path / "home"))
    paths = ExperimentPaths(tmp_path / "home" / "abcd1234")
    paths.create()
    store = create_store(paths, ExperimentProfile(
        id="abcd1234", name=None, config=config.to_dict(), status=ExperimentState.INITIALIZED, error=None,
        start_time=time.time(), end_time=None, port=None, log_dir=str(paths.root),
        platform="local", minimizes=config.minimizes))
    sockets, access = server_sockets(0, "127.0.0.1", None, None)
    manager = Manager("abcd1234", config, paths, sockets, store, Registry(tmp_path / "home"),
                      logging.getLogger("nni.abcd1234"), access=access)
    for sock in sockets:
        sock.close()   # the server cannot take them: the start fails after the dispatcher started
    manager.start()
    assert manager.wait(timeout=60)
    assert manager.final_state is None, "it never ran"
    assert paths.dispatcher_log.exists(), "the dispatcher was started"
    wait_until(lambda: not dispatchers_of(paths), timeout=10, what="the dispatcher to end")
