"""The local S3 server the checkpoint storage is tested on (tests/helpers/s3_server.py): a real
server that a process of its own reaches with the fixture's environment, nothing of it left
after it stops, and a skip naming the reason when it cannot start."""
from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import psutil
import pytest

from tests.helpers import s3_server as s3_server_helper
from tests.helpers.common import PYTHON, REPO
from tests.helpers.s3_server import start_s3_server


def test_another_process_stores_and_lists_objects_with_the_fixtures_uri_and_environment(s3_server):
    script = textwrap.dedent(f"""
        import pyarrow.fs as pafs
        fs, root = pafs.FileSystem.from_uri({s3_server.uri!r} + "&region=us-east-1")
        with fs.open_output_stream(root + "/a/b.txt") as stream:
            stream.write(b"stored")
        print([info.path for info in fs.get_file_info(pafs.FileSelector(root, recursive=True))
               if info.type == pafs.FileType.File])
        """)
    pytest.importorskip("pyarrow.fs")
    done = subprocess.run([PYTHON, "-c", script], env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO),
                                                       **s3_server.env},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str([f"{s3_server.bucket}/{s3_server.prefix}/a/b.txt"])


def test_the_server_is_gone_after_it_stops(tmp_path: Path):
    server = start_s3_server(tmp_path)
    pid = server.process.pid
    assert psutil.Process(pid).is_running()
    server.stop()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    server.stop()   # again: nothing to do


def test_a_server_that_cannot_start_skips_with_the_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    failing = ["/bin/sh", "-c", "echo no port for you; exit 3", "sh"]
    monkeypatch.setattr(s3_server_helper, "_moto_command", lambda: failing)
    with pytest.raises(pytest.skip.Exception, match=r"did not start: moto_server exited with 3.*no port for you"):
        start_s3_server(tmp_path)
