"""A real experiment on 127.0.0.1 to attack, shared by a module's tests (it only ends when
the module is done), a raw HTTP client that sends any Host, Origin and body, and what
must not change when a request is refused."""
from __future__ import annotations

import http.client
import json
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator

import pytest
import tornado.web

from expmgr import Experiment, ExperimentConfig
from expmgr.server.guard import Guard
from expmgr.server.home import HomeSite
from expmgr.server.rest import make_app
from tests.conftest import wait_until, write_script
from tests.server.conftest import STEPPED_TRIAL, Stepped, get, sockets  # noqa: F401 - the websocket client fixture

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


@dataclass
class Answer:
    status: int
    body: Any
    """Decoded JSON, or the text when it is not JSON."""

    @property
    def error(self) -> str:
        return self.body.get("error", "") if isinstance(self.body, dict) else str(self.body)


def send(port: int, method: str, route: str, body: bytes | None = None, host: str | None = None,
         **headers: str | None) -> Answer:
    """``method route`` to 127.0.0.1:port with the Host ``host`` (default: 127.0.0.1:port) and
    Content-Type application/json unless given (None leaves a header out); header names with
    ``_`` for ``-``."""
    sent = {"Host": f"127.0.0.1:{port}" if host is None else host, "Content-Type": "application/json"}
    sent.update({name.replace("_", "-"): value for name, value in headers.items()})
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.putrequest(method, route, skip_host=True, skip_accept_encoding=True)
        for name, value in sent.items():
            if value is not None:
                connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        text = response.read().decode(errors="replace")
    finally:
        connection.close()
    try:
        return Answer(response.status, json.loads(text))
    except ValueError:
        return Answer(response.status, text)


def app_routes() -> list[tuple[str, type]]:
    """(path pattern, handler class) of every route make_app serves."""
    no_hub = SimpleNamespace(files=None)  # make_app takes the trial files from the hub
    app = make_app(None, None, None, no_hub, Guard(frozenset()),  # type: ignore[arg-type] - routes only
                   home_site=HomeSite(Path("/nonexistent-home")))
    return [(rule.matcher.regex.pattern.rstrip("$"), rule.target) for rule in app.wildcard_router.rules]


EXPERIMENT_ACTION = "/([^/]*)/?([^/]+)?"
"""The experiments page's route of an experiment and its action (home.py)."""
OTHER_EXPERIMENT = "exp00000"
"""The experiment an attack on that route names (none: a write that got past the guard answers 404)."""


def concrete(pattern: str, trial_id: str) -> str:
    """A request path for a route pattern: each group a trial id (or a number)."""
    path = pattern.replace("/(.*)", "/index.js").replace(EXPERIMENT_ACTION, "/" + OTHER_EXPERIMENT)
    numbers = iter(["0", "100"])
    return re.sub(r"\(\[\^/\]\+\)", lambda m: trial_id if "range" not in pattern else next(numbers), path)


def writes_of(handler: type) -> list[str]:
    return [method.upper() for method in ("post", "put", "delete", "patch")
            if getattr(handler, method) is not getattr(tornado.web.RequestHandler, method)]


def unchanged_state(served: Stepped) -> dict[str, Any]:
    """What a refused request must leave as it is."""
    profile = get(served.port, "/api/v1/nni/experiment")
    database = sqlite3.connect(served.experiment.paths.database)
    try:
        events = database.execute("SELECT kind, COUNT(*) FROM events GROUP BY kind").fetchall()
        metrics = database.execute("SELECT COUNT(*) FROM metrics").fetchone()[0]
    finally:
        database.close()
    return {"status": profile["status"], "params": profile["params"], "running": served.running(),
            "events": dict(events), "metrics": metrics}
