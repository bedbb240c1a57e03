"""One host of the remote training service, as the service keeps it: its SSH connection, its
experiment folder (``~/.expmgr/<exp_id>/`` with ``runtime/``, ``code/``, ``trials/<id>/``), the
ports forwarded from its loopback to the manager, its agent and the attempts running there::

    host = RemoteHost(machine, experiment_id="abc123", events=listener, folder_of=files.folder_of)
    await host.connect(code_directory)     # RemoteHostError (one line, names the host)
    port = await host.report_port("127.0.0.1", 8080)   # the host's 127.0.0.1:port -> the server
    await host.client.launch(HostLaunch(...))
    await host.close(timeout=10.0)

A host whose agent's stream ends (connection lost, host down) tells ``on_gone``; the service
then reconnects it (``connect`` again: a new connection, agent and forwarding, the code sent
again, as the host may have lost it).
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import secrets
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from expmgr.config import ResolvedRemoteMachine
from expmgr.layout import TrialFolder
from expmgr.rotation import UNBOUNDED, RotationLimits
from expmgr.training.local import GPU_POLL_INTERVAL
from expmgr.training.remote._report_relay import ReportRelay
from expmgr.training.remote.agent_client import AgentClient, AttemptEvents, KeptOnHost
from expmgr.training.remote.host_gpus import HostGpus
from expmgr.training.remote.runtime import agent_command, runtime_files
from expmgr.training.remote.ssh import (DEFAULT_PORT, HostConnection, RemoteHostError, RemoteProcess, SshTarget,
                                        StrictHostKeyChecking)

HOST_FOLDER = ".expmgr"
"""Below the user's home on each host: one folder per experiment."""
_HOME_TIMEOUT = 60.0
_KEPT_TIMEOUT = 60.0
"""How long a connection waits for its agent to tell what the run before left there (a /proc scan)."""
_CATCH_UP_BYTES = 600 * 1024
"""At most this much of the kept trials' reports is read at a resume's start (what is past it
comes with their output once adopted)."""
_CATCH_UP = (
    "import base64, json, sys\n"
    "wanted, left, found = json.loads(sys.argv[1]), int(sys.argv[2]), {}\n"
    "for path, offset in wanted.items():\n"
    "    try:\n"
    "        with open(path, 'rb') as file:\n"
    "            file.seek(offset)\n"
    "            data = file.read(left)\n"
    "    except OSError:\n"
    "        continue\n"
    "    data = data[:data.rfind(b'\\n') + 1]\n"
    "    left -= len(data)\n"
    "    found[path] = base64.b64encode(data).decode()\n"
    "print(json.dumps(found))\n")
"""Run on the host: what each file has past its offset, whole lines only, base64, as JSON."""
STATE_FOLDER = "watchdog"
"""In the experiment's folder on the host: the agent's watchdog's record and state files (a window)."""
CHECKPOINT_SIZE_LIMIT = 100 * 2**30
CHECKPOINT_FILE_LIMIT = 1_000_000
"""A checkpoint copied between hosts (not the code folder's limits: model weights are large)."""


def host_label(machine: ResolvedRemoteMachine) -> str:
    """How trials' hosts are stored and shown (the Node column, ``trial ls``): the machine's
    ``host``, with its port when not SSH's 22 (two machines may share an address)."""
    return machine.host if machine.port == DEFAULT_PORT else f"{machine.host}:{machine.port}"


def ssh_target(machine: ResolvedRemoteMachine) -> SshTarget:
    """The machine as the SSH transport logs in to it (port 22 left to the ssh config's ``Port``)."""
    checking: StrictHostKeyChecking = "accept-new" if machine.strict_host_key_checking == "accept-new" else "yes"
    return SshTarget(host=machine.host, port=None if machine.port == DEFAULT_PORT else machine.port,
                     user=machine.user, key_file=machine.ssh_key_file, password=machine.password,
                     passphrase=machine.ssh_passphrase, python_path=machine.python_path,
                     strict_host_key_checking=checking)


