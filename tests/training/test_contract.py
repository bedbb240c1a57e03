"""The contract every training service keeps (docs/architecture.md, "Training services"):
what the runner relies on, checked with real trial processes. Parametrized over the
services; a new service adds its name and config to SERVICE_CONFIGS and passes this file
(the Ray service against a real two-node cluster, ``tests/helpers/ray_cluster.py``; the remote
service against a real sshd host, ``tests/helpers/ssh_hosts.py``, whose files the test reads
where the trial runs: ``Context.code_there``, ``Context.trial_dir_there``)."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

import psutil
import pytest

from expmgr import trial as trial_api
from expmgr.config import ExperimentConfig, ResolvedConfig
from expmgr.layout import ExperimentPaths, TrialFolder
from expmgr.logreader import LogFile, open_kept, read_blocks
from expmgr.rotation import dropped_bytes, rotated_files
from expmgr.training import TrainingService, TrialFilesError, TrialLaunch, create_training_service, trial_files
from tests.helpers.ray_cluster import ray_cluster, ray_cluster_module  # noqa: F401
from tests.helpers.trial_events import Recorder
from tests.helpers.ssh_hosts import SshHost, ssh_client_home, ssh_host_pair, ssh_hosts  # noqa: F401
from tests.helpers.contract_service import DEADLINE, SERVICE_CONFIGS, Context, run_service, service  # noqa: F401
def test_the_order_check_finds_each_attempt_whose_events_break_the_stated_order():
    recorder = Recorder()
    recorder.trial_started("fine", 1, 10)
    recorder.trial_exited("fine", 1, 0, None)
    recorder.trial_launch_failed("never", 1, "no node fits")
    recorder.trial_started("lost", 1, 11)
    recorder.capacity_changed()
    recorder.trial_lost("lost", 1, "its node is gone")
    recorder.trial_exited("early", 1, 0, None)          # an end before its start
    recorder.trial_started("early", 1, 12)
    recorder.trial_started("twice", 2, 13)
    recorder.trial_exited("twice", 2, 0, None)
    recorder.trial_lost("twice", 2, "its node is gone")  # two ends
    recorder.trial_launch_failed("after", 1, "no node fits")
    recorder.trial_started("after", 1, 14)               # a start after its end
    recorder.trial_started("running", 1, 15)
    assert recorder.order_problems(stopped=False) == [
        "trial early attempt 1: exited -> started", "trial twice attempt 2: started -> exited -> lost",
        "trial after attempt 1: launch_failed -> started"]
    assert recorder.order_problems(stopped=True)[-1] == "trial running attempt 1: started", \
        "after stop() every started attempt has ended"


def test_a_trial_is_started_then_exits_with_its_code(service: str, tmp_path: Path):
    async def test(c: Context) -> None:
        await c.service.launch(c.launch_of("ok", "true"))
        await c.service.launch(c.launch_of("three", "python3 -c 'import sys; sys.exit(3)'", attempt=2))
        await c.until(lambda: c.events.exit_of("ok") and c.events.exit_of("three"), "both exits")
        assert c.events.events.index(("started", "ok", 1)) < c.events.events.index(("exited", "ok", 1, 0, None))
        assert ("started", "three", 2) in c.events.events
        assert c.events.exit_of("three") == ("exited", "three", 2, 3, None)

    run_service(service, tmp_path, test)


def test_a_killed_trial_exits_with_its_signal(service: str, tmp_path: Path):
    async def test(c: Context) -> None:
        # A simple command (no shell syntax) runs directly, so its signal stays a signal.
        c.write_code("selfkill.py", "import os\nos.kill(os.getpid(), 9)\n")
        await c.service.launch(c.launch_of("selfkill", "python3 selfkill.py"))
        await c.until(lambda: c.events.exit_of("selfkill"), "its exit")
        assert c.events.exit_of("selfkill") == ("exited", "selfkill", 1, None, signal.SIGKILL)

    run_service(service, tmp_path, test)


def test_signal_reaches_the_trials_whole_process_group(service: str, tmp_path: Path):
    # The shell waits for its child after SIGTERM too: otherwise it may exit first and the
    # service's SIGKILL of the rest of the group could beat the child's handler.
    child = ("trap wait TERM; python3 -c 'import pathlib, signal, time; "
             "signal.signal(signal.SIGTERM, lambda *a: (pathlib.Path(\"child-got-term\").write_text(\"\"), exit(0))); "
             "pathlib.Path(\"child-ready\").write_text(\"\"); time.sleep(60)' & wait")

    async def test(c: Context) -> None:
        await c.service.launch(c.launch_of("group", child))
        await c.until(lambda: (c.code_there / "child-ready").exists(), "the child to start")
        assert c.service.signal("group", signal.SIGTERM)
        await c.until(lambda: (c.code_there / "child-got-term").exists(), "the child (not the trial's own process) "
                      "to get SIGTERM")
        await c.until(lambda: c.events.exit_of("group"), "the trial's exit")
        assert not c.service.signal("group", signal.SIGTERM), "an ended trial cannot be signalled"

    run_service(service, tmp_path, test)


def test_stop_ends_a_trial_ignoring_sigterm_within_the_grace_period(service: str, tmp_path: Path):
    stubborn = ("import pathlib, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "pathlib.Path('ready').write_text('')\ntime.sleep(60)\n")

    async def test(c: Context) -> None:
        c.write_code("stubborn.py", stubborn)
        await c.service.launch(c.launch_of("stubborn", "python3 stubborn.py"))
        await c.until(lambda: (c.code_there / "ready").exists(), "the trial to ignore SIGTERM")
        began = time.monotonic()
        await c.service.stop(grace_period=0.5)
        assert time.monotonic() - began < 10, "stop() must SIGKILL after the grace period, not wait for the trial"
        assert c.events.exit_of("stubborn") == ("exited", "stubborn", 1, None, signal.SIGKILL)

    run_service(service, tmp_path, test)


def test_capacity_follows_the_trials_holding_gpus(service: str, tmp_path: Path):
    async def test(c: Context) -> None:
        assert c.service.has_capacity()
        await c.service.launch(c.launch_of("gpu", "sleep 60"))
        assert not c.service.has_capacity(), "one GPU, one trial per GPU: it is taken"
        c.service.signal("gpu", signal.SIGKILL)
        await c.until(lambda: c.events.exit_of("gpu"), "the trial's exit")
        assert c.service.has_capacity(), "the ended trial's GPU is free again"

    # Local and remote: one GPU, one trial per GPU. Ray: one trial may wait for its resources at once.
    held = {"local": {"platform": "local", "gpuIndices": [0], "maxTrialNumberPerGpu": 1},
            "local-warm": {"platform": "local", "gpuIndices": [0], "maxTrialNumberPerGpu": 1, "trialWarmStart": "auto"},
            "local-kept": {"platform": "local", "gpuIndices": [0], "maxTrialNumberPerGpu": 1, "reattachWindow": "10m"},
            "ray": {**SERVICE_CONFIGS["ray"], "maxPendingTrials": 1},
            "remote": {"platform": "remote", "machineList": [
                {**machine, "gpuIndices": [0], "maxTrialNumberPerGpu": 1}
                for machine in SERVICE_CONFIGS["remote"].get("machineList", [])]},
            "remote-kept": {"platform": "remote", "reattachWindow": "10m", "machineList": [
                {**machine, "gpuIndices": [0], "maxTrialNumberPerGpu": 1}
                for machine in SERVICE_CONFIGS["remote-kept"].get("machineList", [])]}}
    run_service(service, tmp_path, test, trial_gpu_number=1, training_service=held[service])


def test_the_trials_files_as_the_runner_asks_for_them(service: str, tmp_path: Path):
    long_line = "x" * (trial_api.MAX_REPORT_BYTES + 1)
    writer = ("python3 -c 'import os, sys; d = os.environ[\"EXPMGR_TRIAL_DIR\"]; "
              "f = open(os.path.join(d, \"metrics.jsonl\"), \"a\"); "
              f"f.write(\"{{\\\"a\\\": 1}}\\n\" + \"{long_line}\\n\" + \"{{\\\"b\\\": 2}}\\n\"); f.close(); "
              "open(os.path.join(d, \"preempting\"), \"w\").write(\"1\"); print(\"out\")'")

    async def test(c: Context) -> None:
        files = c.service.files
        assert list(files.unsent_reports("writer")) == [], "no reports yet"
        assert files.last_output_time("writer") == 0.0
        before = time.time() - 1
        await c.service.launch(c.launch_of("writer", writer))
        await c.until(lambda: c.events.exit_of("writer"), "the trial's exit")
        assert c.events.exit_of("writer") == ("exited", "writer", 1, 0, None)
        assert list(files.unsent_reports("writer")) == [(1, b'{"a": 1}\n'), (2, None), (3, b'{"b": 2}\n')]
        assert files.last_output_time("writer") >= before
        message = files.note_skipped("writer", 2, "longer than allowed")
        assert ":2: report skipped: longer than allowed" in message
        assert "report skipped: longer than allowed" in TrialFolder(c.paths.trial_dir("writer")).trial_log.read_text()
        assert files.marked_preempting("writer", 1) and not files.marked_preempting("writer", 2)
        # A checkpoint is where its trial ran.
        c.make_there(c.trial_dir_there("writer") / "checkpoint" / "state", "42")
        c.paths.trial_dir("next").mkdir()
        await files.copy_checkpoint("writer", "next")
        assert (c.trial_dir_there("next") / "checkpoint" / "state").read_text() == "42"
        assert files.checkpoint_dir("next") == str(c.trial_dir_there("next") / "checkpoint")

    run_service(service, tmp_path, test)


def test_the_trials_logs_are_read_through_its_files_and_without_the_service_alike(service: str, tmp_path: Path):
    """What the server and ``expctl log`` read: each log as a LogFile, the folder and NNI's
    paths; the same from ``trial_files(paths, platform)``, which a stored experiment's
    readers build without a running service."""
    printing = "import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\n"

    async def test(c: Context) -> None:
        c.write_code("printing.py", printing)
        await c.service.launch(c.launch_of("printer", "python3 printing.py"))
        await c.until(lambda: c.events.exit_of("printer"), "its exit")
        stored = trial_files(c.paths, service.split("-")[0])
        folder = c.paths.trial_dir("printer")
        for files in (c.service.files, stored):
            assert whole_text(files.log("printer", "stdout")) == "to stdout\n"
            assert whole_text(files.log("printer", "stderr")) == "to stderr\n"
            assert files.log("printer", "trial.log").path == folder / "trial.log"
            assert files.folder("printer") == str(folder)
            assert files.url("printer") == f"file://localhost:{folder}"
            assert files.url("printer", "stderr") == f"file://localhost:{folder}/stderr"
            with pytest.raises(TrialFilesError, match="not 'parameter.json'"):
                files.log("printer", "parameter.json")

    run_service(service, tmp_path, test)


def whole_text(log: LogFile) -> str:
    snapshot = open_kept(log)
    try:
        return b"".join(read_blocks(snapshot.readable())).decode()
    finally:
        snapshot.close()


def test_after_launch_the_trial_sees_its_parameters_and_its_folder_each_attempt(service: str, tmp_path: Path):
    reader = ("import json, os, expmgr\n"
              "folder = os.environ['EXPMGR_TRIAL_DIR']\n"
              "seen = {'parameters': expmgr.get_next_parameter(), 'folder': folder}\n"
              "with open(os.path.join(folder, f'seen-{expmgr.get_attempt()}.json'), 'w') as file:\n"
              "    json.dump(seen, file)\n")

    async def test(c: Context) -> None:
        c.write_code("reader.py", reader)
        folder = c.paths.trial_dir("reader")
        assert not folder.exists()
        there = c.trial_dir_there("reader")
        for attempt in (1, 2):
            await c.service.launch(c.launch_of("reader", "python3 reader.py", attempt=attempt,
                                               parameters={"lr": 0.1, "layers": [2, 3]}))
            await c.until(lambda: ("exited", "reader", attempt, 0, None) in c.events.events, f"attempt {attempt}")
            seen = json.loads((there / f"seen-{attempt}.json").read_text())
            assert seen == {"parameters": {"lr": 0.1, "layers": [2, 3]}, "folder": str(there)}
        parameter_file = json.loads(TrialFolder(folder).parameter_file.read_text())
        assert parameter_file == {"parameter_id": 0, "parameter_source": "algorithm",
                                  "parameters": {"lr": 0.1, "layers": [2, 3]}, "parameter_index": 0}

    run_service(service, tmp_path, test)


def test_a_leftover_process_is_ended_only_when_pid_and_start_time_match(service: str, tmp_path: Path):
    if service.startswith("remote"):
        pytest.skip("a pid of a host is never ended here: the host's watchdog ended the trial when the "
                    "manager's connection went (tests/training/remote/test_remote_service.py)")
    if service == "ray":
        pytest.skip("no leftover to end by pid on Ray: a trial whose slot died was ended by its node's watchdog "
                    "(test_ray_service.py::test_a_sigkilled_experiment_leaves_no_trial_on_any_node_and_resume_reruns_them)")
    async def test(c: Context) -> None:
        leftover = subprocess.Popen(["sleep", "60"], start_new_session=True)
        try:
            started = psutil.Process(leftover.pid).create_time()
            assert not c.service.end_leftover("old", leftover.pid, started + 5), "another process's pid"
            assert leftover.poll() is None, "a process that only shares the pid is left alone"
            assert c.service.end_leftover("old", leftover.pid, started)
            leftover.wait(timeout=DEADLINE)
        finally:
            if leftover.poll() is None:
                leftover.kill()
                leftover.wait()

    run_service(service, tmp_path, test)


# A trial printing as users' do, with Python's default buffering (no PYTHONUNBUFFERED in the
# environment it is started from; the machines running these tests export it).
PRINTING_TRIAL = """
import os, sys, time
ending = sys.argv[1]
for i in range(50):
    print(f"line {i}")
