"""One SSH connection to a remote host (NNI's ``platform: remote``), made the way the user's
own ``ssh`` makes it, and what the remote training service does over it: send the code
folder, forward a port of the host's loopback to the manager, run a command, drive a
long-lived process over its stdin/stdout.

    target = SshTarget(host="gpu1", user="bob", key_file=Path("~/.ssh/id_ed25519").expanduser())
    connection = await HostConnection.connect(target)     # RemoteHostError: one line, names the host
    await connection.upload(code_dir, "expmgr/abc123/code")
    port = await connection.forward_remote_port(8080)     # host's 127.0.0.1:port -> our 127.0.0.1:8080
    result = await connection.run("nvidia-smi --query-gpu=index,uuid --format=csv,noheader")
    agent = await connection.open_process("python3 -u agent.py")   # agent.stdin, agent.stdout
    await connection.close()

asyncssh (in this process, on the manager's asyncio loop): the user's ``~/.ssh/config`` (Host
aliases, HostName, Port, User, IdentityFile, ProxyJump), the agent at ``SSH_AUTH_SOCK``,
passwords (NNI's ``password``), host keys checked against ``known_hosts``: an unknown key is
refused unless ``strict_host_key_checking="accept-new"``, which records it on first use; a
changed key is always refused. For the target host the experiment's fields decide
(``known_hosts``, ``strict_host_key_checking``), not the ssh config's ``UserKnownHostsFile`` or
``StrictHostKeyChecking``; ProxyJump hosts are checked as the ssh config says (asyncssh's own
connection, as OpenSSH checks them). No pseudo-terminal is asked for: when the connection ends (the
manager closes it, or dies and its kernel closes the socket), sshd closes each session's pipes
and the remote processes read end-of-file on stdin, which the host agent takes as its cue.
"""
from __future__ import annotations

import asyncio
import os
import re
import shlex
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable, Literal

import asyncssh

from expmgr.training.remote._nniignore import CodeFolderError, code_files

DEFAULT_PORT = 22
MIN_PYTHON = (3, 8)
"""The oldest Python the host agent runs on (NNI's remote hosts run 3.7+; ours need 3.8)."""
UPLOAD_SIZE_LIMIT = 300 * 2**20
"""NNI's limit on a code folder sent to remote hosts (300 MB)."""
UPLOAD_FILE_LIMIT = 2000
"""NNI's limit on the number of files and folders of a code folder sent to remote hosts."""
RUN_OUTPUT_LIMIT = 1 * 2**20
"""Bytes of stdout (and of stderr) ``run()`` keeps by default."""
STDERR_TAIL = 64 * 1024
"""Bytes of a long-lived process's stderr kept (its last words, for an error message)."""
CONNECT_TIMEOUT = 30.0
"""Seconds to reach a host and log in (TCP, key exchange, authentication)."""
KEEPALIVE_INTERVAL = 15.0
KEEPALIVE_COUNT_MAX = 4
"""A host silent for interval * count seconds (a dead network) counts as gone."""
_UPLOAD_CONCURRENCY = 16

StrictHostKeyChecking = Literal["yes", "accept-new"]


class RemoteHostError(Exception):
    """A host cannot be used: unreachable, login refused, host key unknown or changed, no
    usable Python, an upload or a command that failed. One line, naming the host."""

    def __init__(self, host: str, message: str) -> None:
        super().__init__(f"{host}: {message}")
        self.host = host


def _home_ssh(name: str) -> Path:
    return Path.home() / ".ssh" / name


@dataclass(frozen=True)
class SshTarget:
    """Where and how to log in: one entry of NNI's ``machineList``, plus the client side."""

    host: str
    """A host name, an address, or a ``Host`` alias of the ssh config."""
    port: int | None = None
    """None: the ssh config's ``Port`` for the host, else 22."""
    user: str | None = None
    """None: the ssh config's ``User``, else the local user name."""
    key_file: Path | None = None
    """NNI's ``sshKeyFile``. None: the ssh config's ``IdentityFile``, the agent, ~/.ssh/id_*."""
    password: str | None = None
    passphrase: str | None = None
    """Of an encrypted ``key_file``."""
    python_path: str | None = None
    """NNI's ``pythonPath``: a folder put first on PATH for every command run on the host."""
    strict_host_key_checking: StrictHostKeyChecking = "yes"
    known_hosts: Path = field(default_factory=lambda: _home_ssh("known_hosts"))
    ssh_config: Path = field(default_factory=lambda: _home_ssh("config"))

    @property
    def name(self) -> str:
        """How errors name the host: ``host gpu1`` or ``host 10.0.0.5:2222``."""
        return f"host {self.host}" + (f":{self.port}" if self.port is not None else "")


