"""The Ray service's trial slot: a Ray actor on a node of the cluster that runs one trial at
a time there, as the local service runs it here (``_process``: the command rules, the
trial's own session, its exit noticed without polling), and relays its metric reports.

- Each trial is a fresh process started by the actor; the actor is reused for the next
  trial with the same resources (``expmgr.training.ray`` decides).
- A watchdog (``watchdog.py``), double-forked so that it is not a child of the actor's
  worker (Ray kills only a worker's direct children), ends the trial and everything it
  started when the actor, its node's raylet or the driver dies: it sees its pipe close.
- The relay: trials post their reports to ``127.0.0.1:<port>`` on their own node, as a
  local trial posts to its manager; the driver takes them (``take_requests``), has its own
  server answer them and hands the answers back (``answer``), which the trial then gets.
  So the manager's server stays on its loopback and the answer is the manager's (403, 409,
  a duplicate's 200), given after the report is stored.
- Without a shared folder (the spec has a ``storage``): the trial's folder is the node's own
  and its output goes back through ``take_output`` (``ray_node_files``).

Only this module and ``ray.py`` import ray; this one runs on every node (expmgr must be
installed there, as Ray is).
"""
from __future__ import annotations

import asyncio
import os
import signal as signals
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import ray

from expmgr import trial as trial_api
from expmgr.layout import TrialFolder
from expmgr.rotation import UNBOUNDED, RotationLimits
from expmgr.training._interpreter import with_interpreter_first
from expmgr.training._output import OutputPump, TrialOutput
from expmgr.training._process import exit_of, kill_group, process_start_time, spawn_trial
from expmgr.training.ray_node_files import NodeTrialFiles
from expmgr.training.watchdog import MARKER_ENV, trial_marker
from expmgr.training.watchdog import command as watchdog_command

MAX_WAITING_REPORTS = 64
"""Reports a slot holds for the driver at once; more are answered 503 (the trial keeps the
line in metrics.jsonl, stored when it ends)."""
_MAX_HEAD_BYTES = 16 * 1024
_MAX_BODY_BYTES = trial_api.MAX_REPORT_BYTES + 1024
_READ_TIMEOUT = 10.0
OUTPUT_DRAIN_TIMEOUT = 5.0
_ANSWER_TIMEOUT = 25.0  # under the trial's own 30 s, so that the trial hears why
_DOUBLE_FORK = ("import os, sys\n"
                "if os.fork():\n    os._exit(0)\n"
                "os.execv(sys.argv[1], sys.argv[1:])\n")
_REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 409: "Conflict",
            413: "Content Too Large", 500: "Internal Server Error", 502: "Bad Gateway",
            503: "Service Unavailable", 504: "Gateway Timeout"}


