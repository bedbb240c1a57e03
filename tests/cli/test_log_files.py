"""``expctl log`` on large and rotated logs (issue 20): ``--tail`` and ``--head`` read only what
they show (an 8 GiB file under a 256 MiB address-space limit), a whole log is streamed, the
rotated files are read in order, ``--follow`` goes on across rotations with every line
printed once, what rotation deleted is said once on stderr, and a symlink or FIFO a trial
puts in a rotated file's place is passed over. Real ``expctl`` processes on real files."""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from expmgr.cli.logs import _size
from expmgr.rotation import RotatingWriter, RotationLimits, dropped_bytes, rotated_files
from expmgr.states import ExperimentState
from expmgr.store.registry import Registry
from tests.helpers.common import REPO, wait_until
from tests.helpers.fill import fill_experiment

MEMORY_LIMIT = 256 * 2**20
"""The address space an expctl reading a huge file is given: the whole file cannot fit."""


def expctl(home: Path, *args: str, memory: int | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    def limit() -> None:
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "expmgr.cli", *args], env=env, capture_output=True,
                          preexec_fn=limit, timeout=timeout)


@pytest.fixture
def finished(tmp_path: Path) -> tuple[Path, str]:
    """A finished experiment with one trial, f0000, whose folder exists: (home, id)."""
    home = tmp_path / "home"
    exp_id = fill_experiment(home, trials=1, metrics_per_trial=1)
    (home / exp_id / "trials" / "f0000").mkdir(parents=True)
    return home, exp_id


@pytest.fixture
def running(finished):
    """The finished experiment made to look running: its registry row RUNNING with the pid of
    a stand-in process, which the test ends (``stop()``) to end a follow. (home, id, stop)."""
    home, exp_id = finished
    stand_in = subprocess.Popen(["sleep", "600"])
    registry = Registry(home)
    entry = registry.get(exp_id)
    entry.status, entry.pid, entry.start_time, entry.end_time = ExperimentState.RUNNING, stand_in.pid, time.time(), None
    registry.add(entry)

    def stop() -> None:
        stand_in.kill()
        stand_in.wait()
    yield home, exp_id, stop
    stop()


def numbered(first: int, count: int) -> list[bytes]:
    return [f"line {index:06d} {'.' * (index % 23)}\n".encode() for index in range(first, first + count)]


def write_rotated(path: Path, lines: list[bytes], limit: int, keep: int) -> bytes:
    """``lines`` written through a RotatingWriter; what the kept files hold, oldest first."""
    writer = RotatingWriter(path, RotationLimits(limit, keep=keep))
    for line in lines:
        writer.write(line)
    writer.close()
    return b"".join(p.read_bytes() for p in reversed(rotated_files(path))) + path.read_bytes()


def test_tail_and_head_of_an_8_gib_file_read_only_what_they_show(finished):
    home, exp_id = finished
    stdout = home / exp_id / "trials" / "f0000" / "stdout"
    with stdout.open("wb") as file:
        file.write(b"first 0\nfirst 1\nfirst 2\n")
        file.truncate(8 * 2**30)  # sparse: 8 GiB that take no disk and cannot be read into 256 MiB
        file.seek(0, os.SEEK_END)
        file.write(b"".join(f"last {index}\n".encode() for index in range(5)))
    tail = expctl(home, "log", "stdout", exp_id, "f0000", "--tail", "3", memory=MEMORY_LIMIT)
    assert (tail.returncode, tail.stdout, tail.stderr) == (0, b"last 2\nlast 3\nlast 4\n", b"")
    head = expctl(home, "log", "stdout", exp_id, "f0000", "--head", "2", memory=MEMORY_LIMIT)
    assert (head.returncode, head.stdout, head.stderr) == (0, b"first 0\nfirst 1\n", b"")


