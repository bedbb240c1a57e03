"""Real OpenSSH servers on this machine for the tests of the remote (SSH) training service:
each "host" is Debian's ``sshd`` on a free 127.0.0.1 port, with its own host key, its own
user (uid, password, home with ``~/.ssh/authorized_keys``) and its own view of the files.

    def test_something(ssh_host_pair, ssh_client_home):      # both hosts up; HOME of its own
        host = ssh_host_pair.hosts[0]
        target = SshTarget(host="127.0.0.1", port=host.port, user=host.user,
                           key_file=ssh_host_pair.client_key, known_hosts=ssh_host_pair.known_hosts)
        ssh_host_pair.machine(host)   # {"host": "127.0.0.1", "port": ..., "user": ..., "sshKeyFile": ...}
        host.processes()              # every process running on that host
        host.kill()                   # the host dies: sshd and every process on it, at once
        host.start()                  # and comes back (same key and home, another port)

How a host is made (needs root: skipped with the reason otherwise):

- a private mount namespace and PID namespace (``unshare --mount --pid --fork``): the folders
  the manager writes to (pytest's temporary root, where tests put EXPMGR_HOME and code) are
  covered there by an empty tmpfs, so a trial on the host cannot see the manager's files, as
  on another machine (the Ray node "without the shared folder" does the same); sshd is the
  namespace's init, so every process of the host, escaped or not, is in it and dies with it;
- its user exists only inside the namespace: ``/etc/passwd``, ``/etc/shadow`` and
  ``/etc/group`` there are bind-mounted copies with that user added (a uid no one else has),
  so nothing of the machine's user database changes and a killed test run leaves no user;
- the unshare process dies with the test process (parent-death signal), and takes the
  namespace with it (``--kill-child``).

``SshHosts`` is one session's set: a client key pair (and a copy of it with a passphrase),
the ``known_hosts`` file with every host's key, and the hosts. ``host.bin_dir`` is first on
the PATH of the host's sessions: put a program there (a fake ``nvidia-smi``) for that host;
its users run HOST_PYTHON (Debian's ``python3``: the test interpreter lies below /root, which
they cannot read), and files for them go below ``SshHosts.root`` (not in pytest's folders,
which they do not see). ``extra_host()`` makes a host for one test (a host without Python).
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import psutil
import pytest

from tests.helpers.common import fixture_process_roots, wait_until

SSHD = "/usr/sbin/sshd"
START_TIMEOUT = 30.0
"""Seconds an sshd has to listen after it was started."""
STOP_TIMEOUT = 10.0
"""Seconds a host's processes have to be gone after SIGKILL of its namespace."""
HOST_PYTHON = "/usr/bin/python3"
"""The Python the hosts' users have (the test interpreter lies below /root, which they cannot read)."""
SESSION_PATH = "/usr/local/bin:/usr/bin:/bin"
"""sshd's own PATH for sessions, after a host's own folders."""
CLIENT_KEY_PASSPHRASE = "correct horse battery staple"
_PR_SET_PDEATHSIG = 1
_UID_BASE = 200_000


