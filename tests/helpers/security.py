"""Requests as an attacker sends them: raw HTTP and websockets with or without the token, an
experiment gated by a token, the server's routes and what each writes, and the state that must
stay unchanged after a refused request."""
from __future__ import annotations

import asyncio
import http.client
import json
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import tornado.httpclient
import tornado.web
import tornado.websocket

from expmgr import Experiment, ExperimentConfig
from expmgr.server.guard import Guard
from expmgr.server.home import HomeSite
from expmgr.server.rest import make_app
from tests.helpers.common import write_script
from tests.helpers.server import Stepped, get


TOKEN = "s3cret-token-for-tests_0123456789"


GATED_TRIAL = """
    import os, time
    import expmgr
    x = expmgr.get_next_parameter()["x"]
    expmgr.report_intermediate_result(x * 10)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not os.path.exists(os.environ["GATE"]):
        time.sleep(0.02)
    expmgr.report_final_result(x)
"""


def request(port: int, method: str, path: str, headers: dict[str, str] | None = None,
            body: object = None) -> tuple[int, dict[str, str], bytes]:
    """One request, redirects not followed: (status, headers, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def websocket_status(port: int, path: str, headers: dict[str, str] | None = None) -> int | str:
    """101-then-first-message as "open", or the HTTP status the upgrade was refused with."""
    async def attempt() -> int | str:
        url = f"ws://127.0.0.1:{port}{path}"
        try:
            conn = await tornado.websocket.websocket_connect(tornado.httpclient.HTTPRequest(url, headers=headers))
        except tornado.httpclient.HTTPClientError as error:
            return error.code
        try:
            message = json.loads(await asyncio.wait_for(conn.read_message(), 30))
            return "open" if message.get("type") in ("hello", "changes") else f"unexpected {message}"
        finally:
            conn.close()
    return asyncio.run(attempt())


def gated_experiment(tmp_path: Path, code_dir: Path, monkeypatch: pytest.MonkeyPatch, **start) -> Experiment:
    write_script(code_dir, "trial.py", GATED_TRIAL)
    monkeypatch.setenv("GATE", str(tmp_path / "release"))
    config = ExperimentConfig(
        search_space={"x": {"_type": "choice", "_value": [1, 2]}}, trial_command="python3 trial.py",
        trial_code_directory=code_dir, trial_concurrency=2, max_trial_number=2, tuner={"name": "GridSearch"},
        trial_grace_period=2, experiment_working_directory=tmp_path / "home")
    experiment = Experiment(config)
    experiment.start(port=0, **start)
    return experiment


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
