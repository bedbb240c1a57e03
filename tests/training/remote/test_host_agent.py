"""The host agent and its client, without SSH: the agent runs as a local subprocess (by path,
on the standard library alone, as on a host), the client speaks to it over the pipes. The
"host's" trial folders are a separate tmp folder from the manager's: output arrives only by
the stream. Real processes, real signals; every wait is on a condition with a deadline."""
from __future__ import annotations

import ast
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Awaitable, Callable

import psutil
import pytest

from expmgr.layout import TrialFolder
from expmgr.training.remote import host_agent
from expmgr.training.remote.agent_client import AgentClient, HostLaunch, host_trial_environment
from expmgr.training.remote.runtime import agent_command, runtime_files
from tests.helpers.common import REPO

DEADLINE = 60.0
"""Seconds any awaited condition may take (generous: CI runs beside busy loops)."""
AGENT = REPO / "expmgr" / "training" / "remote" / "host_agent.py"
WATCHDOG = REPO / "expmgr" / "training" / "watchdog.py"


class Recorder:
    """The client's listener: every event in order, and a wait for a condition on them."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self._changed = asyncio.Event()

    def _add(self, *event: Any) -> None:
        self.events.append(event)
        self._changed.set()

    def trial_started(self, trial_id: str, attempt: int, pid: int | None, *, pid_started: float | None = None,
                      host: str | None = None) -> None:
        self._add("started", trial_id, attempt, pid, host)

    def trial_exited(self, trial_id: str, attempt: int, exit_code: int | None, signal: int | None, *,
                     failed: bool = False) -> None:
        self._add("exited", trial_id, attempt, exit_code, signal, failed)

    def trial_launch_failed(self, trial_id: str, attempt: int, reason: str, system: bool = False) -> None:
        self._add("launch_failed", trial_id, attempt, reason, system)

    def trial_lost(self, trial_id: str, attempt: int, reason: str, preempted: bool = False) -> None:
        self._add("lost", trial_id, attempt, reason, preempted)

    def of(self, trial_id: str, attempt: int = 1) -> list[tuple[Any, ...]]:
        return [event for event in self.events if event[1:3] == (trial_id, attempt)]

    def ended(self, trial_id: str, attempt: int = 1) -> tuple[Any, ...] | None:
        return next((event for event in self.of(trial_id, attempt)
                     if event[0] in ("exited", "lost", "launch_failed")), None)

    async def wait_for(self, condition: Callable[[], Any], what: str) -> Any:
        """``condition()`` once it is true, looked at on each event and every 20 ms (output
        arrives in files, not events); AssertionError after DEADLINE."""
        deadline = asyncio.get_running_loop().time() + DEADLINE
        while not (result := condition()):
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"timed out after {DEADLINE}s waiting for {what}; events: {self.events}")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), 0.02)
            except asyncio.TimeoutError:
                pass
        return result

    async def end_of(self, trial_id: str, attempt: int = 1) -> tuple[Any, ...]:
        return await self.wait_for(lambda: self.ended(trial_id, attempt), f"the end of {trial_id}/{attempt}")

    def order_problems(self) -> list[str]:
        """The contract's order per attempt: started, then exactly one of exited/lost; or launch_failed alone."""
        problems = []
        for key in {event[1:3] for event in self.events}:
            kinds = [event[0] for event in self.of(*key)]
            if kinds not in (["started", "exited"], ["started", "lost"], ["launch_failed"], ["started"]):
                problems.append(f"{key}: {kinds}")
        return problems


