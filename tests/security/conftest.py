"""A real experiment on 127.0.0.1 to attack, shared by a module's tests (it only ends when
the module is done), a raw HTTP client that sends any Host, Origin and body, and what
must not change when a request is refused."""
from __future__ import annotations

from typing import Iterator

import pytest

from expmgr import Experiment, ExperimentConfig
from tests.helpers.common import wait_until, write_script
from tests.helpers.server import STEPPED_TRIAL, Stepped, get, sockets  # noqa: F401 - the websocket client fixture

# The stepped trials of tests/server, living long enough for the slowest test here.
LONG_STEPPED_TRIAL = STEPPED_TRIAL.replace("time.monotonic() + 60", "time.monotonic() + 900")
assert LONG_STEPPED_TRIAL != STEPPED_TRIAL


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stepped]:
    """A running experiment with two trials that run until the module's tests are done."""
    tmp_path = tmp_path_factory.mktemp("served")
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    write_script(code_dir, "trial.py", LONG_STEPPED_TRIAL)
    gates = tmp_path / "gates"
    gates.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GATE_DIR", str(gates))
        patch.setenv("EXPMGR_HOME", str(tmp_path / "home"))
        config = ExperimentConfig(
            experiment_name="attacked", search_space={"x": {"_type": "choice", "_value": [1, 2, 3, 4]}},
            trial_command="python3 trial.py", trial_code_directory=code_dir, trial_concurrency=2,
            max_trial_number=4, tuner={"name": "GridSearch"}, trial_grace_period=2,
            experiment_working_directory=tmp_path / "home")
        experiment = Experiment(config)
        experiment.start(port=0)
        stepped = Stepped(experiment, gates)
        try:
            wait_until(lambda: len(stepped.running()) == 2, what="two running trials")
            yield stepped
        finally:
            stepped.release()
            experiment.stop()