print("to stderr", file=sys.stderr)
folder = os.environ["EXPMGR_TRIAL_DIR"]
open(os.path.join(folder, "printed"), "w").close()
if ending == "clean":
    sys.exit(0)
if ending == "exception":
    raise RuntimeError("the trial's own error")
if ending == "os_exit":
    os._exit(3)
while not os.path.exists(os.path.join(folder, "go")):
    time.sleep(0.05)
print("after the wait")
"""


@pytest.mark.parametrize("ending", ["clean", "exception", "os_exit", "sigterm", "sigkill"])
def test_every_printed_line_reaches_the_stdout_file_however_the_trial_ends(
        service: str, tmp_path: Path, ending: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)

    async def test(c: Context) -> None:
        c.write_code("printing.py", PRINTING_TRIAL)
        await c.service.launch(c.launch_of("printer", f"python3 printing.py {ending}"))
        files = TrialFolder(c.paths.trial_dir("printer"))
        await c.until(lambda: (c.trial_dir_there("printer") / "printed").exists(), "the trial to print its lines")
        if ending in ("sigterm", "sigkill"):
            c.service.signal("printer", signal.SIGTERM if ending == "sigterm" else signal.SIGKILL)
        await c.until(lambda: c.events.exit_of("printer"), "its exit")
        # Its end is told once its output is in its files.
        assert files.stdout.read_text().splitlines() == [f"line {i}" for i in range(50)]
        assert files.stderr.read_text().startswith("to stderr\n")
        if ending == "exception":
            assert "RuntimeError: the trial's own error" in files.stderr.read_text()

    run_service(service, tmp_path, test)


def test_a_line_printed_while_the_trial_waits_is_in_its_file_before_it_goes_on(
        service: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Live output: the trial waits after printing (for a file the test makes only once the
    lines arrived), so buffered output would never arrive in time."""
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)

    async def test(c: Context) -> None:
        c.write_code("printing.py", PRINTING_TRIAL)
        await c.service.launch(c.launch_of("live", "python3 printing.py wait"))
        files = TrialFolder(c.paths.trial_dir("live"))
        await c.until(lambda: files.stdout.exists() and files.stdout.read_text().count("\n") == 50,
                      "the 50 lines while the trial waits")
        (c.trial_dir_there("live") / "go").touch()
        await c.until(lambda: c.events.exit_of("live"), "its exit")
        assert files.stdout.read_text().endswith("line 49\nafter the wait\n")
        assert c.events.exit_of("live") == ("exited", "live", 1, 0, None)

    run_service(service, tmp_path, test)