@dataclass(frozen=True)
class CommandResult:
    """What a command run on a host ended with; ``exit_status`` is -N after signal N."""

    exit_status: int
    stdout: str
    stderr: str


class RemoteProcess:
    """A process started on a host by ``open_process``: its stdin and stdout as asyncio
    streams of bytes (``await stdout.readline()``, ``stdin.write(b); await stdin.drain()``);
    its stderr is read aside, the last STDERR_TAIL bytes kept in ``stderr_tail()``."""

    def __init__(self, process: asyncssh.SSHClientProcess[bytes]) -> None:
        self._process = process
        self.stdin: asyncssh.SSHWriter[bytes] = process.stdin
        self.stdout: asyncssh.SSHReader[bytes] = process.stdout
        self._stderr = bytearray()
        self._stderr_reader = asyncio.ensure_future(self._read_stderr())

    async def wait(self) -> int | None:
        """Wait until the process ends; its exit status (-N after signal N), or None when
        the connection ended first and nothing was said."""
        await self._process.wait_closed()
        await self._stderr_reader
        return self._process.returncode

    def close(self) -> None:
        """Close the session: the remote process reads end-of-file on stdin."""
        self._process.close()

    def stderr_tail(self) -> str:
        return self._stderr.decode(errors="replace")

    async def _read_stderr(self) -> None:
        try:
            while chunk := await self._process.stderr.read(65536):
                self._stderr += chunk
                del self._stderr[:-STDERR_TAIL]
        except (asyncssh.Error, OSError):
            pass


