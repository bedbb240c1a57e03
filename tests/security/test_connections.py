"""Connections that send nothing, or their headers slowly, cannot take the descriptors an
experiment's trials need, nor flood its logs: the server keeps at most a cap of connections
open (every loopback address counting alike), closes idle and slow-header connections
after its header timeout, and logs refusals once in a while, not once each."""
from __future__ import annotations

import asyncio
import resource
import select
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import urllib.error
from pathlib import Path
from typing import Iterator

import psutil
import pytest
import tornado.httpserver
import tornado.netutil
import tornado.web

from expmgr.server import connections
from expmgr.server.connections import Listener, connection_cap
from expmgr.server.guard import Guard, GuardedApplication, ServerLimits, allowed_hosts, peer_of
from expmgr.store.registry import Registry
from tests.helpers.cli_create import start_create
from tests.helpers.common import rest_call, wait_until, write_script

HOLD = 1100
"""Idle connections, and as many slow-header ones, opened at the experiment: more than its
1024 descriptors."""
DAEMON_FILES = 1024
"""The experiment's soft and hard RLIMIT_NOFILE in the flood test (the usual default)."""
TRIALS = 12


def test_connection_cap_is_half_the_soft_limit_less_a_reserve():
    assert connection_cap(1024) == 1024 // 2 - connections.RESERVED_FILES == 448
    assert connection_cap(20_000) == connections.MAX_CONNECTIONS
    assert connection_cap(100) == connections.MIN_CONNECTIONS


@pytest.mark.parametrize("address", ["127.0.0.1", "127.0.0.2", "127.255.255.254", "::1", "::ffff:127.0.0.2"])
def test_every_loopback_address_is_one_peer(address: str):
    assert peer_of(address) == "loopback"


def test_other_addresses_are_their_own_peer():
    assert peer_of("192.168.1.5") == "192.168.1.5"
    assert peer_of("::ffff:192.168.1.5") == "192.168.1.5"
    assert peer_of("2001:db8::1") == "2001:db8::1"


class _Hello(tornado.web.RequestHandler):
    def get(self) -> None:
        self.write({"hello": True})


class _Server:
    """A guarded tornado server with ``limits`` and a connection ``cap`` on a thread of its own."""

    def __init__(self, limits: ServerLimits, cap: int) -> None:
        self.sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
        self.port = self.sockets[0].getsockname()[1]
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(limits, cap),), daemon=True)
        self._thread.start()
        self._ready.wait(30)

    async def _main(self, limits: ServerLimits, cap: int) -> None:
        guard = Guard(allowed_hosts([s.getsockname()[:2] for s in self.sockets]), limits)
        server = tornado.httpserver.HTTPServer(GuardedApplication([("/", _Hello)], guard), **guard.server_settings())
        self.listener = Listener(server, self.sockets, cap)
        self.listener.start()
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        self._ready.set()
        await self._stop.wait()
        self.listener.stop()
        await server.close_all_connections()

    def close(self) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)


@pytest.fixture
def small_server() -> Iterator[_Server]:
    server = _Server(ServerLimits(header_timeout=1), cap=40)
    yield server
    server.close()