def test_a_users_own_pythonunbuffered_setting_is_kept(service: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYTHONUNBUFFERED", "")  # set, empty: Python's default buffering, the user's choice

    async def test(c: Context) -> None:
        c.write_code("env.py", "import os\nprint(repr(os.environ.get('PYTHONUNBUFFERED')))\n")
        await c.service.launch(c.launch_of("env", "python3 env.py"))
        await c.until(lambda: c.events.exit_of("env"), "its exit")
        assert TrialFolder(c.paths.trial_dir("env")).stdout.read_text() == "''\n"

    run_service(service, tmp_path, test)


def test_only_a_local_trial_is_told_the_managers_report_socket_never_one_inherited(
        service: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # As if the manager itself ran in a trial of another experiment (or the user exported it).
    monkeypatch.setenv(trial_api.ENV_MANAGER_SOCKET, "/inherited/reports.sock")
    socket_path = tmp_path / "reports.sock"

    async def test(c: Context) -> None:
        c.write_code("env.py", f"import os\nprint(repr(os.environ.get({trial_api.ENV_MANAGER_SOCKET!r})))\n")
        await c.service.launch(c.launch_of("env", "python3 env.py"))
        await c.until(lambda: c.events.exit_of("env"), "its exit")
        told = str(socket_path) if service.startswith("local") else None  # Ray and remote trials use their relay
        assert TrialFolder(c.paths.trial_dir("env")).stdout.read_text() == f"{told!r}\n"

    run_service(service, tmp_path, test, report_socket=socket_path)


def test_a_trials_output_is_bounded_by_rotation_and_the_trial_is_not_stopped(service: str, tmp_path: Path):
    async def test(c: Context) -> None:
        c.write_code("loud.py", 
            "import sys\nline = 'x' * 99 + '\\n'\nfor i in range(20_000):\n    sys.stdout.write(line)\n"
            "print('the last line')\n")
        await c.service.launch(c.launch_of("loud", "python3 loud.py"))
        await c.until(lambda: c.events.exit_of("loud"), "its exit", timeout=120)
        assert c.events.exit_of("loud") == ("exited", "loud", 1, 0, None)
        files = TrialFolder(c.paths.trial_dir("loud"))
        kept = [files.stdout, *rotated_files(files.stdout)]
        assert [path.name for path in kept] == ["stdout", "stdout.1", "stdout.2"]
        assert all(path.stat().st_size <= 100_000 for path in kept)
        kept_text = "".join(path.read_text() for path in reversed(kept))
        assert kept_text.endswith("x\nthe last line\n") and set(kept_text.splitlines()[:-1]) == {"x" * 99}
        assert dropped_bytes(files.stdout) == 20_000 * 100 + len("the last line\n") - sum(
            path.stat().st_size for path in kept)

    run_service(service, tmp_path, test, log_max_size=100_000, log_files_kept=3)


WAITER = ("import os, sys, time\nopen('waiting', 'w').close()\n"
          "while not os.path.exists('go'):\n    time.sleep(0.05)\nprint('done')\nsys.exit(7)\n")


@pytest.mark.parametrize("ends", ["after", "meanwhile", "after_a_second_takeover"])
def test_a_trial_left_running_is_taken_over_by_the_next_service_and_its_real_end_told(
        service: str, tmp_path: Path, ends: str):
    """What a resume does with a kept trial (reattachWindow): the service that started it lets
    go of it (``leave_running``, as ``expctl stop --keep-trials`` or a dead manager), the next
    one ``adopt``s it by pid, start time and marker, and tells its real end, whether it ends
    after the takeover or ended in between."""
    if service not in ("local-kept", "remote-kept"):
        pytest.skip(f"{service}: its trials end with their manager (docs/fault-tolerance.md)")
    if service == "remote-kept" and ends == "after_a_second_takeover":
        pytest.skip("a remote trial taken over once is not taken over again yet (docs/remote.md, Limits)")

    async def test(c: Context) -> None:
        c.write_code("waiter.py", WAITER)
        await c.service.launch(c.launch_of("kept", "python3 waiter.py"))
        await c.until(lambda: (c.code_there / "waiting").exists(), "the trial to wait")
        pid, pid_started = c.events.pids[("kept", 1)]
        assert pid is not None and pid_started is not None
        assert await c.service.leave_running()
        if ends == "meanwhile":
            (c.code_there / "go").touch()
            await c.until(lambda: any(c.trial_dir_there("kept").glob(".exit-status-1")),
                          "its keeper (its host's agent) to write its end")
        successor, events = await c.successor()
        try:
            assert not successor.adopt("another", 1, pid, pid_started), "a pid is taken for its own trial only"
            assert successor.adopt("kept", 1, pid, pid_started)
            successor.end_adoption()
            if ends == "after_a_second_takeover":   # the resumed run lets go of it too, the next takes it
                assert await successor.leave_running()
                await successor.stop(grace_period=1.0)
                successor, events = await c.successor()
                assert successor.adopt("kept", 1, pid, pid_started)
                successor.end_adoption()
            (c.code_there / "go").touch()
            await c.until(lambda: events.exit_of("kept"), "its end, told by the service that took it over")
            assert events.exit_of("kept") == ("exited", "kept", 1, 7, None)
            assert (c.paths.trial_dir("kept") / "stdout").read_text() == "done\n"
        finally:
            await successor.stop(grace_period=1.0)
        c.events.events.extend(events.events)   # one attempt's events, across the two services

    run_service(service, tmp_path, test)
