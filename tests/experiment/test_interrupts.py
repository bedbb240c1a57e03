"""The main thread's wait for an experiment's end (``interrupts.wait_interruptibly``): it
sleeps without polling, yet a signal's handler runs there and raises even when Linux
delivers the signal to another thread. And the section a signal cannot split
(``signals_deferred``). Each case runs in a process of its own, with real signals sent to
one chosen thread (``pthread_kill``) or to the process."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.helpers.common import ENV_WITH_REPO

PRELUDE = """\
import os, signal, sys, threading, time
from expmgr.experiment.interrupts import (PreemptSignal, StopSignal, WakingEvent, raise_preempt_signal,
                                          raise_stop_signal, signals_deferred, wait_interruptibly)

MAIN = threading.get_native_id()

def main_thread_asleep_outside_a_lock():
    # Asleep in poll() rather than on a futex (a lock, the GIL, Event.wait), where a signal
    # handled by another thread would leave it asleep. (Where the kernel hides wchan, the
    # sender's deadline decides.)
    try:
        with open(f"/proc/self/task/{MAIN}/stat") as stat:
            state = stat.read().rpartition(")")[2].split()[0]
        with open(f"/proc/self/task/{MAIN}/wchan") as wchan:
            where = wchan.read()
    except OSError:
        return False
    return state == "S" and where not in ("", "0") and "futex" not in where

def signal_another_thread_once_main_sleeps(signum):
    # The signal's C handler runs in this thread, as Linux may choose for one sent to the process.
    def send():
        deadline = time.monotonic() + 20  # past it, send anyway: a wait that misses it never returns
        while not main_thread_asleep_outside_a_lock() and time.monotonic() < deadline:
            time.sleep(0.01)
        signal.pthread_kill(threading.get_ident(), signum)
    threading.Thread(target=send, daemon=True).start()

ended = WakingEvent()
never_woken = threading.Timer(60, ended.set)  # so that a broken wait ends the script
never_woken.daemon = True
never_woken.start()
"""


def run(body: str) -> str:
    result = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)], env=ENV_WITH_REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_sigterm_handled_by_another_thread_is_raised_in_the_waiting_main_thread():
    assert run("""
        signal.signal(signal.SIGTERM, raise_stop_signal)
        signal_another_thread_once_main_sleeps(signal.SIGTERM)
        try:
            wait_interruptibly(ended)
            print("returned when the event was set, 60 s later")
        except StopSignal:
            print("StopSignal", "only-once-the-event-was-set" if ended.is_set() else "while-waiting")
    """) == "StopSignal while-waiting"


def test_the_event_set_by_another_thread_ends_the_wait_and_a_timeout_returns_false():
    assert run("""
        print(wait_interruptibly(WakingEvent(), timeout=0.05))
        threading.Thread(target=ended.set).start()
        print(wait_interruptibly(ended))
    """).split() == ["False", "True"]


def test_the_previous_wakeup_fd_is_restored_and_given_the_signals_that_came_meanwhile():
    # An asyncio loop of the main thread has its wakeup fd, and learns of its signals from it.
    assert run("""
        read_end, write_end = os.pipe2(os.O_NONBLOCK)
        signal.set_wakeup_fd(write_end)
        signal.signal(signal.SIGUSR1, raise_preempt_signal)
        signal_another_thread_once_main_sleeps(signal.SIGUSR1)
        try:
            wait_interruptibly(ended)
        except PreemptSignal:
            print("PreemptSignal", not ended.is_set())
        print(signal.set_wakeup_fd(-1) == write_end, list(os.read(read_end, 16)) == [signal.SIGUSR1])
    """).split() == ["PreemptSignal", "True", "True", "True"]


def test_in_another_thread_it_is_a_plain_wait():
    assert run("""
        answers = []
        waiter = threading.Thread(target=lambda: answers.append(wait_interruptibly(ended)))
        waiter.start()
        ended.set()
        waiter.join()
        print(answers, signal.set_wakeup_fd(-1))
    """) == "[True] -1"


def test_a_process_with_more_than_1024_files_open_can_wait():
    # select() cannot watch an fd numbered 1024 or more; the wait's own pipe gets such a number here.
    assert run("""
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard != resource.RLIM_INFINITY and hard < 1100:
            print("False True")  # cannot open that many here
            sys.exit()
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1100), hard))
        held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1030)]
        print(wait_interruptibly(WakingEvent(), timeout=0.01), max(held) >= 1024)
    """) == "False True"


def test_signals_during_a_deferred_section_reach_their_handlers_in_order_once_it_ends():
    assert run("""
        signal.signal(signal.SIGTERM, lambda signum, frame: print("SIGTERM's handler"))
        signal.signal(signal.SIGUSR1, lambda signum, frame: print("SIGUSR1's handler"))
        with signals_deferred():
            os.kill(os.getpid(), signal.SIGUSR1)
            os.kill(os.getpid(), signal.SIGTERM)
            print("the section ran to its end")
        print("after it")
    """).splitlines() == ["the section ran to its end", "SIGUSR1's handler", "SIGTERM's handler", "after it"]


def test_a_ctrl_c_during_a_deferred_section_is_raised_as_it_ends_and_the_handlers_are_back():
    assert run("""
        signal.signal(signal.SIGTERM, raise_stop_signal)
        try:
            with signals_deferred():
                os.kill(os.getpid(), signal.SIGINT)
                print("the section ran to its end")
        except KeyboardInterrupt:
            print("KeyboardInterrupt after it")
        print(signal.getsignal(signal.SIGINT) is signal.default_int_handler,
              signal.getsignal(signal.SIGTERM) is raise_stop_signal)
    """).splitlines() == ["the section ran to its end", "KeyboardInterrupt after it", "True True"]


def test_a_second_ctrl_c_during_a_deferred_section_is_raised_at_once():
    assert run("""
        try:
            with signals_deferred():
                os.kill(os.getpid(), signal.SIGINT)
                os.kill(os.getpid(), signal.SIGINT)
                print("not reached: a hung section could not be left")
        except KeyboardInterrupt:
            print("KeyboardInterrupt inside it")
        print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    """).splitlines() == ["KeyboardInterrupt inside it", "True"]