class RemoteHost:
    """See the module docstring. ``events`` hears each attempt's start and end (the service's
    bookkeeping, then the runner); ``on_gone`` is called when the agent's stream ended
    without ``close()``."""

    def __init__(self, machine: ResolvedRemoteMachine, *, experiment_id: str, events: AttemptEvents,
                 folder_of: Callable[[str], TrialFolder], on_gone: Callable[[RemoteHost], None],
                 trial_gpu_number: int | None = None, on_gpus_changed: Callable[[], None] = lambda: None,
                 log_limits: RotationLimits = UNBOUNDED, log: logging.Logger | None = None,
                 reattach_window: float = 0.0) -> None:
        self.machine = machine
        self.reattach_window = reattach_window
        self.kept = KeptOnHost()
        """What the run before left here, as this connection's agent found it (a window)."""
        self.label = host_label(machine)
        self.experiment_id = experiment_id
        self._events = events
        self._folder_of = folder_of
        self._on_gone = on_gone
        self._log_limits = log_limits
        self._log = log or logging.getLogger("nni.training.remote")
        self.connection: HostConnection | None = None
        self.client: AgentClient | None = None
        self._agent: RemoteProcess | None = None
        self._watcher: asyncio.Task | None = None
        self.folder = ""
        """The experiment's folder on the host (absolute), once connected."""
        self._code_folders: dict[Path, str] = {}
        self._report_ports: dict[tuple[str, int], int] = {}
        self._lock = asyncio.Lock()
        self.running: set[str] = set()
        """Trial ids of the attempts launched here and not ended."""
        self.trial_pids: dict[str, int] = {}
        """The host's pid (and process group) of each running trial that started."""
        self._trial_gpu_number = trial_gpu_number
        self._on_gpus_changed = on_gpus_changed
        self.gpus: HostGpus | None = None
        """Its GPU slots when trials ask for GPUs (``trialGpuNumber`` > 0)."""
        self._gpu_watch: asyncio.Task | None = None

    @property
    def connected(self) -> bool:
        """Trials can be launched here now."""
        return self.client is not None and self.client.connected

    def has_room(self) -> bool:
        """Connected, and one more trial would get its GPUs here."""
        return self.connected and (self.gpus is None or self.gpus.scheduler.available())

    async def connect(self, code_directory: Path) -> None:
        """Log in, check Python, send the runtime and ``code_directory``, start the agent."""
        connection = await HostConnection.connect(ssh_target(self.machine))
        try:
            home = await connection.run('printf "%s" "$HOME"', timeout=_HOME_TIMEOUT)
            if home.exit_status != 0 or not home.stdout.startswith("/"):
                raise RemoteHostError(connection.name, f"cannot find the user's home folder ({home.stderr.strip()})")
            self.folder = f"{home.stdout}/{HOST_FOLDER}/{self.experiment_id}"
            self.connection = connection
            self._code_folders, self._report_ports = {}, {}
            if self._trial_gpu_number:
                self.gpus = await HostGpus.start(connection, self.machine, self._trial_gpu_number)
            await self._upload_runtime()
            await self.code_folder(code_directory)
            runtime = f"{self.folder}/runtime"
            argv = agent_command("python3", runtime, f"{self.experiment_id}-{secrets.token_hex(4)}",
                                 self.reattach_window, f"{self.folder}/{STATE_FOLDER}")
            self._agent = await connection.open_process(shlex.join(argv))
        except BaseException:
            self.connection = None
            await connection.close()
            raise
        client = AgentClient(self._agent.stdout, self._agent.stdin, host=self.label, folder_of=self._folder_of,
                             events=self._events, log_limits=self._log_limits, log=self._log)
        client.start()
        self.client = client
        if self.reattach_window > 0:
            self.kept = await client.wait_kept(_KEPT_TIMEOUT)
        self._watcher = asyncio.get_running_loop().create_task(self._watch(client))
        if self.gpus is not None and self.gpus.watched:
            self._gpu_watch = asyncio.get_running_loop().create_task(self._watch_gpus(self.gpus))

    async def code_folder(self, code_directory: Path) -> str:
        """``code_directory``'s copy on the host, sent the first time it is asked for."""
        async with self._lock:
            if code_directory not in self._code_folders:
                remote = f"{self.folder}/code" if not self._code_folders else \
                    f"{self.folder}/code-{len(self._code_folders)}"
                await self._connection().upload(code_directory, remote)
                self._code_folders[code_directory] = remote
            return self._code_folders[code_directory]

    async def report_port(self, manager_host: str, manager_port: int) -> int:
        """The port of the host's loopback whose reports reach the manager's server at
        ``manager_host:manager_port`` (``_report_relay``)."""
        async with self._lock:
            key = (manager_host, manager_port)
            if key not in self._report_ports:
                self._report_ports[key] = await self._connection().serve_remote_port(
                    ReportRelay(manager_host, manager_port))
            return self._report_ports[key]

    def trial_folder(self, trial_id: str) -> str:
        return f"{self.folder}/trials/{trial_id}"

    def checkpoint_folder(self, trial_id: str) -> str:
        return f"{self.trial_folder(trial_id)}/checkpoint"

    async def copy_checkpoint_to(self, target: RemoteHost, trial_id: str) -> bool:
        """Copy the trial's checkpoint folder from this host to ``target`` (replacing what it
        had there), through this machine; False when there is none here."""
        staging = Path(tempfile.mkdtemp(prefix="expmgr-checkpoint-"))
        try:
            if not await self._connection().download(self.checkpoint_folder(trial_id), staging / "checkpoint"):
                return False
            await target.run(f"rm -rf {shlex.quote(target.checkpoint_folder(trial_id))}")
            await target._connection().upload(staging / "checkpoint", target.checkpoint_folder(trial_id),
                                              size_limit=CHECKPOINT_SIZE_LIMIT, file_limit=CHECKPOINT_FILE_LIMIT)
            return True
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    async def run(self, command: str) -> None:
        """Run a command on the host; RemoteHostError if it fails."""
        connection = self._connection()
        result = await connection.run(command, timeout=_HOME_TIMEOUT)
        if result.exit_status != 0:
            raise RemoteHostError(connection.name, f"`{command}` failed: {result.stderr.strip()[-500:]}")

    async def close(self, timeout: float) -> None:
        """Stop the agent (it kills what runs there, telling each end), then the connection.
        Idempotent; ``on_gone`` is not called."""
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.cancel()
        self._stop_gpu_watch()
        client, self.client = self.client, None
        if client is not None:
            await client.stop(timeout)
        connection, self.connection = self.connection, None
        if connection is not None:
            await connection.close()

    async def leave(self) -> None:
        """Close the connection without stopping the agent or telling any end: with a window,
        it keeps its trials for a resume. Idempotent; ``on_gone`` is not called."""
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.cancel()
        self._stop_gpu_watch()
        client, self.client = self.client, None
        if client is not None:
            client.let_go()
        self.running.clear()
        self.trial_pids.clear()
        connection, self.connection = self.connection, None
        if connection is not None:
            await connection.close()

    async def catch_up_reports(self) -> None:
        """The reports the run before's trials made while no manager ran (their metrics.jsonl
        on the host, past the manager's copy), appended to the copies before any is adopted:
        the resume stores them at the takeover, as the local service's."""
        trial_ids = {each.trial_id for each in self.kept.processes} | {trial_id for trial_id, _ in self.kept.statuses}
        wanted: dict[str, tuple[int, Path]] = {}
        for trial_id in sorted(trial_ids):
            local = self._folder_of(trial_id).root / "metrics.jsonl"
            try:
                size = local.stat().st_size
            except OSError:
                size = 0
            wanted[f"{self.trial_folder(trial_id)}/metrics.jsonl"] = (size, local)
        if not wanted:
            return
        try:
            await self._catch_up(wanted)
        except RemoteHostError as error:
            self._log.warning("host %s: the reports its trials made while no manager ran are stored when they "
                              "end: %s", self.label, error)

    async def _catch_up(self, wanted: dict[str, tuple[int, Path]]) -> None:
        argument = json.dumps({path: size for path, (size, _) in wanted.items()})
        result = await self._connection().run(
            f"python3 -I -S -c {shlex.quote(_CATCH_UP)} {shlex.quote(argument)} {_CATCH_UP_BYTES}",
            timeout=_HOME_TIMEOUT)
        try:
            found = json.loads(result.stdout) if result.exit_status == 0 else {}
            for path, data in dict(found).items():
                if path in wanted and data:
                    local = wanted[path][1]
                    local.parent.mkdir(parents=True, exist_ok=True)
                    with local.open("ab") as file:
                        file.write(base64.b64decode(data, validate=True))
        except (ValueError, TypeError, binascii.Error, OSError) as error:
            self._log.warning("host %s: the reports its trials made while no manager ran are stored when they "
                              "end: %s", self.label, error)

    def _stop_gpu_watch(self) -> None:
        watch, self._gpu_watch = self._gpu_watch, None
        if watch is not None:
            watch.cancel()

    async def _watch_gpus(self, gpus: HostGpus) -> None:
        """Ask the host which GPUs others use, every GPU_POLL_INTERVAL seconds (as the local
        service does), and say when that frees or takes one."""
        while True:
            await asyncio.sleep(GPU_POLL_INTERVAL)
            try:
                changed = await gpus.refresh(set(self.trial_pids.values()))
            except Exception as error:  # the host's trouble: its connection's end is told elsewhere
                self._log.warning("host %s: asking for its GPUs failed: %s", self.label, error)
                continue
            if changed:
                self._on_gpus_changed()

    def _connection(self) -> HostConnection:
        if self.connection is None:
            raise RemoteHostError(f"host {self.label}", "not connected")
        return self.connection

    async def _upload_runtime(self) -> None:
        """The agent, the watchdog and the trial API, through a local folder of them."""
        staging = Path(tempfile.mkdtemp(prefix="expmgr-runtime-"))
        try:
            for relative, local in runtime_files():
                (staging / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(local, staging / relative)
            await self._connection().upload(staging, f"{self.folder}/runtime")
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    async def _watch(self, client: AgentClient) -> None:
        """Until the agent's stream ends; then (not closed by us) the host is gone."""
        waiter = asyncio.ensure_future(client.wait_closed())
        try:
            await asyncio.wait([waiter])
        finally:
            waiter.cancel()
        if not waiter.cancelled() and waiter.exception() is not None:
            self._log.warning("host %s: reading its agent failed: %s", self.label, waiter.exception())
        if self.client is not client:
            return  # closed by us
        self.client, self._watcher = None, None
        self._stop_gpu_watch()
        client.close()
        connection, self.connection = self.connection, None
        if connection is not None:
            try:
                await connection.close()
            except Exception as error:  # the connection is gone anyway
                self._log.debug("host %s: closing its connection: %s", self.label, error)
        self._on_gone(self)