def ssh_hosts_unavailable() -> str | None:
    """Why real sshd hosts cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return "the sshd hosts need root (a user per host, mount and PID namespaces)"
    for program in (SSHD, "ssh-keygen", "unshare"):
        if shutil.which(program) is None:
            return f"{program} not found: install Debian's openssh-server (.ci/run does)"
    probe = subprocess.run(["unshare", "--mount", "--pid", "--fork", "--mount-proc", "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return f"mount/PID namespaces are not allowed here (unshare: {probe.stderr.strip()})"
    return None


class SshHostError(Exception):
    """A test sshd host could not be started or stopped."""


@dataclass
class SshHost:
    """One sshd host: its port, user, folders and the process of its namespace."""

    name: str
    root: Path
    """The host's own folder on this machine (its sshd config, host key, user database, home)."""
    user: str
    uid: int
    password: str
    host_public_key: str
    """The host key's public line (``ssh-ed25519 AAAA...``)."""
    hidden: tuple[Path, ...]
    env: dict[str, str] = field(default_factory=dict)
    extra_path: tuple[Path, ...] = ()
    port: int = 0
    process: subprocess.Popen | None = None

    @property
    def home(self) -> Path:
        """The user's home (its path is the same on the host and here)."""
        return self.root / "home"

    @property
    def bin_dir(self) -> Path:
        """First on the PATH of the host's sessions: programs for this host alone."""
        return self.root / "bin"

    @property
    def log(self) -> Path:
        return self.root / "sshd.log"

    def known_hosts_line(self) -> str:
        return f"[127.0.0.1]:{self.port} {self.host_public_key}\n"

    def start(self) -> SshHost:
        """Start sshd in the host's namespaces on a free port; return once it listens."""
        for _ in range(5):  # a free port may be taken by someone else before sshd binds it
            self.port = _free_port()
            self._write_sshd_config()
            self.log.write_bytes(b"")
            self._spawn()
            listening = f"Server listening on 127.0.0.1 port {self.port}."
            wait_until(lambda: self._exited() or listening in self.log.read_text(errors="replace"),
                       START_TIMEOUT, f"sshd of host {self.name} to listen")
            if not self._exited():
                return self
            if "Address already in use" not in self.log.read_text(errors="replace"):
                break
        raise SshHostError(f"sshd of host {self.name} did not start: {self.log.read_text(errors='replace')[-3000:]}")

    def processes(self) -> list[psutil.Process]:
        """Every process running on the host (its namespace's unshare and all below)."""
        if self.process is None:
            return []
        try:
            root = psutil.Process(self.process.pid)
            found = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []
        return [p for p in found if _alive(p)]

    def wait_idle(self, timeout: float = START_TIMEOUT) -> None:
        """Wait until only the host's unshare and sshd listener run: every session ended
        (sshd's processes of a closed connection end a moment after the client is told)."""
        wait_until(lambda: len(self.processes()) <= 2, timeout,
                   f"the sessions of host {self.name} to end: {[p.pid for p in self.processes()]}")

    def kill(self) -> None:
        """The host dies at once: SIGKILL to its namespace's init ends every process on it.
        Wait until none is left. Safe to call again; ``start()`` brings the host back."""
        if self.process is None:
            return
        processes = self.processes()
        for process in processes:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        self.process.wait(STOP_TIMEOUT)
        psutil.wait_procs(processes, timeout=STOP_TIMEOUT)
        fixture_process_roots.discard(self.process.pid)
        left = [p.pid for p in processes if _alive(p)]
        self.process = None
        if left:
            raise SshHostError(f"processes of host {self.name} still running after SIGKILL: {left}")

    stop = kill

    def _exited(self) -> bool:
        return self.process is None or self.process.poll() is not None

    def _write_sshd_config(self) -> None:
        path = ":".join([str(self.bin_dir), *map(str, self.extra_path), SESSION_PATH])
        env = {"PATH": path, **self.env}
        lines = [
            f"Port {self.port}",
            "ListenAddress 127.0.0.1",
            f"HostKey {self.root / 'ssh_host_ed25519_key'}",
            "PidFile none",
            "UsePAM no",
            "PubkeyAuthentication yes",
            "PasswordAuthentication yes",
            "KbdInteractiveAuthentication no",
            "PermitRootLogin no",
            f"AllowUsers {self.user}",
            "AuthorizedKeysFile .ssh/authorized_keys",
            "AllowTcpForwarding yes",
            "X11Forwarding no",
            "PrintMotd no",
            "PrintLastLog no",
            "MaxStartups 100",
            "MaxSessions 100",
            "LogLevel VERBOSE",
            "Subsystem sftp internal-sftp",
            # Overrides sshd's own PATH and whatever a client sends.
            "SetEnv " + " ".join(f'{key}="{value}"' for key, value in env.items()),
        ]
        (self.root / "sshd_config").write_text("\n".join(lines) + "\n")

    def _spawn(self) -> None:
        etc = self.root / "etc"
        script = "set -e\n"
        for folder in self.hidden:
            script += f"mount -t tmpfs -o mode=0755 tmpfs {shlex.quote(str(folder))}\n"
        for name in ("passwd", "shadow", "group"):
            script += f"mount --bind {shlex.quote(str(etc / name))} /etc/{name}\n"
        script += "mkdir -p /run/sshd\n"
        script += f"exec {SSHD} -D -e -f {shlex.quote(str(self.root / 'sshd_config'))}\n"
        command = ["unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--mount-proc",
                   "--kill-child", "/bin/sh", "-c", script]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True, preexec_fn=_die_with_parent)
        fixture_process_roots.add(self.process.pid)