class HostConnection:
    """An open SSH connection to one host: ``await HostConnection.connect(target)``, then
    ``upload``, ``forward_remote_port``, ``run``, ``open_process``; ``close()`` (idempotent)."""

    def __init__(self, target: SshTarget, connection: asyncssh.SSHClientConnection) -> None:
        self.target = target
        self.name = _connected_name(target, connection)
        """``host gpu1 (127.0.0.1:2222)``: the host as given and the address reached."""
        self._connection = connection
        self._listeners: list[asyncssh.SSHListener] = []

    @classmethod
    async def connect(cls, target: SshTarget, *, connect_timeout: float = CONNECT_TIMEOUT,
                      keepalive_interval: float = KEEPALIVE_INTERVAL,
                      check_python: bool = True) -> HostConnection:
        """Log in to the host and check that ``python3`` (on ``pythonPath`` first) is there
        and recent enough; RemoteHostError otherwise."""
        checker = _HostKeyChecker(target)
        options: dict[str, object] = {
            "known_hosts": checker.trusted_keys,
            "client_factory": lambda: _Client(checker),
            "connect_timeout": connect_timeout,
            "keepalive_interval": keepalive_interval,
            "keepalive_count_max": KEEPALIVE_COUNT_MAX,
        }
        if target.user is not None:
            options["username"] = target.user
        if target.key_file is not None:
            options["client_keys"] = [str(target.key_file)]
        if target.passphrase is not None:
            options["passphrase"] = target.passphrase
        if target.password is not None:
            options["password"] = target.password
        try:
            connection = await asyncssh.connect(
                target.host, target.port if target.port is not None else (),
                config=[str(target.ssh_config)] if target.ssh_config.is_file() else [], **options)
        except (OSError, asyncssh.Error, ValueError, asyncio.TimeoutError) as error:
            raise RemoteHostError(target.name, _connect_failure(target, checker, error, connect_timeout)) from None
        host = cls(target, connection)
        if check_python:
            try:
                await host._check_python()
            except BaseException:
                await host.close()
                raise
        return host

    # -- files ---------------------------------------------------------------------------

    async def upload(self, local_dir: Path, remote_dir: str, *, size_limit: int = UPLOAD_SIZE_LIMIT,
                     file_limit: int = UPLOAD_FILE_LIMIT) -> int:
        """Copy ``local_dir`` to ``remote_dir`` on the host (relative: to the user's home) by
        SFTP, less what its ``.nniignore`` excludes; modes and times kept, links sent as
        links. The folder is measured first: past ``size_limit`` bytes or ``file_limit``
        entries, RemoteHostError before anything is sent. Returns the bytes sent."""
        try:
            files = await asyncio.get_running_loop().run_in_executor(
                None, lambda: code_files(local_dir, size_limit=size_limit, file_limit=file_limit))
        except CodeFolderError as error:
            raise RemoteHostError(self.name, f"cannot upload: {error}") from None
        remote = remote_dir.rstrip("/") or "/"
        try:
            async with self._connection.start_sftp_client() as sftp:
                await sftp.makedirs(remote, exist_ok=True)
                for folder in files.folders:  # in walk order: parents first
                    await sftp.makedirs(f"{remote}/{folder}", exist_ok=True)
                for link in files.links:
                    target = os.readlink(local_dir / link)
                    if await sftp.lexists(f"{remote}/{link}"):
                        await sftp.remove(f"{remote}/{link}")
                    await sftp.symlink(target, f"{remote}/{link}")
                slots = asyncio.Semaphore(_UPLOAD_CONCURRENCY)

                async def put(relative: str) -> None:
                    async with slots:
                        await sftp.put(str(local_dir / relative), f"{remote}/{relative}", preserve=True)

                await asyncio.gather(*(put(relative) for relative in files.files))
        except (asyncssh.SFTPError, asyncssh.Error, OSError) as error:
            raise RemoteHostError(self.name, f"upload of {local_dir} to {remote} failed: {_reason(error)}") from None
        return files.total_bytes

    async def download(self, remote_dir: str, local_dir: Path) -> bool:
        """Copy the host's folder ``remote_dir`` to ``local_dir`` (which must not exist) by
        SFTP, modes and times kept; False when the host has no such folder."""
        try:
            async with self._connection.start_sftp_client() as sftp:
                if not await sftp.isdir(remote_dir):
                    return False
                await sftp.get(remote_dir, str(local_dir), preserve=True, recurse=True)
        except (asyncssh.SFTPError, asyncssh.Error, OSError) as error:
            raise RemoteHostError(self.name, f"download of {remote_dir} failed: {_reason(error)}") from None
        return True

    # -- ports ---------------------------------------------------------------------------

    async def forward_remote_port(self, local_port: int) -> int:
        """Listen on a free port of the host's loopback; each connection to it reaches
        127.0.0.1:``local_port`` here, through this connection. Returns the host's port.
        The forwarding ends with the connection."""
        try:
            listener = await self._connection.forward_remote_port("127.0.0.1", 0, "127.0.0.1", local_port)
        except (asyncssh.Error, asyncssh.ChannelListenError, OSError) as error:
            raise RemoteHostError(self.name, f"the host refused to forward a port to this machine "
                                             f"({_reason(error)}); is AllowTcpForwarding off in its sshd_config?") from None
        self._listeners.append(listener)
        return listener.get_port()

    async def serve_remote_port(self, handler: Callable[[asyncssh.SSHReader[bytes], asyncssh.SSHWriter[bytes]],
                                                        Awaitable[None]]) -> int:
        """Listen on a free port of the host's loopback; each connection to it is handed to
        ``handler`` (its byte streams) here, in this process: nothing listens on this machine.
        Returns the host's port. The listening ends with the connection."""
        try:
            listener = await self._connection.start_server(lambda _host, _port: handler, "127.0.0.1", 0,
                                                           encoding=None)
        except (asyncssh.Error, asyncssh.ChannelListenError, OSError) as error:
            raise RemoteHostError(self.name, f"the host refused to forward a port to this machine "
                                             f"({_reason(error)}); is AllowTcpForwarding off in its sshd_config?") from None
        self._listeners.append(listener)
        return listener.get_port()

    # -- commands ------------------------------------------------------------------------

    async def run(self, command: str, *, output_limit: int = RUN_OUTPUT_LIMIT,
                  timeout: float | None = None) -> CommandResult:
        """Run a shell command on the host (``pythonPath`` first on its PATH), stdin empty;
        wait for its end. Output past ``output_limit`` bytes on either stream, or no end
        within ``timeout`` s, closes the session and raises RemoteHostError."""
        try:
            process = await self._connection.create_process(
                self._shell(command), encoding=None, stdin=asyncssh.DEVNULL)
        except (asyncssh.Error, OSError) as error:
            raise RemoteHostError(self.name, f"cannot run `{command}`: {_reason(error)}") from None
        try:
            stdout, stderr = await asyncio.wait_for(asyncio.gather(
                _read_bounded(process.stdout, output_limit), _read_bounded(process.stderr, output_limit)), timeout)
            await process.wait_closed()
        except _OutputLimit as error:
            raise RemoteHostError(self.name, f"`{command}` wrote more than {error.limit} bytes") from None
        except asyncio.TimeoutError:
            raise RemoteHostError(self.name, f"`{command}` did not end within {timeout} s") from None
        except (asyncssh.Error, OSError) as error:
            raise RemoteHostError(self.name, f"`{command}` failed: {_reason(error)}") from None
        finally:
            process.close()
        status = process.returncode
        if status is None:
            raise RemoteHostError(self.name, f"`{command}` ended without an exit status (connection lost?)")
        return CommandResult(status, stdout.decode(errors="replace"), stderr.decode(errors="replace"))

    async def open_process(self, command: str) -> RemoteProcess:
        """Start a long-lived shell command on the host (``pythonPath`` first on its PATH)
        and hand back its stdin and stdout. No terminal: binary-safe streams; when this
        connection ends, the process reads end-of-file on stdin (and SIGPIPE on writes)."""
        try:
            process = await self._connection.create_process(self._shell(command), encoding=None)
        except (asyncssh.Error, OSError) as error:
            raise RemoteHostError(self.name, f"cannot start `{command}`: {_reason(error)}") from None
        return RemoteProcess(process)

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._connection.is_closed()

    async def wait_closed(self) -> None:
        """Return when the connection has ended, by ``close()`` or by the host going away."""
        await self._connection.wait_closed()

    async def close(self) -> None:
        """End the connection (every session and forwarding with it). Safe to call again."""
        self._connection.close()
        await self._connection.wait_closed()

    def _shell(self, command: str) -> str:
        if self.target.python_path:
            return f"export PATH={shlex.quote(self.target.python_path)}:\"$PATH\" && {command}"
        return command

    async def _check_python(self) -> None:
        where = f" (pythonPath {self.target.python_path})" if self.target.python_path else ""
        result = await self.run("python3 -c 'import sys; print(tuple(sys.version_info[:2]))'", timeout=60)
        found = re.fullmatch(r"\((\d+), (\d+)\)\s*", result.stdout)
        if result.exit_status == 127:
            raise RemoteHostError(self.name, f"no python3 on the PATH{where}; install Python >= "
                                             f"{_version(MIN_PYTHON)} or set pythonPath to the folder of one")
        if result.exit_status != 0 or not found:
            last = (result.stderr.strip().splitlines() or [f"exit status {result.exit_status}"])[-1]
            raise RemoteHostError(self.name, f"python3{where} does not run: {last}")
        version = (int(found.group(1)), int(found.group(2)))
        if version < MIN_PYTHON:
            raise RemoteHostError(self.name, f"python3{where} is Python {_version(version)}; expmgr needs "
                                             f">= {_version(MIN_PYTHON)} on the host: set pythonPath to the folder of one")