def test_a_whole_log_is_streamed_in_blocks_not_read_into_memory(finished):
    home, exp_id = finished
    stdout = home / exp_id / "trials" / "f0000" / "stdout"
    with stdout.open("wb") as file:
        file.truncate(2 * MEMORY_LIMIT)
        file.seek(0, os.SEEK_END)
        file.write(b"the end\n")
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    process = subprocess.Popen([sys.executable, "-m", "expmgr.cli", "log", "stdout", exp_id, "f0000"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT,) * 2))
    count, last = 0, b""
    while block := process.stdout.read(2**20):
        count, last = count + len(block), (last + block)[-8:]
    assert process.wait(timeout=120) == 0, process.stderr.read()
    process.stderr.close()
    process.stdout.close()
    assert (count, last) == (stdout.stat().st_size, b"the end\n")


def test_tail_goes_on_into_the_rotated_files_and_a_whole_log_prints_them_oldest_first(finished):
    home, exp_id = finished
    stdout = home / exp_id / "trials" / "f0000" / "stdout"
    lines = numbered(0, 200)
    kept = write_rotated(stdout, lines, limit=600, keep=4)
    kept_lines = kept.count(b"\n")
    current_lines = stdout.read_bytes().count(b"\n")
    assert len(rotated_files(stdout)) == 3 and dropped_bytes(stdout) > 0
    for count in (1, current_lines, current_lines + 1, current_lines + 30, kept_lines):
        tail = expctl(home, "log", "stdout", exp_id, "f0000", "--tail", str(count))
        assert (tail.stdout, tail.stderr) == (b"".join(lines[-count:]), b""), count
    notice = (f"expctl: {_size(dropped_bytes(stdout))} of earlier output of stdout was rotated away (the config's "
              "logMaxSize and logFilesKept bound each log): printing what is kept\n").encode()
    whole = expctl(home, "log", "stdout", exp_id, "f0000")
    assert (whole.stdout, whole.stderr) == (kept, notice), "the kept files oldest first, then stdout"
    more = expctl(home, "log", "stdout", exp_id, "f0000", "--tail", "1000")
    assert more.stdout == kept and more.stderr == (
        f"expctl: stdout keeps {kept_lines} of the 1000 lines asked for: {_size(dropped_bytes(stdout))} of earlier "
        "output was rotated away (the config's logMaxSize and logFilesKept bound each log)\n").encode()
    head = expctl(home, "log", "stdout", exp_id, "f0000", "--head", "2")
    assert head.stdout == b"".join(kept.splitlines(keepends=True)[:2]) and b"of the start of stdout" in head.stderr


def test_nnictls_log_stdout_reads_the_daemon_log_across_its_rotation(finished):
    home, exp_id = finished
    daemon_log = home / exp_id / "logs" / "daemon.log"
    lines = numbered(0, 30)
    kept = write_rotated(daemon_log, lines, limit=300, keep=20)
    assert len(rotated_files(daemon_log)) >= 2 and dropped_bytes(daemon_log) == 0
    last = expctl(home, "log", "stdout", exp_id, "-T", "15")
    assert (last.stdout, last.stderr) == (b"".join(lines[-15:]), b"")
    assert expctl(home, "log", "stdout", exp_id).stdout == kept == b"".join(lines)