def _closed_by_peer(sock: socket.socket) -> bool:
    """Whether the other side closed ``sock`` (a read sees its end or a reset)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    if not poller.poll(0):
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _connect(port: int, source: str = "127.0.0.1", send: bytes = b"", timeout: float = 30) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0))
    if send:
        sock.sendall(send)
    return sock


def _answered(port: int, source: str = "127.0.0.1") -> bool:
    """A request on a fresh connection gets an answer."""
    try:
        with _connect(port, source, f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()) as sock:
            return sock.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def test_slow_header_and_idle_connections_are_closed_after_the_header_timeout(small_server: _Server):
    port = small_server.port
    idle = _connect(port)
    slow = _connect(port, send=b"GET / HTTP/1.1\r\n")
    try:
        def drip() -> bool:  # a header byte now and then, as a slowloris client sends them
            try:
                slow.send(b"X")
            except OSError:
                return True
            return _closed_by_peer(slow)
        wait_until(drip, timeout=60, what="the slow-header connection closed")
        wait_until(lambda: _closed_by_peer(idle), timeout=60, what="the idle connection closed")
        wait_until(lambda: small_server.listener.open_connections == 0, what="both places freed")
        assert _answered(port)
    finally:
        idle.close()
        slow.close()


def test_connections_over_the_cap_are_closed_at_once_and_counted_across_loopback_addresses():
    server = _Server(ServerLimits(header_timeout=3600), cap=40)
    held: list[socket.socket] = []
    try:
        held += [_connect(server.port, "127.0.0.1") for _ in range(30)]
        wait_until(lambda: server.listener.open_connections == 30, what="30 connections open")
        more = [_connect(server.port, "127.0.0.2") for _ in range(30)]
        held += more
        # 10 fit under the cap, the 20 others are closed without a byte read: 127.0.0.2 is
        # the same client as 127.0.0.1.
        wait_until(lambda: sum(map(_closed_by_peer, more)) == 20, what="20 connections from 127.0.0.2 refused")
        assert server.listener.open_connections == 40
        assert not _answered(server.port, "127.0.0.3")
        for sock in held[:5]:
            sock.close()
        wait_until(lambda: _answered(server.port, "127.0.0.3"), what="an answer once places are free")
    finally:
        for sock in held:
            sock.close()
        server.close()


# The flood, at an experiment in its own process with 1024 descriptors.

GATED_TRIAL = """
    import os, time
    import expmgr
    x = expmgr.get_next_parameter()["x"]
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and not os.path.exists(os.environ["FLOOD_GATE"]):
        time.sleep(0.05)
    expmgr.report_final_result(x)
"""


def _own_files_limit(needed: int) -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"the hard RLIMIT_NOFILE ({hard}) is below the {needed} descriptors this test holds")
    if soft != resource.RLIM_INFINITY and soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.fixture
def many_files() -> Iterator[None]:
    yield from _own_files_limit(2 * HOLD + 1000)


def _low_files_limit() -> None:
    """In the experiment's process, before exec: 1024 descriptors, with nothing to raise to."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (DAEMON_FILES, DAEMON_FILES))


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _trial_states(database: Path) -> list[str]:
    with sqlite3.connect(database) as connection:
        return [row[0] for row in connection.execute("SELECT status FROM trials")]


def _server_connections(pid: int, port: int) -> int:
    """Connections to ``port`` the experiment's process holds (its own, not the test's ends)."""
    return sum(1 for c in psutil.Process(pid).net_connections("tcp")
               if c.laddr and c.laddr.port == port and c.status == psutil.CONN_ESTABLISHED)


def _check_status(port: int) -> str | None:
    """The experiment's status by ``GET check-status``; None when no answer came."""
    try:
        status, answer = rest_call(port, "GET", "check-status")
    except (urllib.error.URLError, OSError):
        return None
    return answer["status"] if status == 200 and isinstance(answer, dict) else None