class SshHosts:
    """A session's sshd hosts, the client key pair and the known_hosts file naming them."""

    def __init__(self, hidden: list[Path]) -> None:
        self.hidden = tuple(hidden)
        self.root = Path(tempfile.mkdtemp(prefix="expmgr-ssh-", dir="/tmp"))
        self.root.chmod(0o755)  # the hosts' users reach their homes below it
        self.hosts: list[SshHost] = []
        self._made = 0
        self.client_key = self.root / "client" / "id_ed25519"
        """A private key (no passphrase) every host's user accepts."""
        self.client_key_with_passphrase = self.root / "client" / "id_ed25519_passphrase"
        """The same kind of key, encrypted with CLIENT_KEY_PASSPHRASE; accepted too."""
        self.known_hosts = self.root / "client" / "known_hosts"
        """Every host's key, as ``[127.0.0.1]:port``."""
        self.client_key.parent.mkdir(mode=0o700)
        _keygen(self.client_key, "")
        _keygen(self.client_key_with_passphrase, CLIENT_KEY_PASSPHRASE)

    def add_host(self, name: str, *, env: dict[str, str] | None = None,
                 extra_path: list[Path] | None = None) -> SshHost:
        """Make and start a host, one of ``hosts`` (in known_hosts, stopped with the rest):
        its own user (``<name>-user``, a uid unique on this machine while this process
        lives), home, host key, password; ``env`` and ``extra_path`` go into its sessions'
        environment (``env`` may replace PATH)."""
        host = self.make_host(name, env=env, extra_path=extra_path)
        self.hosts.append(host)
        self.write_known_hosts(self.known_hosts)
        return host

    @contextlib.contextmanager
    def extra_host(self, name: str, *, env: dict[str, str] | None = None) -> Iterator[SshHost]:
        """A host for one test (not one of ``hosts``, not in ``known_hosts``), killed after it."""
        host = self.make_host(name, env=env)
        try:
            yield host
        finally:
            host.kill()

    def make_host(self, name: str, *, env: dict[str, str] | None = None,
                  extra_path: list[Path] | None = None) -> SshHost:
        self._made += 1
        index = self._made
        root = self.root / f"{index}-{name}"
        (root / "etc").mkdir(parents=True)
        root.chmod(0o755)
        uid = _UID_BASE + os.getpid() * 64 + index % 64
        user = f"{name}-user"
        password = secrets.token_urlsafe(12)
        _keygen(root / "ssh_host_ed25519_key", "")
        host_public_key = " ".join((root / "ssh_host_ed25519_key.pub").read_text().split()[:2])
        host = SshHost(name, root, user, uid, password, host_public_key, self.hidden,
                       env=dict(env or {}), extra_path=tuple(extra_path or ()))
        self._make_user(host)
        host.bin_dir.mkdir(mode=0o755)
        return host.start()

    def machine(self, host: SshHost, **fields: object) -> dict[str, object]:
        """The host as an entry of NNI's ``machineList`` (v2 field names), logging in with the
        client key; ``fields`` add or replace (``password=host.password, sshKeyFile=None``)."""
        entry: dict[str, object] = {"host": "127.0.0.1", "port": host.port, "user": host.user,
                                    "sshKeyFile": str(self.client_key)}
        entry.update(fields)
        return {key: value for key, value in entry.items() if value is not None}

    def write_known_hosts(self, path: Path, hosts: list[SshHost] | None = None) -> Path:
        """Write a known_hosts file with ``hosts``' keys (all by default)."""
        path.write_text("".join(h.known_hosts_line() for h in (self.hosts if hosts is None else hosts)))
        return path

    def stop(self) -> None:
        """Kill every host and remove the session's folder. Safe to call again."""
        errors = []
        for host in self.hosts:
            try:
                host.kill()
            except SshHostError as error:
                errors.append(str(error))
        shutil.rmtree(self.root, ignore_errors=True)
        if errors:
            raise SshHostError("; ".join(errors))

    def _make_user(self, host: SshHost) -> None:
        etc = host.root / "etc"
        hashed = _crypt(host.password)
        entry = f"{host.user}:x:{host.uid}:{host.uid}::{host.home}:/bin/bash\n"
        (etc / "passwd").write_text(Path("/etc/passwd").read_text() + entry)
        (etc / "group").write_text(Path("/etc/group").read_text() + f"{host.user}:x:{host.uid}:\n")
        (etc / "shadow").write_text(Path("/etc/shadow").read_text() + f"{host.user}:{hashed}:19000:0:99999:7:::\n")
        (etc / "shadow").chmod(0o640)
        ssh_dir = host.home / ".ssh"
        ssh_dir.mkdir(parents=True)
        keys = [Path(f"{key}.pub").read_text() for key in (self.client_key, self.client_key_with_passphrase)]
        (ssh_dir / "authorized_keys").write_text("".join(keys))
        (ssh_dir / "authorized_keys").chmod(0o600)
        ssh_dir.chmod(0o700)
        host.home.chmod(0o700)
        for path in (host.home, ssh_dir, ssh_dir / "authorized_keys"):
            os.chown(path, host.uid, host.uid)