class Follower:
    """``expctl log experiment ID -f`` running, its output collected as it comes."""

    def __init__(self, home: Path, exp_id: str) -> None:
        env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
        self.process = subprocess.Popen([sys.executable, "-m", "expmgr.cli", "log", "experiment", exp_id, "-f"],
                                        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.output = bytearray()
        self.errors = b""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while block := self.process.stdout.read1(2**16):
            self.output += block

    def printed(self, line: bytes) -> bool:
        return line in self.output

    def finish(self) -> None:
        self.process.wait(timeout=60)
        self._reader.join(timeout=60)
        self.errors = self.process.stderr.read()
        self.process.stdout.close()
        self.process.stderr.close()


@pytest.mark.parametrize("keep, per_batch", [(1, 10), (4, 10), (4, 30)],
                         ids=["keep-1-the-file-deleted", "one-rotation-a-batch", "two-rotations-a-batch"])
def test_follow_prints_every_line_once_across_rotations(running, keep, per_batch):
    home, exp_id, stop = running
    log = home / exp_id / "logs" / "experiment.log"
    writer = RotatingWriter(log, RotationLimits(400, keep=keep))
    written = numbered(0, 5)
    for line in written:
        writer.write(line)
    follower = Follower(home, exp_id)
    try:
        wait_until(lambda: follower.printed(written[-1]), what="the log so far")
        for batch in range(8):  # each batch rotates the log while the follow reads it
            more = numbered(len(written), per_batch)
            for line in more:
                writer.write(line)
            written += more
            wait_until(lambda: follower.printed(more[-1]), what=f"batch {batch}")
    finally:
        writer.close()
        stop()
        follower.finish()
    assert bytes(follower.output) == b"".join(written), "every line once, in order"
    assert follower.errors == b""
    assert keep == 1 or len(rotated_files(log)) == keep - 1


def test_follow_outrun_by_rotation_says_how_much_was_rotated_away_and_goes_on(running):
    home, exp_id, stop = running
    log = home / exp_id / "logs" / "experiment.log"
    writer = RotatingWriter(log, RotationLimits(400, keep=3))
    written = numbered(0, 5)
    for line in written:
        writer.write(line)
    follower = Follower(home, exp_id)
    try:
        wait_until(lambda: follower.printed(written[-1]), what="the log so far")
        follower.process.send_signal(signal.SIGSTOP)  # it reads nothing while ten files are written
        more = numbered(len(written), 150)
        for line in more:
            writer.write(line)
        written += more
        follower.process.send_signal(signal.SIGCONT)
        wait_until(lambda: follower.printed(written[-1]), what="the last line")
    finally:
        writer.close()
        stop()
        follower.finish()
    printed = bytes(follower.output)
    numbers = [int(line.split()[1]) for line in printed.splitlines()]
    assert numbers == sorted(set(numbers)) and numbers[-1] == len(written) - 1, "in order, none twice"
    lost = sum(len(line) for index, line in enumerate(written) if index not in set(numbers))
    assert lost > 0 and printed.endswith(b"".join(p.read_bytes() for p in reversed(rotated_files(log)))
                                         + log.read_bytes()), "what is kept, printed whole"
    assert follower.errors.decode() == (f"expctl: {_size(lost)} of experiment.log was rotated away before it could "
                                        "be printed (the config's logMaxSize and logFilesKept bound each log)\n")


def test_a_rotated_symlink_or_fifo_is_passed_over_and_a_symlinked_log_is_refused(finished, tmp_path):
    home, exp_id = finished
    secret = tmp_path / "secret"
    secret.write_text("private key\n")
    folder = home / exp_id / "trials" / "f0000"
    (folder / "stdout.3").write_text("three\n")
    os.mkfifo(folder / "stdout.2")  # opening it to read would block until a writer comes
    (folder / "stdout.1").symlink_to(secret)
    (folder / "stdout").write_text("now\n")
    os.mkfifo(folder / "stdout.dropped")
    whole = expctl(home, "log", "stdout", exp_id, "f0000", timeout=60)
    assert (whole.returncode, whole.stdout) == (0, b"three\nnow\n")
    assert whole.stderr == (b"expctl: trials/f0000/stdout.2: refused, not a regular file; passed over\n"
                            b"expctl: trials/f0000/stdout.1: refused, it is a symlink; passed over\n")
    (folder / "stderr").symlink_to(secret)
    refused = expctl(home, "log", "stderr", exp_id, "f0000", "--tail", "1", timeout=60)
    assert refused.returncode == 1 and b"private" not in refused.stdout
    assert b"trials/f0000/stderr: refused, it is a symlink" in refused.stderr
