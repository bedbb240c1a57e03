"""What ``expctl``'s listings show, with real daemons: ``trial ls --json``'s shape, output
into a pipe whose reader went away, ``stop`` with nothing to stop (issue 12, item 7)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from expmgr.states import ExperimentState
from tests.cli.test_daemon import CONFIG, created_id, entry, expctl, project  # noqa: F401 (a fixture)
from tests.conftest import REPO, wait_until


def expctl_into_closed_pipe(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``expctl ARGS | head -0`` without the race: the pipe's reader is closed before
    expctl starts, so its first write fails (EPIPE) whatever the size of its output."""
    reader, writer = os.pipe()
    os.close(reader)
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    try:
        return subprocess.run([sys.executable, "-m", "expmgr.cli", *args], cwd=cwd, env=env, stdout=writer,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(writer)


def run_to_the_end(project_dir: Path, home: Path, trial: str) -> str:
    (project_dir / "trial.py").write_text(trial)
    exp_id = created_id(expctl(home, project_dir, "create", "--config", "config.yml", "--port", "0"))
    wait_until(lambda: entry(home, exp_id).status.is_finished(), timeout=60, what="the end")
    wait_until(lambda: expctl(home, project_dir, "experiment", "list").stdout.strip() == "(none)",
               what="the daemon to exit")
    return exp_id


def test_trial_ls_json_gives_numbers_and_objects_not_strings(project):
    cwd, home = project
    exp_id = run_to_the_end(cwd, home, "import expmgr\nx = expmgr.get_next_parameter()['x']\n"
                                       "expmgr.report_final_result({'default': x / 2, 'loss': float('nan')})\n")
    assert entry(home, exp_id).status == ExperimentState.DONE
    rows = expctl(home, cwd, "trial", "ls", exp_id, "--json")
    trials = json.loads(rows.stdout)
    by_x = {row["parameters"]["x"]: row for row in trials}
    assert sorted(by_x) == [1, 2, 3, 4] and by_x[1]["parameters"] == {"x": 1}
    assert by_x[1]["final"] == {"default": 0.5, "loss": "NaN"} and by_x[4]["final"]["default"] == 2.0
    for row in trials:
        assert isinstance(row["seq"], int) and isinstance(row["attempts"], int)
        assert isinstance(row["seconds"], float) and row["seconds"] >= 0
    table = expctl(home, cwd, "trial", "ls", exp_id).stdout
    assert '{"x": 1}' in table and '"loss": NaN' in table, "the table still shows JSON text"


@pytest.mark.parametrize("command", [("trial", "ls", "{id}"), ("trial", "ls", "{id}", "--json"),
                                     ("experiment", "list", "--all"), ("experiment", "show", "{id}"),
                                     ("top", "--once", "{id}"), ("log", "experiment", "{id}")])
def test_output_into_a_pipe_whose_reader_is_gone_ends_quietly_with_141(project, command):
    cwd, home = project
    exp_id = run_to_the_end(cwd, home, "import expmgr\nexpmgr.report_final_result(1)\n")
    result = expctl_into_closed_pipe(home, cwd, *(part.format(id=exp_id) for part in command))
    assert (result.returncode, result.stderr) == (141, ""), "no BrokenPipeError traceback"


def test_stop_with_nothing_running_says_so_and_exits_0(project):
    cwd, home = project
    result = expctl(home, cwd, "stop")
    assert (result.returncode, result.stdout.strip()) == (0, "no experiment is running")
    assert expctl(home, cwd, "stop", "--all").returncode == 0
    unknown = expctl(home, cwd, "stop", "nosuchid")
    assert unknown.returncode == 2 and "no experiment 'nosuchid'" in unknown.stderr, "a named one must exist"