class _HostKeyChecker:
    """known_hosts as OpenSSH's ``StrictHostKeyChecking`` yes / accept-new reads it; remembers
    why a key was refused, for the error message."""

    def __init__(self, target: SshTarget) -> None:
        self.target = target
        self.known_for_host = False
        self.refused: Literal["unknown", "changed"] | None = None
        self.recorded = False

    def trusted_keys(self, host: str, addr: str, port: int | None) -> object:
        """asyncssh's known_hosts callable: the keys on record for this host."""
        path = self.target.known_hosts
        try:
            known = asyncssh.read_known_hosts(str(path)) if path.is_file() else asyncssh.import_known_hosts("")
        except (OSError, ValueError) as error:
            raise ValueError(f"cannot read {path}: {error}") from None
        result = known.match(host, addr, port)
        self.known_for_host = bool(result[0] or result[1])
        return result

    def unknown_key(self, host: str, port: int, key: asyncssh.SSHKey) -> bool:
        """A key not on record: refuse it, or record it (accept-new, host not on record)."""
        if self.known_for_host:
            self.refused = "changed"
            return False
        if self.target.strict_host_key_checking != "accept-new":
            self.refused = "unknown"
            return False
        name = host if port in (None, DEFAULT_PORT) else f"[{host}]:{port}"
        line = f"{name} {key.export_public_key('openssh').decode().split(' #')[0].strip()}\n"
        path = self.target.known_hosts
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(path, "a") as known_hosts:
            known_hosts.write(line)
        self.recorded = True
        return True