def start_detached_watchdog(session: str) -> int:
    """Start the watchdog for ``session`` as a grandchild in its own session; returns the
    write end of its stdin (closed when this process dies, however it dies)."""
    read_end, write_end = os.pipe()
    intermediate = subprocess.Popen([sys.executable, "-I", "-S", "-c", _DOUBLE_FORK, *watchdog_command(session)],
                                    stdin=read_end,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    os.close(read_end)
    intermediate.wait()
    return write_end


class FolderNotSharedError(FileNotFoundError):
    """The slot's node does not see the experiment's folder: no trial can start there."""


class TrialSlot:
    """The actor (``ray.remote(TrialSlot)``, options set by the driver); see the module docstring."""

    def __init__(self, session: str) -> None:
        self._session = session
        self._host = ray.util.get_node_ip_address()
        self._node_id = ray.get_runtime_context().get_node_id()
        self._watchdog = start_detached_watchdog(session)
        self._process: subprocess.Popen | None = None
        self._running: tuple[str, int] | None = None
        self._exits: dict[tuple[str, int], asyncio.Future] = {}
        self._relay: asyncio.Server | None = None
        self._relay_port = 0
        self._report_path = b""
        self._requests: asyncio.Queue[tuple[int, bytes, bytes, bytes]] | None = None
        self._answers: dict[int, asyncio.Future] = {}
        self._next_request = 0
        self._output: OutputPump | None = None
        self._node_files = NodeTrialFiles()

    def host(self) -> str:
        return self._host

    def node(self) -> tuple[str, str]:
        """(this node's address, its Ray node id)."""
        return self._host, self._node_id

    def free_port(self) -> int:
        """A TCP port free on this node now: a multi-node trial's MASTER_PORT, on rank 0's node."""
        with socket.socket() as probe:
            probe.bind(("", 0))
            return probe.getsockname()[1]

    async def start_trial(self, spec: dict[str, Any]) -> tuple[int, float | None, str, str]:
        """Start one attempt (``spec``: trial_id, attempt, command, code_directory, trial_dir,
        env); returns (pid, its start time, this node's address, its Ray node id). Raises if
        it cannot."""
        await self._start_relay()
        trial_id, attempt = spec["trial_id"], spec["attempt"]
        code_directory = spec["code_directory"]
        if spec.get("storage") is not None:  # no shared folder: the node's own (ray_node_files)
            files = await self._node_files.prepare(spec)
            spec = {**spec, "env": {**spec["env"], trial_api.ENV_TRIAL_DIR: str(files.root)}}
            code_directory = code_directory or os.getcwd()  # the runtime env's working_dir: the code's copy
        else:
            files = TrialFolder(Path(spec["trial_dir"]))
            if not files.parameter_file.is_file():
                raise FolderNotSharedError(
                    f"node {self._host} does not see the trial's folder {files.root} (no parameter.json): the Ray "
                    "service needs the experiment's folder on a filesystem every node shares at the same path")
        env = dict(os.environ)
        env.pop(trial_api.ENV_MANAGER_SOCKET, None)  # a Ray trial reports through this slot's relay alone
        env["PYTHONPATH"] = trial_api.trial_pythonpath(env.get("PYTHONPATH"))
        env.update(spec["env"])
        env.update(trial_api.nni_environment(spec["env"], code_directory))
        if spec.get("trial_python", "ray") == "ray":  # python/python3: this worker's (the driver's, the runtime env's)
            env["PATH"] = with_interpreter_first(sys.executable, env.get("PATH", ""))
        # Reports go to this slot's relay; the trial's URL prefix is the manager's, kept.
        env[trial_api.ENV_MANAGER_HOST] = "127.0.0.1"
        env[trial_api.ENV_MANAGER_PORT] = str(self._relay_port)
        # What Ray assigned, and none with no GPU asked (Ray 2.60 leaves the variable alone then).
        gpus = ray.get_runtime_context().get_accelerator_ids().get("GPU", [])
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
        marker = trial_marker(self._session, trial_id, attempt)
        env[MARKER_ENV] = marker
        # A multi-node trial's rank k writes rank<k>.stdout, rank<k>.stderr (ray_group).
        rank = int(spec["env"].get(trial_api.ENV_TRIAL_RANK, "0"))
        try:
            output = self._output_pump(spec).open(files.root / trial_api.rank_file_name("stdout", rank),
                                                  files.root / trial_api.rank_file_name("stderr", rank))
            try:
                process = spawn_trial(spec["command"], code_directory, env, output.stdout, output.stderr)
            finally:
                output.close_child_ends()
        except BaseException:
            self._node_files.discard(trial_id, attempt)  # never started: its node folder goes
            raise
        self._process, self._running = process, (trial_id, attempt)
        self._report_path = (env.get(trial_api.ENV_MANAGER_URL_PREFIX, "")
                             + trial_api.METRICS_ROUTE.format(trial_id=trial_id)).encode()
        self._tell_watchdog(f"+{process.pid} {marker}")
        self._exits[(trial_id, attempt)] = asyncio.ensure_future(self._wait(process, output, (trial_id, attempt)))
        return process.pid, process_start_time(process.pid), self._host, self._node_id

    def _output_pump(self, spec: dict[str, Any]) -> OutputPump:
        """The pump of this slot's trials' output, bounded as the experiment says."""
        if self._output is None:
            self._output = OutputPump(RotationLimits.from_env(spec.get("log_limits")) or UNBOUNDED,
                                      on_error=lambda message: print(f"expmgr: trial output: {message}",
                                                                     file=sys.stderr, flush=True))
            self._output.start()
        return self._output

    async def _wait(self, process: subprocess.Popen, output: TrialOutput, key: tuple[str, int]) -> int:
        returncode = await exit_of(process)
        kill_group(process.pid, signals.SIGKILL)  # what the trial left in its group goes with it
        self._tell_watchdog(f"-{process.pid}")
        await output.drained(OUTPUT_DRAIN_TIMEOUT)  # its last output is in its files before its end is told
        await self._node_files.finish(*key)  # its checkpoint stored before its end is told (no shared folder)
        if self._process is process:
            self._process, self._running, self._report_path = None, None, b""
        return returncode

    async def wait_trial(self, trial_id: str, attempt: int) -> int:
        """The attempt's return code (negative: killed by that signal), once it has exited;
        asking again gives the same answer."""
        return await asyncio.shield(self._exits[(trial_id, attempt)])

    async def take_output(self, trial_id: str, attempt: int, timeout: float = 10.0) -> dict[str, Any]:
        """Without a shared folder: what the attempt wrote since the last call, as soon as there
        is some; ``done`` once it ended and all was taken (``NodeTrialFiles.take``)."""
        return await self._node_files.take(trial_id, attempt, timeout)

    def signal(self, trial_id: str, signum: int) -> bool:
        """Send ``signum`` to the trial's whole group; False if it is not running here."""
        process = self._process
        if process is None or self._running is None or self._running[0] != trial_id:
            return False
        return kill_group(process.pid, signum)

    async def take_requests(self, timeout: float = 30.0) -> list[tuple[int, bytes, bytes, bytes]]:
        """Reports waiting for the manager, as (request id, path, token, body): at least
        one, or none after ``timeout`` seconds."""
        queue = self._request_queue()
        taken: list[tuple[int, bytes, bytes, bytes]] = []
        try:
            taken.append(await asyncio.wait_for(queue.get(), timeout))
        except asyncio.TimeoutError:
            return taken
        while not queue.empty() and len(taken) < MAX_WAITING_REPORTS:
            taken.append(queue.get_nowait())
        return taken

    def answer(self, answers: list[tuple[int, int, bytes]]) -> None:
        """The manager's answers, as (request id, HTTP status, body)."""
        for request_id, status, body in answers:
            waiter = self._answers.pop(request_id, None)
            if waiter is not None and not waiter.done():
                waiter.set_result((status, body))

    def _request_queue(self) -> asyncio.Queue[tuple[int, bytes, bytes, bytes]]:
        if self._requests is None:
            self._requests = asyncio.Queue()
        return self._requests

    async def _start_relay(self) -> None:
        if self._relay is None:
            self._relay = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=_MAX_HEAD_BYTES)
            self._relay_port = self._relay.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One report: read within bounds, hand to the driver, answer with the manager's answer."""
        try:
            status, body = await self._relay_one(reader)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, asyncio.TimeoutError):
            status, body = 400, b'{"error": "not a complete HTTP request within bounds"}'
        except ConnectionError:
            writer.close()
            return
        head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        try:
            writer.write(head + body)
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def _relay_one(self, reader: asyncio.StreamReader) -> tuple[int, bytes]:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _READ_TIMEOUT)
        request_line, *header_lines = head[:-4].split(b"\r\n")
        method, path, _version = request_line.split(b" ", 2)
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        if method != b"POST" or not self._report_path or path != self._report_path:
            return 404, b'{"error": "this relay takes the running trial\'s metric reports only"}'
        length = int(headers.get(b"content-length", b"-1"))
        if not 0 <= length <= _MAX_BODY_BYTES:
            return 413, b'{"error": "a report is at most %d bytes"}' % trial_api.MAX_REPORT_BYTES
        body = await asyncio.wait_for(reader.readexactly(length), _READ_TIMEOUT)
        token = headers.get(trial_api.TOKEN_HEADER.lower().encode(), b"")
        queue = self._request_queue()
        if len(self._answers) >= MAX_WAITING_REPORTS:
            return 503, b'{"error": "too many reports wait for the manager; kept in metrics.jsonl"}'
        self._next_request += 1
        request_id = self._next_request
        waiter = asyncio.get_running_loop().create_future()
        self._answers[request_id] = waiter
        queue.put_nowait((request_id, path, token, body))
        try:
            return await asyncio.wait_for(waiter, _ANSWER_TIMEOUT)
        except asyncio.TimeoutError:
            return 504, b'{"error": "the manager did not answer in time; the report is kept in metrics.jsonl"}'
        finally:
            self._answers.pop(request_id, None)

    def _tell_watchdog(self, line: str) -> None:
        try:
            os.write(self._watchdog, (line + "\n").encode())
        except OSError:
            pass  # a dead watchdog must not fail the trial