def test_a_flood_of_idle_and_slow_connections_leaves_the_trials_their_descriptors(tmp_path: Path, many_files):
    project = tmp_path / "project"
    project.mkdir()
    write_script(project, "trial.py", GATED_TRIAL)
    (project / "space.json").write_text('{"x": {"_type": "choice", "_value": %s}}' % list(range(TRIALS)))
    (project / "config.yml").write_text(
        "searchSpaceFile: space.json\ntrialCommand: python3 trial.py\ntrialConcurrency: 4\n"
        f"maxTrialNumber: {TRIALS}\ntuner:\n  name: GridSearch\n")
    home, gate, daemon_log = tmp_path / "home", tmp_path / "gate", tmp_path / "daemon.log"
    output = open(daemon_log, "w")
    process = start_create(project, home, foreground_only=True, extra_env={"FLOOD_GATE": str(gate)}, stdout=output,
                           stderr=subprocess.STDOUT, preexec_fn=_low_files_limit)
    held: list[socket.socket] = []
    try:
        wait_until(lambda: (home / "registry.sqlite").exists() and Registry(home).entries()
                   and Registry(home).entries()[0].port, timeout=120, what="the experiment listed with its port")
        port = Registry(home).entries()[0].port
        assert port is not None
        database = next(home.glob("*/db/experiment.sqlite"))
        experiment_log = next(home.glob("*/logs/experiment.log"))
        wait_until(lambda: _trial_states(database).count("RUNNING") == 4, timeout=120, what="4 running trials")
        before = _lines(daemon_log), _lines(experiment_log)

        slow_header = f"GET /api/v1/nni/check-status HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
        cap = connection_cap(DAEMON_FILES)
        stalled: OSError | None = None
        try:
            for i in range(HOLD):
                source = "127.0.0.1" if i % 2 else "127.0.0.2"
                held.append(_connect(port, source, timeout=10))
                held.append(_connect(port, source, slow_header, timeout=10))
            wait_until(lambda: sum(map(_closed_by_peer, held)) >= len(held) - cap, timeout=120,
                       what=f"all but {cap} of {len(held)} connections refused")
        except OSError as error:  # the server no longer accepts: out of descriptors
            stalled = error
        kept, files = _server_connections(process.pid, port), psutil.Process(process.pid).num_fds()

        gate.touch()  # the first trials end; the next ones start while the flood is held
        wait_until(lambda: _trial_states(database).count("SUCCEEDED") + _trial_states(database).count("FAILED")
                   == TRIALS, timeout=300, what="every trial ended")
        states = _trial_states(database)
        assert states == ["SUCCEEDED"] * TRIALS, (states, experiment_log.read_text()[-3000:])
        # The held connections are still open on the test's side; the server answers once
        # places are free (at the latest when the header timeout closed the held ones).
        wait_until(lambda: _check_status(port) == "DONE", timeout=180, what="check-status answered DONE")
        process.send_signal(signal.SIGTERM)
        process.wait(120)
        assert process.returncode == 0, daemon_log.read_text()[-3000:]
        grown = _lines(daemon_log) - before[0], _lines(experiment_log) - before[1]
        text = daemon_log.read_text() + experiment_log.read_text()
        assert "Too many open files" not in text
        assert grown[0] + grown[1] < 20 * TRIALS, f"{grown} lines for {len(held)} connections"
        assert 1 <= text.count("refused") <= 10
        assert stalled is None, f"the server stopped accepting after {len(held)} connections: {stalled}"
        assert kept <= cap and files < DAEMON_FILES, (kept, files)
    finally:
        for sock in held:
            sock.close()
        if process.poll() is None:
            process.kill()
        process.communicate()
        output.close()


SMALL_SERVER = """
import asyncio, logging, resource, sys
import tornado.httpserver, tornado.netutil, tornado.web
from expmgr.server.connections import Listener
from expmgr.server.guard import Guard, GuardedApplication, ServerLimits, allowed_hosts

class Hello(tornado.web.RequestHandler):
    def get(self):
        self.write({"hello": True})

async def main():
    logging.basicConfig(stream=sys.stderr, level=logging.INFO)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
    guard = Guard(allowed_hosts([s.getsockname()[:2] for s in sockets]), ServerLimits(header_timeout=3600))
    server = tornado.httpserver.HTTPServer(GuardedApplication([("/", Hello)], guard), **guard.server_settings())
    Listener(server, sockets, 10_000).start()  # no cap: the descriptors run out first
    print(sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def test_running_out_of_descriptors_pauses_accepting_without_a_log_line_per_try(tmp_path: Path):
    """Accepting with no descriptor left (EMFILE) is logged once and retried a while later,
    not in a loop on the still-readable socket; the waiting connections are taken once
    descriptors are free again. The server is a process of its own with 64 descriptors."""
    log = tmp_path / "server.log"
    with open(log, "w") as stderr:
        server = subprocess.Popen([sys.executable, "-c", SMALL_SERVER], stdout=subprocess.PIPE, stderr=stderr,
                                  text=True)
    held: list[socket.socket] = []
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        held += [_connect(port) for _ in range(100)]  # more than 64: the last ones wait in the backlog
        wait_until(lambda: "Too many open files" in log.read_text(), what="the EMFILE logged")
        for sock in held[:60]:
            sock.close()
        wait_until(lambda: _answered(port), what="an answer once descriptors are free")
        assert server.poll() is None
        server.terminate()
        server.wait(30)
        text = log.read_text()
        assert text.count("Too many open files") == 1, f"{len(text)} characters of log, ending: {text[-1500:]}"
        assert text.count("could not accept") == 1
    finally:
        for sock in held:
            sock.close()
        if server.poll() is None:
            server.kill()
        server.communicate()