class Host:
    """One agent process, its client, the host's folder and the manager's trials folder."""

    def __init__(self, tmp_path: Path) -> None:
        self.host_dir = tmp_path / "host"
        self.manager_trials = tmp_path / "manager" / "trials"
        self.code = self.host_dir / "code"
        self.code.mkdir(parents=True)
        self.events = Recorder()
        self.process: asyncio.subprocess.Process | None = None
        self.client: AgentClient | None = None

    async def start(self, argv: list[str] | None = None) -> AgentClient:
        argv = argv or [sys.executable, "-I", "-S", str(AGENT), "--runtime", str(REPO), "--watchdog", str(WATCHDOG)]
        self.process = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE,
                                                            stdout=asyncio.subprocess.PIPE, start_new_session=True)
        assert self.process.stdout is not None and self.process.stdin is not None
        self.client = AgentClient(self.process.stdout, self.process.stdin, host="host-a",
                                  folder_of=lambda trial_id: TrialFolder(self.manager_trials / trial_id),
                                  events=self.events)
        self.client.start()
        return self.client

    def script(self, name: str, body: str) -> str:
        (self.code / name).write_text(textwrap.dedent(body))
        return f"{sys.executable} {name}"

    def trial_dir(self, trial_id: str) -> Path:
        return self.host_dir / "trials" / trial_id

    def local(self, trial_id: str, name: str) -> bytes:
        try:
            return (self.manager_trials / trial_id / name).read_bytes()
        except FileNotFoundError:
            return b""

    async def launch(self, trial_id: str, command: str, attempt: int = 1, **options: Any) -> None:
        assert self.client is not None
        env = {"EXPMGR_TRIAL_ID": trial_id, **options.pop("env", {})}
        await self.client.launch(HostLaunch(trial_id, attempt, command, str(self.code), str(self.trial_dir(trial_id)),
                                            env=env, **options))

    async def stop(self) -> None:
        if self.client is not None:
            await self.client.stop(timeout=DEADLINE)
        if self.process is not None:
            await asyncio.wait_for(self.process.wait(), DEADLINE)
        assert self.events.order_problems() == [], "events out of the order TrialEvents states"


def run(tmp_path: Path, scenario: Callable[[Host], Awaitable[None]]) -> Host:
    host = Host(tmp_path)

    async def main() -> None:
        try:
            await scenario(host)
        finally:
            await host.stop()
    asyncio.run(main())
    return host


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def _wait_file(path: Path, what: str) -> str:
    deadline = asyncio.get_running_loop().time() + DEADLINE
    while not (path.is_file() and path.read_text().endswith("\n")):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what} ({path})")
        await asyncio.sleep(0.02)
    return path.read_text()


async def _wait_gone(pids: list[int], what: str) -> None:
    deadline = asyncio.get_running_loop().time() + DEADLINE
    while not all(map(_gone, pids)):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what}: still running: {[pid for pid in pids if not _gone(pid)]}")
        await asyncio.sleep(0.02)


CHATTY = """
    import os, sys
    folder = os.environ["EXPMGR_TRIAL_DIR"]
    print("unbuffered:", os.environ.get("PYTHONUNBUFFERED"))
    for i in range(2000):
        print(f"out {i}")
        print(f"err {i}", file=sys.stderr)
    with open(os.path.join(folder, "trial.log"), "a") as log, open(os.path.join(folder, "metrics.jsonl"), "a") as m:
        for i in range(500):
            log.write(f"log {i}\\n")
            log.flush()
            m.write('{"n": %d}\\n' % i)
    sys.stdout.write("burst " * 200000 + "\\n")   # 1.2 MB right before the exit, unflushed
    sys.stderr.write("last words\\n")
    sys.exit(3)
"""


@pytest.mark.parametrize("unbuffered", [True, False], ids=["unbuffered", "PYTHONUNBUFFERED-removed"])
def test_a_trials_output_arrives_whole_and_in_order_before_its_exit_is_told(tmp_path, unbuffered):
    async def scenario(host: Host) -> None:
        await host.start()
        command = host.script("chatty.py", CHATTY)
        await host.launch("Chat1", command, env={"PYTHONUNBUFFERED": "1"} if unbuffered else {},
                          unset=() if unbuffered else ("PYTHONUNBUFFERED",))
        ended = await host.events.end_of("Chat1")
        # Read the moment the end is told: everything is already here.
        out, err = host.local("Chat1", "stdout").decode(), host.local("Chat1", "stderr").decode()
        log, metrics = host.local("Chat1", "trial.log").decode(), host.local("Chat1", "metrics.jsonl").decode()
        assert ended[:5] == ("exited", "Chat1", 1, 3, None)
        assert out == ("unbuffered: " + ("1" if unbuffered else "None") + "\n"
                       + "".join(f"out {i}\n" for i in range(2000)) + "burst " * 200000 + "\n")
        assert err == "".join(f"err {i}\n" for i in range(2000)) + "last words\n"
        assert log == "".join(f"log {i}\n" for i in range(500))
        assert metrics == "".join('{"n": %d}\n' % i for i in range(500))
        started = host.events.of("Chat1")[0]
        assert started[0] == "started" and started[4] == "host-a" and isinstance(started[3], int)
    run(tmp_path, scenario)


