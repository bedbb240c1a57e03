"""The trial watchdog on its own: started as the training services start it (by path, on the
standard library alone), told of a trial by its stdin, and ending what the trial left
outside its group; which pids it reads when a trial ends. Real processes, real signals."""
from __future__ import annotations

import os
import subprocess
import sys

import psutil

from expmgr.training.watchdog import MARKER_ENV, StartedSince, command, pids_given_between, processes_started
from expmgr.training.watchdog import trial_marker
from tests.helpers.common import wait_until


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_watchdog_imports_the_standard_library_alone():
    argv = command("s0")
    imports = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], input="stop\n", capture_output=True,
                             text=True, timeout=30, check=True).stderr
    modules = {line.split("|")[-1].strip() for line in imports.splitlines() if line.startswith("import time:")}
    assert "signal" in modules
    assert not [name for name in modules if name.split(".")[0] in ("expmgr", "site", "typing")], sorted(modules)


def test_pids_are_taken_in_the_order_linux_gives_them_out():
    straight = pids_given_between(1000, 2000)
    assert straight(1000) and straight(1500) and straight(2000)
    assert not straight(999) and not straight(2001)
    round_the_end = pids_given_between(32000, 500)   # past pid_max, then from the bottom
    assert round_the_end(32000) and round_the_end(32767) and round_the_end(300) and round_the_end(500)
    assert not round_the_end(501) and not round_the_end(31999)


def test_a_process_started_after_the_trial_is_among_those_read():
    with subprocess.Popen(["sleep", "30"]) as trial:
        since = StartedSince(trial.pid, processes_started())
        with subprocess.Popen(["sleep", "30"]) as child:
            test = since.test()
            assert test is not None and test(trial.pid) and test(child.pid)
            child.kill()
        trial.kill()


def test_every_pid_is_read_when_the_pids_may_have_come_round():
    assert StartedSince(os.getpid(), processes_started() - 10**9).test() is None
    assert StartedSince(os.getpid(), None).test() is None


def test_what_a_trial_left_in_another_session_ends_with_the_trial(tmp_path):
    marker = trial_marker("s1", "Tr1aL", 1)
    watchdog = subprocess.Popen(command("s1"), stdin=subprocess.PIPE, text=True, start_new_session=True)
    escaped_pid = tmp_path / "escaped"
    # The trial starts a sleeper in a session of its own, then waits to be told to end.
    trial = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys\n"
         f"p = subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
         f"open({str(escaped_pid)!r} + '.tmp', 'w').write(str(p.pid))\n"
         f"__import__('os').rename({str(escaped_pid)!r} + '.tmp', {str(escaped_pid)!r})\n"
         "sys.stdin.read()\n"],
        stdin=subprocess.PIPE, env={**os.environ, MARKER_ENV: marker}, start_new_session=True)
    try:
        assert watchdog.stdin is not None and trial.stdin is not None
        watchdog.stdin.write(f"+{trial.pid} {marker}\n")
        watchdog.stdin.flush()
        wait_until(escaped_pid.exists, what="the trial's sleeper")
        escaped = int(escaped_pid.read_text())
        trial.stdin.close()
        trial.wait(timeout=30)
        assert _alive(escaped)  # the trial's end alone leaves it
        watchdog.stdin.write(f"-{trial.pid}\n")
        watchdog.stdin.flush()
        wait_until(lambda: not _alive(escaped), what="the sleeper killed by the watchdog")
    finally:
        trial.kill()
        trial.wait()
        if escaped_pid.exists():
            try:
                os.kill(int(escaped_pid.read_text()), 9)
            except ProcessLookupError:
                pass
        assert watchdog.stdin is not None
        watchdog.stdin.write("stop\n")
        watchdog.stdin.close()
        assert watchdog.wait(timeout=30) == 0