class _Client(asyncssh.SSHClient):
    def __init__(self, checker: _HostKeyChecker) -> None:
        self._checker = checker

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        return self._checker.unknown_key(host, port, key)


def _connect_failure(target: SshTarget, checker: _HostKeyChecker, error: BaseException, timeout: float) -> str:
    """A one-line message a user can act on, for why the connection failed."""
    known_hosts = target.known_hosts
    if isinstance(error, asyncssh.HostKeyNotVerifiable) and checker.refused == "changed":
        return (f"host key differs from the one in {known_hosts}: the host was reinstalled, or someone "
                f"is in between; if you trust the new key, remove the old one (ssh-keygen -R) and connect again")
    if isinstance(error, asyncssh.HostKeyNotVerifiable) and checker.refused == "unknown":
        return (f"host key not in {known_hosts}; add it (ssh-keyscan, or ssh to the host once) "
                f"or set strictHostKeyChecking: accept-new")
    if isinstance(error, asyncssh.HostKeyNotVerifiable):  # not this host's: a ProxyJump host's, checked by asyncssh
        return (f"on the way: {_reason(error)}; add that host's key to the known_hosts file its ssh config "
                f"names (UserKnownHostsFile, else ~/.ssh/known_hosts)")
    if isinstance(error, asyncssh.PermissionDenied):
        how = " and ".join(filter(None, [
            f"key {target.key_file}" if target.key_file else "",
            "password" if target.password is not None else "",
        ])) or "keys of the ssh config, the agent and ~/.ssh"
        user = f"user {target.user}" if target.user else "the user"
        return f"login refused for {user} ({how} tried); check user, sshKeyFile or password"
    if isinstance(error, (asyncssh.KeyEncryptionError, asyncssh.KeyImportError)) and "passphrase" in str(error).lower():
        return f"cannot decrypt key {target.key_file}: wrong or missing passphrase"
    if isinstance(error, asyncssh.KeyEncryptionError):
        return f"cannot decrypt key {target.key_file}: {_reason(error)}"
    if isinstance(error, (asyncssh.KeyImportError, FileNotFoundError)) and target.key_file is not None \
            and not isinstance(error, ConnectionError):
        return f"cannot read key {target.key_file}: {_reason(error)}"
    if isinstance(error, ConnectionRefusedError):
        return "connection refused; is sshd running there, and is the port right?"
    if isinstance(error, socket.gaierror):
        return f"cannot resolve the host name ({error.strerror}); check host, or the ssh config's HostName"
    if isinstance(error, (asyncio.TimeoutError, TimeoutError)):
        return f"no answer within {timeout:g} s (host down, or a firewall in between?)"
    if isinstance(error, asyncssh.ConfigParseError):
        return f"cannot read the ssh config {target.ssh_config}: {_reason(error)}"
    return f"cannot connect: {_reason(error)}"


def _connected_name(target: SshTarget, connection: asyncssh.SSHClientConnection) -> str:
    peer = connection.get_extra_info("peername")
    if not peer:  # through a ProxyJump tunnel: no socket of our own
        host, port = connection.get_extra_info("host"), connection.get_extra_info("port")
        return f"host {target.host} ({host}:{port})" if host else target.name
    return f"host {target.host} ({peer[0]}:{peer[1]})"


class _OutputLimit(Exception):
    def __init__(self, limit: int) -> None:
        self.limit = limit


async def _read_bounded(stream: asyncssh.SSHReader[bytes], limit: int) -> bytes:
    data = bytearray()
    while chunk := await stream.read(65536):
        data += chunk
        if len(data) > limit:
            raise _OutputLimit(limit)
    return bytes(data)


def _reason(error: BaseException) -> str:
    reason = getattr(error, "reason", None) or getattr(error, "strerror", None) or str(error)
    return " ".join(str(reason).split()) or type(error).__name__


def _version(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"