ROTATING = """
    import os
    log = os.path.join(os.environ["EXPMGR_TRIAL_DIR"], "trial.log")
    for part in range(2):
        with open(log, "a") as file:
            for i in range(1000):
                file.write(f"part {part} line {i}\\n")
        if part == 0:
            os.replace(log, log + ".1")   # as a rotating logger does: renamed, a new file begun
"""


def test_a_log_rotated_on_the_host_arrives_whole_in_order(tmp_path):
    async def scenario(host: Host) -> None:
        await host.start()
        await host.launch("Rot1", host.script("rotating.py", ROTATING))
        assert (await host.events.end_of("Rot1"))[3] == 0
        assert host.local("Rot1", "trial.log").decode() == "".join(
            f"part {part} line {i}\n" for part in range(2) for i in range(1000))
    run(tmp_path, scenario)


def test_a_second_attempt_appends_after_the_first_ones_output(tmp_path):
    async def scenario(host: Host) -> None:
        await host.start()
        command = host.script("twice.py", "import os\nprint('attempt', os.environ['EXPMGR_TRIAL_ATTEMPT'])\n")
        for attempt in (1, 2):
            await host.launch("Twice", command, attempt, env={"EXPMGR_TRIAL_ATTEMPT": str(attempt)})
            assert (await host.events.end_of("Twice", attempt))[3] == 0
        assert host.local("Twice", "stdout") == b"attempt 1\nattempt 2\n"
    run(tmp_path, scenario)