def _keygen(path: Path, passphrase: str) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-C", path.name, "-f", str(path)],
                   check=True, stdin=subprocess.DEVNULL)


def _crypt(password: str) -> str:
    """The password's SHA-512 crypt hash for /etc/shadow, by libcrypt (which sshd itself uses)."""
    libcrypt = ctypes.CDLL("libcrypt.so.1")
    libcrypt.crypt.restype = ctypes.c_char_p
    hashed = libcrypt.crypt(password.encode(), f"$6${secrets.token_hex(8)}$".encode())
    if not hashed or not hashed.startswith(b"$6$"):
        raise SshHostError("libcrypt could not hash a password")
    return hashed.decode()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the test process dies; unshare's --kill-child
    then takes the host's namespace down with it."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def write_ssh_config(path: Path, entries: dict[str, dict[str, str]]) -> Path:
    """Write an OpenSSH client config: ``{"gpu1": {"HostName": "127.0.0.1", ...}}``."""
    text = ""
    for pattern, options in entries.items():
        text += f"Host {pattern}\n" + "".join(f"    {key} {value}\n" for key, value in options.items())
    path.write_text(text)
    return path


@pytest.fixture(scope="session")
def ssh_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshHosts]:
    """Two sshd hosts for the session (``hosts[0]``, ``hosts[1]``), neither seeing pytest's
    temporary folders. A test that kills one should ``start()`` it again (see ``ssh_host_pair``)."""
    reason = ssh_hosts_unavailable()
    if reason:
        pytest.skip(reason)
    basetemp = tmp_path_factory.getbasetemp()
    # Under pytest-xdist each worker's basetemp is a folder of the run's: hide the run's.
    hidden = basetemp.parent if os.environ.get("PYTEST_XDIST_WORKER") else basetemp
    hosts = SshHosts(hidden=[hidden])
    try:
        hosts.add_host("host1")
        hosts.add_host("host2")
        yield hosts
    finally:
        hosts.stop()


@pytest.fixture
def ssh_host_pair(ssh_hosts: SshHosts) -> Iterator[SshHosts]:
    """The session's hosts, each running again if an earlier test killed it. After the test,
    waits until no session of the test is left on them (before the check for processes left
    behind, which would otherwise catch sshd's processes of a closed connection mid-exit)."""
    for host in ssh_hosts.hosts:
        if host.process is None or host.process.poll() is not None:
            host.process = None
            host.start()
    ssh_hosts.write_known_hosts(ssh_hosts.known_hosts)
    yield ssh_hosts
    for host in ssh_hosts.hosts:
        if host.process is not None:
            host.wait_idle()


@pytest.fixture
def ssh_client_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME of its own for the test's SSH client, so that the machine's ~/.ssh (config,
    keys, known_hosts) and agent play no part unless a test puts them there."""
    home = tmp_path / "client-home"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return home
