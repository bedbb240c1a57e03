"""A real S3-compatible server on this machine for the tests of checkpoint storage: moto's server
mode (``moto_server``, from ``moto[server]``) as a subprocess on a free 127.0.0.1 port, one per
test module, with a bucket; each test gets a prefix of its own and the AWS environment set::

    def test_something(s3_server):
        storage = CheckpointStorage(s3_server.uri, "exp")   # s3://bucket/<prefix>?endpoint_override=...
        subprocess.run(command, env={**os.environ, **s3_server.env})

The server is started in a session of its own, dies with the test process (parent-death
signal) and is stopped after the module (SIGTERM, SIGKILL after a grace). Tests skip, with the
reason, where moto is not installed or its server does not start.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest

from tests.helpers.common import fixture_process_roots, wait_until
from tests.helpers.ray_cluster import _die_with_parent

START_TIMEOUT = 60.0
"""Seconds moto's server has to print its address and answer (about 2 s on the 2-core machine)."""
STOP_GRACE = 10.0
BUCKET = "expmgr-tests"
REGION = "us-east-1"

S3_ENV = {
    # moto accepts any credentials; the AWS SDK needs some, and must not ask EC2's metadata service.
    "AWS_ACCESS_KEY_ID": "expmgr-test-key",
    "AWS_SECRET_ACCESS_KEY": "expmgr-test-secret",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "AWS_EC2_METADATA_DISABLED": "true",
}
"""The environment a process needs to use the server (the product reads AWS's usual variables)."""

_ADDRESS = re.compile(rb"Running on http://127\.0\.0\.1:(\d+)")


@dataclass
class S3Server:
    """A running moto server: ``endpoint`` is "127.0.0.1:port"; ``uri(prefix)`` a storage path in its bucket."""

    process: subprocess.Popen
    log: Path
    port: int = 0
    bucket: str = BUCKET
    env: dict[str, str] = field(default_factory=lambda: dict(S3_ENV))

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def uri_of(self, bucket: str, prefix: str) -> str:
        return f"s3://{bucket}/{prefix}?endpoint_override={self.endpoint}&scheme=http"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        fixture_process_roots.discard(self.process.pid)


@dataclass
class S3Prefix:
    """One test's place in the server's bucket: ``uri`` for CheckpointStorage, ``env`` for processes."""

    server: S3Server
    prefix: str

    @property
    def uri(self) -> str:
        return self.server.uri_of(self.server.bucket, self.prefix)

    @property
    def env(self) -> dict[str, str]:
        return self.server.env

    @property
    def endpoint(self) -> str:
        return self.server.endpoint

    @property
    def bucket(self) -> str:
        return self.server.bucket


def _moto_command() -> list[str]:
    beside = Path(sys.executable).with_name("moto_server")
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "moto.server"]


def start_s3_server(folder: Path) -> S3Server:
    """Start moto's server on a port the OS picks and create the bucket; pytest.skip with the
    reason when it cannot start."""
    try:
        import moto.server  # noqa: F401
    except ImportError as error:
        pytest.skip(f"moto's server is not installed (pip install 'moto[server]'): {error}")
    log = folder / "moto_server.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([*_moto_command(), "-H", "127.0.0.1", "-p", "0"], stdin=subprocess.DEVNULL,
                                   stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **S3_ENV},
                                   start_new_session=True, preexec_fn=_die_with_parent)
    server = S3Server(process, log)
    fixture_process_roots.add(process.pid)
    try:
        def address() -> int | None:
            if process.poll() is not None:
                raise RuntimeError(f"moto_server exited with {process.returncode}")
            found = _ADDRESS.search(log.read_bytes())
            return int(found.group(1)) if found else None
        server.port = int(str(wait_until(address, START_TIMEOUT, "moto_server to print its address")))
        wait_until(lambda: _answers(server), START_TIMEOUT, "moto_server to answer")
        request = urllib.request.Request(f"http://{server.endpoint}/{server.bucket}", method="PUT")
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
    except (AssertionError, RuntimeError, OSError) as error:
        server.stop()
        pytest.skip(f"moto's S3 server did not start: {error}; its output: "
                    f"{log.read_text(errors='replace')[-2000:]}")
    except BaseException:
        server.stop()
        raise
    return server


def _answers(server: S3Server) -> bool:
    try:
        with urllib.request.urlopen(f"http://{server.endpoint}/", timeout=5) as response:
            response.read()
        return True
    except urllib.error.HTTPError:
        return True   # an answer, even an error, means it serves
    except OSError:
        return False


@pytest.fixture(scope="module")
def s3_server_module() -> Iterator[S3Server]:
    """One moto server for a test module, stopped after it."""
    with tempfile.TemporaryDirectory(prefix="expmgr-s3-") as folder:
        server = start_s3_server(Path(folder))
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture
def s3_server(s3_server_module: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Prefix:
    """The module's server, a prefix of this test's own in its bucket, and the AWS environment
    set in this process (``env`` gives it to others)."""
    for name, value in s3_server_module.env.items():
        monkeypatch.setenv(name, value)
    return S3Prefix(s3_server_module, f"test-{uuid.uuid4().hex[:12]}")
