"""``expctl create|view --host --url-prefix --token`` and the commands that reach a
running experiment with its token (``webui url``, ``update``, ``trial kill``): real
daemons, real HTTP."""
from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import urllib.error
import urllib.request

import psutil
import pytest

from expmgr.store.registry import Registry
from expmgr.states import ExperimentState
from tests.helpers.cli_daemon import created_id, entry, expctl, project  # noqa: F401 - the fixture
from tests.helpers.common import REPO, wait_until

TOKEN = "a-token-from-the-environment-0123"
SLOW_CONFIG = """\
searchSpace:
  x: {_type: choice, _value: [1, 2]}
trialCommand: python3 trial.py
trialConcurrency: 1
maxTrialNumber: 2
trialGracePeriod: 1s
tuner:
  name: GridSearch
"""


def status(url: str, token: str | None = None) -> int:
    request = urllib.request.Request(url, headers={"X-Expmgr-Token": token} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


@pytest.fixture
def slow_project(project):
    cwd, home = project
    (cwd / "config.yml").write_text(SLOW_CONFIG)
    (cwd / "trial.py").write_text("import os, time\nimport expmgr\nx = expmgr.get_next_parameter()['x']\n"
                                  "deadline = time.monotonic() + 60\n"
                                  "while time.monotonic() < deadline and not os.path.exists('release'):\n"
                                  "    time.sleep(0.02)\n"
                                  "expmgr.report_final_result(x)\n")
    yield cwd, home
    (cwd / "release").touch()


def test_a_wildcard_host_gets_a_generated_token_printed_stored_and_shown_by_webui_url(slow_project):
    cwd, home = slow_project
    result = expctl(home, cwd, "create", "--config", "config.yml", "--port", "0", "--host", "0.0.0.0")
    exp_id = created_id(result)
    port = entry(home, exp_id).port
    url = re.search(r"created: (\S+)", result.stdout).group(1)
    token = re.fullmatch(rf"http://127\.0\.0\.1:{port}/\?token=([A-Za-z0-9_-]+)", url).group(1)
    assert len(token) >= 40, "secrets.token_urlsafe(32)"
    access_file = home / exp_id / "access.json"
    assert stat.S_IMODE(access_file.stat().st_mode) == 0o600
    assert json.loads(access_file.read_text())["token"] == token
    shown = expctl(home, cwd, "webui", "url", exp_id)
    assert shown.returncode == 0 and shown.stdout.splitlines()[0] == url
    assert status(f"http://127.0.0.1:{port}/api/v1/nni/check-status") == 401
    assert status(f"http://127.0.0.1:{port}/api/v1/nni/check-status", token) == 200
    (cwd / "release").touch()
    wait_until(lambda: entry(home, exp_id).status == ExperimentState.DONE, timeout=60,
               what="DONE: the trials reported through the wildcard address")
    trials = json.loads(expctl(home, cwd, "trial", "ls", exp_id, "--json").stdout)
    assert sorted(row["final"] for row in trials) == [1, 2]
    for log in (home / exp_id / "logs").iterdir():
        assert token not in log.read_text(errors="replace"), f"the token is in {log.name}"


def test_the_token_from_the_environment_guards_the_daemon_and_expctl_sends_it(slow_project, monkeypatch):
    cwd, home = slow_project
    monkeypatch.setenv("EXPMGR_TOKEN", TOKEN)
    result = expctl(home, cwd, "create", "--config", "config.yml", "--port", "0", "--url-prefix", "/lab")
    monkeypatch.delenv("EXPMGR_TOKEN")  # from here on expctl finds it in the access file
    exp_id = created_id(result)
    current = entry(home, exp_id)
    base = f"http://127.0.0.1:{current.port}/lab/"
    assert f"created: {base}?token={TOKEN}" in result.stdout
    assert TOKEN not in " ".join(psutil.Process(current.pid).cmdline()), "not on the daemon's command line"
    assert status(base + "api/v1/nni/experiment") == 401
    assert status(base + "api/v1/nni/experiment", TOKEN) == 200
    assert expctl(home, cwd, "webui", "url", exp_id).stdout.strip() == f"{base}?token={TOKEN}"
    updated = expctl(home, cwd, "update", exp_id, "concurrency", "2")
    assert updated.returncode == 0, updated.stderr
    trials = wait_until(lambda: [t for t in json.loads(expctl(home, cwd, "trial", "ls", exp_id, "--json").stdout)
                                 if t["status"] == "RUNNING"], what="a running trial")
    inherited = {}
    for child in psutil.Process(current.pid).children(recursive=True):  # the watchdog, the trials
        try:
            inherited[" ".join(child.cmdline())[:80]] = "EXPMGR_TOKEN" in child.environ()
        except psutil.NoSuchProcess:
            pass
    assert inherited and not any(inherited.values()), f"what the daemon started has its token: {inherited}"
    killed = expctl(home, cwd, "trial", "kill", exp_id, trials[0]["trial"])
    assert killed.returncode == 0, killed.stderr
    wait_until(lambda: any(t["status"] == "USER_CANCELED" for t in
                           json.loads(expctl(home, cwd, "trial", "ls", exp_id, "--json").stdout)),
               what="the trial killed through REST with the token")
    (cwd / "release").touch()
    wait_until(lambda: entry(home, exp_id).status.is_finished(), timeout=60, what="the end")


@pytest.mark.parametrize("flags, named", [
    (["--host", "0.0.0.0", "--token", ""], "--token: listening on 0.0.0.0 (not loopback) requires an access token"),
    (["--token", "short"], "--token: expected at least 16 characters"),
    (["--url-prefix", "a b"], "--url-prefix: expected a path of URL-safe segments"),
    (["--host", "no-such-host.invalid"], "--host: cannot listen on 'no-such-host.invalid'"),
    (["--host", "192.0.2.77"], "--host: cannot listen on 192.0.2.77"),
])
def test_bad_access_flags_are_refused_with_exit_2_and_nothing_created(project, flags, named):
    cwd, home = project
    for command in (["create", "--config", "config.yml"], ["create", "--config", "config.yml", "--foreground"]):
        result = expctl(home, cwd, *command, "--port", "0", *flags)
        assert result.returncode == 2, result.stderr
        assert named in result.stderr
        assert "Traceback" not in result.stderr
        assert not home.exists() or not [p for p in home.iterdir() if p.is_dir()], "nothing on disk"
    assert not Registry(home).entries()


def read_line(process: subprocess.Popen, pattern: str) -> re.Match:
    """The first match of ``pattern`` in the process's output lines (read until it ends)."""
    for line in process.stdout:
        found = re.search(pattern, line)
        if found:
            return found
    raise AssertionError(f"no line matching {pattern!r}; exit status {process.wait()}")


def test_resume_and_view_take_their_own_host_and_prefix_and_keep_the_token(slow_project):
    cwd, home = slow_project
    exp_id = created_id(expctl(home, cwd, "create", "--config", "config.yml", "--port", "0", "--token", TOKEN))
    assert expctl(home, cwd, "stop", exp_id).returncode == 0
    resumed = expctl(home, cwd, "resume", exp_id, "--port", "0", "--host", "0.0.0.0", "--url-prefix", "again")
    assert resumed.returncode == 0, resumed.stderr
    port = entry(home, exp_id).port
    token = re.search(rf"resumed: http://127\.0\.0\.1:{port}/again/\?token=(\S+)", resumed.stdout).group(1)
    assert token == TOKEN, "the last run's token, kept (not a new one for the wildcard address)"
    assert expctl(home, cwd, "webui", "url", exp_id).stdout.splitlines()[0].endswith(f"/again/?token={TOKEN}")
    assert status(f"http://127.0.0.1:{port}/again/api/v1/nni/experiment") == 401
    assert status(f"http://127.0.0.1:{port}/again/api/v1/nni/experiment", TOKEN) == 200
    (cwd / "release").touch()
    wait_until(lambda: entry(home, exp_id).status == ExperimentState.DONE, timeout=60, what="DONE")

    env = {**{k: v for k, v in os.environ.items() if k != "EXPMGR_TOKEN"}, "EXPMGR_HOME": str(home),
           "PYTHONPATH": str(REPO)}  # no token given: the view keeps the experiment's
    view = subprocess.Popen([sys.executable, "-m", "expmgr.cli", "view", exp_id, "--port", "0", "--url-prefix", "/v"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        base = read_line(view, rf"read-only\): (http://127\.0\.0\.1:\d+/v/)\?token={TOKEN}").group(1)
        assert status(base + "api/v1/nni/check-status") == 401
        assert status(base + "api/v1/nni/check-status", TOKEN) == 200
    finally:
        view.terminate()
        view.wait(timeout=30)