def test_the_exit_code_and_the_killing_signal_are_told(tmp_path):
    async def scenario(host: Host) -> None:
        await host.start()
        await host.launch("Code7", host.script("code.py", "import sys\nsys.exit(7)\n"))
        await host.launch("Kill9", host.script("kill.py", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"))
        assert (await host.events.end_of("Code7"))[3:6] == (7, None, False)
        assert (await host.events.end_of("Kill9"))[3:6] == (None, signal.SIGKILL, False)
    run(tmp_path, scenario)


STUBBORN = """
    import signal, sys, time
    def on_term(signum, frame):
        print("TERM received, ignored", flush=True)
    signal.signal(signal.SIGTERM, on_term)
    print("ready", flush=True)
    while True:
        time.sleep(1)
"""


def test_term_reaches_the_trials_group_and_kill_ends_it(tmp_path):
    async def scenario(host: Host) -> None:
        client = await host.start()
        await host.launch("Stub1", host.script("stubborn.py", STUBBORN))
        await host.events.wait_for(lambda: host.local("Stub1", "stdout") == b"ready\n", "the trial ready")
        assert client.signal("Stub1", signal.SIGTERM)
        await host.events.wait_for(lambda: b"TERM received" in host.local("Stub1", "stdout"), "TERM in the trial")
        assert host.events.ended("Stub1") is None
        assert client.signal("Stub1", signal.SIGKILL)
        assert (await host.events.end_of("Stub1"))[3:5] == (None, signal.SIGKILL)
        assert not client.signal("Stub1", signal.SIGTERM)  # no longer running there
    run(tmp_path, scenario)


def test_int_reaches_the_trial_as_ctrl_c_would(tmp_path):
    async def scenario(host: Host) -> None:
        client = await host.start()
        await host.launch("Int1", host.script("interruptible.py", "import time\nprint('ready', flush=True)\n"
                                                                  "time.sleep(600)\n"))
        await host.events.wait_for(lambda: host.local("Int1", "stdout") == b"ready\n", "the trial ready")
        assert client.signal("Int1", signal.SIGINT)
        # Python ends by SIGINT itself on a KeyboardInterrupt nobody caught.
        assert (await host.events.end_of("Int1"))[3:5] == (None, signal.SIGINT)
        assert b"KeyboardInterrupt" in host.local("Int1", "stderr")
    run(tmp_path, scenario)


PREEMPTIBLE = """
    import os, signal, sys, time
    def on_usr1(signum, frame):
        with open(os.path.join(os.environ["EXPMGR_TRIAL_DIR"], "preempting"), "w") as marker:
            marker.write("1")
        print("checkpointed", flush=True)
        sys.exit(128 + signum)
    signal.signal(signal.SIGUSR1, on_usr1)
    print("ready", flush=True)
    while True:
        time.sleep(1)
"""


def test_usr1_reaches_the_trial_and_its_preempting_mark_comes_back(tmp_path):
    async def scenario(host: Host) -> None:
        client = await host.start()
        await host.launch("Pre1", host.script("preemptible.py", PREEMPTIBLE))
        await host.events.wait_for(lambda: host.local("Pre1", "stdout") == b"ready\n", "the trial ready")
        assert client.signal("Pre1", signal.SIGUSR1)
        assert (await host.events.end_of("Pre1"))[3] == 128 + signal.SIGUSR1
        assert host.local("Pre1", "stdout") == b"ready\ncheckpointed\n"
        assert host.local("Pre1", "preempting") == b"1"
    run(tmp_path, scenario)


ESCAPING = """
    import os, subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    with open("pids.partial", "w") as pids:
        pids.write(f"{os.getpid()} {child.pid}\\n")
    os.replace("pids.partial", "pids")
    while True:
        time.sleep(1)
"""


async def _escaping_trial(host: Host) -> list[int]:
    """A running trial that left a grandchild in a session of its own; their pids."""
    await host.start()
    await host.launch("Esc1", host.script("escaping.py", ESCAPING))
    await host.events.wait_for(lambda: host.events.of("Esc1"), "the trial started")
    pids = [int(pid) for pid in (await _wait_file(host.code / "pids", "the trial's pids")).split()]
    assert not any(map(_gone, pids))
    return pids


def test_closing_the_agents_stdin_ends_the_trial_and_what_escaped_its_group(tmp_path):
    async def scenario(host: Host) -> None:
        pids = await _escaping_trial(host)
        assert host.client is not None and host.process is not None
        host.client.close()  # the connection is gone: stdin ends, no stop
        await _wait_gone(pids, "the trial and its escaped grandchild after the agent's stdin closed")
        assert await asyncio.wait_for(host.process.wait(), DEADLINE) == 0
        assert host.events.ended("Esc1")[0] == "lost"
        stderr = (host.trial_dir("Esc1") / "stderr").read_text()
        assert "ended without stopping this trial" in stderr  # the watchdog's word, on the host
    run(tmp_path, scenario)


def test_a_sigkilled_agent_leaves_nothing_running_and_its_trials_are_lost(tmp_path):
    async def scenario(host: Host) -> None:
        pids = await _escaping_trial(host)
        assert host.process is not None
        host.process.kill()
        lost = await host.events.end_of("Esc1")
        assert lost[0] == "lost" and "host-a" in lost[3] and lost[4] is False
        await _wait_gone(pids, "the trial and its escaped grandchild after the agent's SIGKILL")
    run(tmp_path, scenario)


def test_stop_kills_what_runs_tells_each_exit_and_ends_the_agent(tmp_path):
    async def scenario(host: Host) -> None:
        pids = await _escaping_trial(host)
        assert host.client is not None and host.process is not None
        await host.client.stop(timeout=DEADLINE)
        assert (await host.events.end_of("Esc1"))[:5] == ("exited", "Esc1", 1, None, signal.SIGKILL)
        assert await asyncio.wait_for(host.process.wait(), DEADLINE) == 0
        await _wait_gone(pids, "the trial and its escaped grandchild after stop")
    run(tmp_path, scenario)


def test_a_code_directory_missing_on_the_host_fails_the_launch(tmp_path):
    async def scenario(host: Host) -> None:
        client = await host.start()
        await client.launch(HostLaunch("NoDir", 1, "python3 x.py", str(host.host_dir / "nowhere"),
                                       str(host.trial_dir("NoDir"))))
        failed = await host.events.end_of("NoDir")
        assert failed[0] == "launch_failed" and "nowhere" in failed[3] and failed[4] is False
    run(tmp_path, scenario)


def test_a_program_not_found_exits_127_with_the_shells_word_as_locally(tmp_path):
    async def scenario(host: Host) -> None:
        await host.start()
        await host.launch("NoProg", "no-such-program-expmgr --flag")
        assert (await host.events.end_of("NoProg"))[:5] == ("exited", "NoProg", 1, 127, None)
        assert b"not found" in host.local("NoProg", "stderr")
    run(tmp_path, scenario)


def test_a_launch_the_host_cannot_run_fails_and_the_agent_goes_on(tmp_path):
    async def scenario(host: Host) -> None:
        await host.start()
        await host.launch("Nul1", "true", env={"BAD": "a\0b"})  # no process can have it
        failed = await host.events.end_of("Nul1")
        assert failed[0] == "launch_failed" and "ValueError" in failed[3] and failed[4] is False
        await host.launch("After", "true")
        assert (await host.events.end_of("After"))[3] == 0
    run(tmp_path, scenario)


FORKING = """
    import subprocess, sys
    children = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]) for _ in range(4)]
    for child in children:
        child.wait()
"""


def test_a_trial_over_its_process_limit_is_killed_and_failed(tmp_path):
    async def scenario(host: Host) -> None:
        await host.start()
        await host.launch("Fork1", host.script("forking.py", FORKING), process_limit=2)
        assert (await host.events.end_of("Fork1"))[3:6] == (None, signal.SIGKILL, True)
        assert b"more than its limit of 2" in host.local("Fork1", "stderr")
    run(tmp_path, scenario)


def test_malformed_and_oversize_commands_are_refused_and_the_agent_goes_on(tmp_path):
    async def scenario(host: Host) -> None:
        await host.start()
        assert host.process is not None and host.process.stdin is not None
        stdin = host.process.stdin
        for line in (b"not json", b"[1, 2]", b'{"op": "launch"}', b'{"op": "dance"}',
                     b'{"op": "signal", "trial_id": "Nobody", "attempt": 1, "signal": "TERM"}',
                     b'{"op": "signal", "trial_id": "Nobody", "attempt": 1, "signal": "HUP"}',
                     b"x" * (host_agent.MAX_COMMAND_BYTES + 10), b"\xff\xfe"):
            stdin.write(line + b"\n")
        stdin.write(b"y" * (host_agent.MAX_COMMAND_BYTES * 2))  # oversize with no end of line yet ...
        stdin.write(b"\n")                                        # ... skipped whole
        await stdin.drain()
        await host.launch("After", host.script("ok.py", "print('fine')\n"))
        assert (await host.events.end_of("After"))[3] == 0
        assert host.local("After", "stdout") == b"fine\n"
    run(tmp_path, scenario)


HOSTILE_AGENT = r"""
import base64, json, sys
launch = json.loads(sys.stdin.readline())
ident = {"trial_id": launch["trial_id"], "attempt": launch["attempt"]}
def say(line):
    sys.stdout.buffer.write(line + b"\n")
def event(**fields):
    say(json.dumps(fields).encode())
data = lambda text: base64.b64encode(text).decode()
say(b"x" * 300000)                                       # oversize
say(b"{not json")
say(b'"a string"')
event(event="started", trial_id="Unknown", attempt=1, pid=1)          # not launched here
event(event="exited", **ident, exit_code=0)                           # before started: out of order
event(event="started", **ident, pid=4242)
event(event="output", **ident, file="../../etc/passwd", offset=0, data=data(b"no"))
event(event="output", **ident, file="stdout", offset=0, data="@@not base64@@")
event(event="output", **ident, file="stdout", offset=0, data=data(b"a" * 60000))  # over a chunk
event(event="output", **ident, file="stdout", offset=0, data=data(b"good "))
event(event="output", **ident, file="stdout", offset=99, data=data(b"gap"))      # not in order
event(event="output", **ident, file="stdout", offset=5, data=data(b"line\n"))
event(event="exited", **ident, exit_code=2**70)                        # no such exit code
event(event="exited", **ident, exit_code=0, signum=9)                  # both
event(event="exited", **ident, exit_code=0, preempting="x" * 1000)
event(event="exited", **ident, exit_code=1)                            # a second end
sys.stdout.flush()
sys.stdin.readline()
"""


def test_malformed_and_oversize_events_from_the_host_are_skipped_and_the_client_goes_on(tmp_path):
    async def scenario(host: Host) -> None:
        hostile = tmp_path / "hostile.py"
        hostile.write_text(HOSTILE_AGENT)
        await host.start([sys.executable, str(hostile)])
        await host.launch("Hst1", "true")
        assert (await host.events.end_of("Hst1"))[:5] == ("exited", "Hst1", 1, 0, None)
        assert [event[0] for event in host.events.events] == ["started", "exited"]
        assert host.local("Hst1", "stdout") == b"good line\n"
        assert not (host.manager_trials / "Hst1" / "preempting").exists()
        assert not (tmp_path / "etc").exists() and not (host.manager_trials / "etc").exists()
    run(tmp_path, scenario)


def test_a_host_that_drops_before_the_start_leaves_the_attempt_waiting(tmp_path):
    async def scenario(host: Host) -> None:
        await host.start([sys.executable, "-c", "import sys; sys.stdin.readline()"])
        await host.launch("Early", "true")
        failed = await host.events.end_of("Early")
        assert failed[0] == "launch_failed" and failed[4] is True  # system: it waits, never ran
    run(tmp_path, scenario)


REPORTING_TRIAL = """
    import json, logging, expmgr, nni
    print("expmgr from", expmgr.__file__, flush=True)
    print("parameters", json.dumps(nni.get_next_parameter()), flush=True)
    logging.getLogger("nni.user").warning("hello from the host")
    expmgr.report_final_result(0.5)
"""


def test_the_agent_imports_the_standard_library_alone_and_stops_clean():
    argv = [sys.executable, "-X", "importtime", "-I", "-S", str(AGENT), "--runtime", str(REPO),
            "--watchdog", str(WATCHDOG)]
    ended = subprocess.run(argv, input='{"op": "stop"}\n', capture_output=True, text=True, timeout=DEADLINE)
    assert ended.returncode == 0 and ended.stdout == '{"event":"stopped"}\n', ended.stderr[-2000:]
    modules = {line.split("|")[-1].strip() for line in ended.stderr.splitlines() if line.startswith("import time:")}
    assert "subprocess" in modules
    assert not [name for name in modules if name.split(".")[0] in ("expmgr", "site", "typing")], sorted(modules)


def test_the_agents_copies_of_expmgr_names_are_expmgrs():
    """It cannot import them (it runs alone on the host): a test keeps them one."""
    from expmgr import trial
    from expmgr.training import watchdog
    assert host_agent.MARKER_ENV == watchdog.MARKER_ENV and host_agent._OVER_LIMIT == watchdog.OVER_LIMIT
    assert host_agent.PREEMPTING_FILE == trial.PREEMPTING_FILE and host_agent.TRIAL_DIR_ENV == trial.ENV_TRIAL_DIR
    assert set(host_agent.STREAMED_FILES) == {"stdout", "stderr", "trial.log", "metrics.jsonl"}
    folder = TrialFolder(Path("x"))
    assert [folder.stdout.name, folder.stderr.name, folder.trial_log.name, folder.metrics.name] == \
        list(host_agent.STREAMED_FILES)
    assert folder.preempting_marker.name == host_agent.PREEMPTING_FILE


def test_the_uploaded_runtime_and_the_agent_parse_as_python_3_8():
    """Hosts run what Python they have: the oldest NNI supports is 3.8."""
    for relative, local in runtime_files():
        ast.parse(local.read_text(), str(local), feature_version=(3, 8))


def test_the_uploaded_runtime_is_the_trial_api_on_a_host_without_expmgr(tmp_path):
    """The trial imports expmgr from the uploaded runtime (a python without expmgr installed),
    logs to trial.log, and reports to the port given as the forwarded one on its loopback."""
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None or os.path.realpath(python) == os.path.realpath(sys.executable):
        pytest.skip("needs a system python3 other than the test's own (one without expmgr installed)")
    runtime = tmp_path / "runtime"
    for relative, local in runtime_files():
        (runtime / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(local, runtime / relative)
    requests: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length")))
        requests.append(head + await reader.readexactly(length))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
        await writer.drain()
        writer.close()

    async def scenario(host: Host) -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            await host.start(agent_command(python, str(runtime), "sess1"))
            trial_dir = str(host.trial_dir("Rep1"))
            env = host_trial_environment({"EXPMGR_TRIAL_ID": "Rep1", "EXPMGR_EXPERIMENT_ID": "exp1",
                                          "EXPMGR_TRIAL_TOKEN": "tok3n", "EXPMGR_TOKEN": "server-secret",
                                          "EXPMGR_MANAGER_SOCKET": "/the/manager's/reports.sock"},
                                         report_port=port, trial_dir=trial_dir, code_directory=str(host.code))
            assert env["EXPMGR_MANAGER_HOST"] == "127.0.0.1" and "EXPMGR_TOKEN" not in env
            # The manager's report socket is not the host's: its trials report through the relay alone,
            # even if the host's own environment names one.
            assert "EXPMGR_MANAGER_SOCKET" not in env and "EXPMGR_MANAGER_SOCKET" in HostLaunch("t", 1, "", "", "").unset
            assert host.client is not None
            (host.code / "report.py").write_text(textwrap.dedent(REPORTING_TRIAL))
            await host.client.launch(HostLaunch("Rep1", 1, f"{python} report.py", str(host.code), trial_dir, env=env,
                                                parameters=json.dumps({"parameter_id": 0, "parameter_source": "algorithm",
                                                                   "parameters": {"lr": 0.1}, "parameter_index": 0})))
            ended = await host.events.end_of("Rep1")
            assert ended[:4] == ("exited", "Rep1", 1, 0), host.local("Rep1", "stderr")
        finally:
            server.close()
        assert host.local("Rep1", "stdout").decode() == (f"expmgr from {runtime}/expmgr/__init__.py\n"
                                                         'parameters {"lr": 0.1}\n')
        assert "hello from the host" in host.local("Rep1", "trial.log").decode()
        # The write-ahead line came back whole, and is what was sent, with the trial's token.
        line = host.local("Rep1", "metrics.jsonl")
        assert line.endswith(b"\n") and json.loads(line)["value"] == 0.5 and json.loads(line)["type"] == "FINAL"
        assert len(requests) == 1 and requests[0].startswith(b"POST /api/v1/expmgr/trials/Rep1/metrics ")
        assert b"X-Expmgr-Trial-Token: tok3n" in requests[0] and requests[0].endswith(b"\r\n\r\n" + line[:-1])
        assert json.loads((host.trial_dir("Rep1") / "parameter.json").read_text())["parameter_id"] == 0
    run(tmp_path, scenario)


def test_with_a_window_the_agent_keeps_its_trial_when_its_stdin_closes_writes_its_end_and_the_next_agent_tells_it(
        tmp_path: Path):
    state = tmp_path / "host" / "watchdog"

    def agent(session: str) -> list[str]:
        return [sys.executable, "-I", "-S", str(AGENT), "--runtime", str(REPO), "--watchdog", str(WATCHDOG),
                "--session", session, "--window", "60", "--state", str(state)]

    async def scenario(host: Host) -> None:
        client = await host.start(agent("old"))
        assert (await client.wait_kept(DEADLINE)).session is None, "no run before"
        go = host.code / "go"
        await host.launch("kept", host.script("kept.py", f"""
            import os, sys, time
            while not os.path.exists({str(go)!r}):
                time.sleep(0.05)
            print("done")
            sys.exit(5)
            """))
        [(_, _, _, pid, _)] = await host.events.wait_for(
            lambda: [event for event in host.events.events if event[0] == "started"], "the trial's start")
        (tmp_path / "record").write_text((state / "current").read_text().split()[1])
        client.let_go()   # the manager's connection goes: no stop
        await host.events.wait_for(lambda: (state / "manager-gone").exists(), "the watchdog to note the time")
        assert os.path.exists(f"/proc/{pid}"), "the trial runs on"
        go.touch()
        status = host.trial_dir("kept") / ".exit-status-1"
        await host.events.wait_for(status.exists, "the old agent to write the trial's end")
        assert json.loads(status.read_text()) == {"returncode": 5}
        assert host.process is not None
        await asyncio.wait_for(host.process.wait(), DEADLINE)   # its last trial ended: it exited
        assert host.events.order_problems() == [] and host.events.ended("kept") is None, "no end told after let_go"
        host.events.events.clear()
        successor = await host.start(agent("new"))
        kept = await successor.wait_kept(DEADLINE)
        assert kept.session == "old" and kept.statuses == {("kept", 1): 5} and kept.gone_at is not None
        assert not (state / "manager-gone").exists(), "taken once"
        old_watchdog = [int(word) for word in (tmp_path / "record").read_text().split()][0]
        successor.release([])   # the old watchdog, still waiting for the window, exits
        await host.events.wait_for(lambda: not _running(old_watchdog), "the old watchdog to exit")

    run(tmp_path, scenario)


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
