"""Starting and watching trial processes (``training/_process.py``): what the services that
run trials as processes share. Real processes."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import psutil

from expmgr.training._process import process_start_time


def test_a_process_start_time_is_psutils_even_for_a_name_with_spaces_and_parentheses(tmp_path: Path):
    # The name in /proc/<pid>/stat is in parentheses; one holding ") (" must not shift the fields.
    odd = tmp_path / "a) (b c"
    sleep = shutil.which("sleep")
    assert sleep is not None
    os.symlink(sleep, odd)
    with subprocess.Popen([str(odd), "30"]) as process:
        try:
            assert psutil.Process(process.pid).name() == "a) (b c"
            assert process_start_time(process.pid) == psutil.Process(process.pid).create_time()
            assert process_start_time(os.getpid()) == psutil.Process().create_time()
        finally:
            process.kill()
    assert process_start_time(process.pid) is None  # gone (reaped)
    assert process_start_time(None) is None
