"""``python``/``python3`` shims that run a given interpreter (``expmgr/training/_interpreter.py``),
as the Ray service puts them first on a trial's PATH (``trialPython: ray``)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from expmgr.training._interpreter import interpreter_folder, with_interpreter_first

PROBE = "import sys; print(sys.executable); print(sys.prefix)"


@pytest.mark.parametrize("name", ["python", "python3"])
def test_the_shims_run_the_interpreter_in_its_own_virtual_environment(tmp_path, monkeypatch, name):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    env = {"PATH": with_interpreter_first(sys.executable, "/usr/bin:/bin")}
    executable, prefix = subprocess.run([name, "-c", PROBE], env=env, capture_output=True, text=True,
                                        check=True).stdout.split()
    # A symlink elsewhere would run the base interpreter outside the virtual environment.
    assert (executable, prefix) == (sys.executable, sys.prefix)


def test_a_folder_is_written_once_per_interpreter_and_a_path_with_spaces_is_quoted(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    spaced = tmp_path / "my env" / "python3"
    spaced.parent.mkdir()
    spaced.symlink_to(sys.executable)
    folder = interpreter_folder(str(spaced))
    assert interpreter_folder(str(spaced)) == folder != interpreter_folder(sys.executable)
    assert sorted(os.listdir(folder)) == ["python", "python3"], "no partial file left beside them"
    done = subprocess.run([str(folder / "python3"), "-c", "import sys; print(sys.executable)"],
                          capture_output=True, text=True, check=True)
    assert Path(done.stdout.strip()) == spaced
