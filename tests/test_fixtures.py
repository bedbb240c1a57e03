"""The shared fixtures fail the way they should: the leftover-process check names what a
test left behind (pid and command line) and kills it; the ``stepped`` experiment is
stopped when its own setup fails. Each runs a small test suite in a pytest of its own."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil

from tests.helpers.common import REPO


def run_pytest(folder: Path, conftest: str, test: str) -> subprocess.CompletedProcess:
    (folder / "conftest.py").write_text(textwrap.dedent(conftest))
    (folder / "test_inner.py").write_text(textwrap.dedent(test))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(folder),
                           str(folder / "test_inner.py")], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=180, check=False)


def test_a_process_left_behind_is_named_with_its_command_line_and_killed(tmp_path: Path):
    pid_file = tmp_path / "leftover.pid"
    result = run_pytest(tmp_path, """
        import tests.conftest
        from tests.conftest import no_child_process_left_behind  # noqa: F401 - the check under test
        tests.conftest.LEFTOVER_GRACE = 0.5
    """, f"""
        import subprocess
        from pathlib import Path

        def test_leaves_a_sleeper():
            sleeper = subprocess.Popen(["sleep", "300"])
            Path({str(pid_file)!r}).write_text(str(sleeper.pid))
    """)
    output = result.stdout + result.stderr
    pid = int(pid_file.read_text())
    assert result.returncode == 1, output
    # The check's own assertion, not a psutil error raised while it reads a killed process.
    assert re.search(rf"^E +AssertionError: processes left behind: pid {pid}: sleep 300$", output, re.MULTILINE), output
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_stepped_stops_its_experiment_when_its_setup_fails(tmp_path: Path):
    result = run_pytest(tmp_path, """
        import pytest
        import tests.server.conftest as manager_conftest
        from tests.conftest import code_dir, no_child_process_left_behind  # noqa: F401 - fixtures
        from tests.helpers.common import wait_until
        from tests.server.conftest import stepped  # noqa: F401 - the fixture under test

        @pytest.fixture
        def failing_setup(monkeypatch):
            # The setup fails late: after the experiment started and its trials run.
            def wait_then_fail(condition, timeout=30.0, what="condition"):
                wait_until(condition, timeout, what)
                raise AssertionError("the setup fails here on purpose")
            monkeypatch.setattr(manager_conftest, "wait_until", wait_then_fail)
    """, """
        def test_never_runs(failing_setup, stepped):
            raise AssertionError("not reached")
    """)
    output = result.stdout + result.stderr
    assert "the setup fails here on purpose" in output and "1 error" in output, output
    assert "not reached" not in output
    assert "processes left behind" not in output, output
