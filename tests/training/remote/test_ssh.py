"""The SSH transport of the remote training service against real sshd hosts (tests/helpers/
ssh_hosts.py): logging in as users' ssh does, each failure as one line naming the host, the
code upload, the forwarded report port, commands, and what a remote process sees when the
manager's connection goes (closed, or the manager SIGKILLed)."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import psutil
import pytest

from expmgr.training.remote.ssh import STDERR_TAIL, HostConnection, RemoteHostError, SshTarget
from tests.helpers.common import PYTHON, wait_until
from tests.helpers.ssh_hosts import (CLIENT_KEY_PASSPHRASE, SshHost, SshHosts, ssh_client_home,  # noqa: F401
                                     ssh_host_pair, ssh_hosts, write_ssh_config)

GONE_TIMEOUT = 30.0
"""Seconds a remote process has to be gone after its connection went (it takes well under one)."""


def target(hosts: SshHosts, host: SshHost, **changes: object) -> SshTarget:
    fields: dict[str, object] = {"host": "127.0.0.1", "port": host.port, "user": host.user,
                                 "key_file": hosts.client_key, "known_hosts": hosts.known_hosts}
    fields.update(changes)
    return SshTarget(**fields)  # type: ignore[arg-type]


def connect_error(target: SshTarget, **options: object) -> str:
    async def attempt() -> None:
        connection = await HostConnection.connect(target, **options)  # type: ignore[arg-type]
        await connection.close()
    with pytest.raises(RemoteHostError) as raised:
        asyncio.run(attempt())
    message = str(raised.value)
    assert "\n" not in message
    return message


async def run_on(target: SshTarget, command: str) -> tuple[int, str, str]:
    connection = await HostConnection.connect(target)
    try:
        result = await connection.run(command)
    finally:
        await connection.close()
    return result.exit_status, result.stdout, result.stderr


def processes_with(host: SshHost, marker: str) -> list[psutil.Process]:
    found = []
    for process in host.processes():
        try:
            if marker in " ".join(process.cmdline()):
                found.append(process)
        except psutil.Error:
            pass
    return found


# -- logging in ------------------------------------------------------------------------------


def test_key_login_runs_a_command_as_the_hosts_user_with_its_exit_status_and_both_streams(ssh_host_pair, ssh_client_home):
    host = ssh_host_pair.hosts[0]
    status, out, err = asyncio.run(run_on(target(ssh_host_pair, host), "id -un; pwd; echo oops >&2; exit 3"))
    assert (status, out.split(), err) == (3, [host.user, str(host.home)], "oops\n")


def test_password_login(ssh_host_pair, ssh_client_home):
    host = ssh_host_pair.hosts[1]
    status, out, _ = asyncio.run(run_on(target(ssh_host_pair, host, key_file=None, password=host.password), "id -un"))
    assert (status, out) == (0, f"{host.user}\n")


def test_encrypted_key_with_its_passphrase(ssh_host_pair, ssh_client_home):
    host = ssh_host_pair.hosts[0]
    login = target(ssh_host_pair, host, key_file=ssh_host_pair.client_key_with_passphrase,
                   passphrase=CLIENT_KEY_PASSPHRASE)
    assert asyncio.run(run_on(login, "id -un"))[1] == f"{host.user}\n"


def test_ssh_config_host_alias_gives_address_port_user_and_identity_file(ssh_host_pair, ssh_client_home, tmp_path):
    host = ssh_host_pair.hosts[1]
    config = write_ssh_config(tmp_path / "ssh_config", {"gpu-alias": {
        "HostName": "127.0.0.1", "Port": str(host.port), "User": host.user,
        "IdentityFile": str(ssh_host_pair.client_key)}})
    login = SshTarget(host="gpu-alias", ssh_config=config, known_hosts=ssh_host_pair.known_hosts)
    assert asyncio.run(run_on(login, "id -un"))[1] == f"{host.user}\n"


def test_the_ssh_config_in_home_is_read_by_default(ssh_host_pair, ssh_client_home):
    host = ssh_host_pair.hosts[0]
    write_ssh_config(ssh_client_home / ".ssh" / "config", {"homealias": {
        "HostName": "127.0.0.1", "Port": str(host.port), "User": host.user,
        "IdentityFile": str(ssh_host_pair.client_key)}})
    (ssh_client_home / ".ssh" / "known_hosts").write_text(host.known_hosts_line())
    assert asyncio.run(run_on(SshTarget(host="homealias"), "id -un"))[1] == f"{host.user}\n"


def test_proxy_jump_reaches_a_host_through_another(ssh_host_pair, ssh_client_home, tmp_path):
    jump, behind = ssh_host_pair.hosts
    common = {"HostName": "127.0.0.1", "IdentityFile": str(ssh_host_pair.client_key),
              "UserKnownHostsFile": str(ssh_host_pair.known_hosts)}
    config = write_ssh_config(tmp_path / "ssh_config", {
        "jump": {**common, "Port": str(jump.port), "User": jump.user},
        "behind": {**common, "Port": str(behind.port), "User": behind.user, "ProxyJump": "jump"}})

    async def through_jump() -> tuple[str, list[psutil.Process]]:
        connection = await HostConnection.connect(SshTarget(host="behind", ssh_config=config,
                                                            known_hosts=ssh_host_pair.known_hosts))
        try:
            result = await connection.run("id -un")
            # The jump host holds a session of its user while the connection lasts.
            on_jump = [p for p in jump.processes() if p.uids().real == jump.uid]
            return result.stdout, on_jump
        finally:
            await connection.close()

    user, on_jump = asyncio.run(through_jump())
    assert user == f"{behind.user}\n"
    assert on_jump


def test_proxy_jump_host_with_an_unknown_key_is_refused(ssh_host_pair, ssh_client_home, tmp_path):
    jump, behind = ssh_host_pair.hosts
    only_behind = ssh_host_pair.write_known_hosts(tmp_path / "known_hosts", [behind])
    common = {"HostName": "127.0.0.1", "IdentityFile": str(ssh_host_pair.client_key),
              "UserKnownHostsFile": str(only_behind)}
    config = write_ssh_config(tmp_path / "ssh_config", {
        "jump": {**common, "Port": str(jump.port), "User": jump.user},
        "behind": {**common, "Port": str(behind.port), "User": behind.user, "ProxyJump": "jump"}})
    message = connect_error(SshTarget(host="behind", ssh_config=config, known_hosts=only_behind))
    assert message.startswith("host behind: on the way: Host key is not trusted for host 127.0.0.1; add that "
                              "host's key to the known_hosts file its ssh config names")


def test_ssh_agent_key_is_used(ssh_host_pair, ssh_client_home, tmp_path, monkeypatch):
    host = ssh_host_pair.hosts[1]
    socket_path = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(socket_path)], stdout=subprocess.DEVNULL)
    try:
        wait_until(socket_path.exists, 30, "ssh-agent's socket")
        monkeypatch.setenv("SSH_AUTH_SOCK", str(socket_path))
        subprocess.run(["ssh-add", "-q", str(ssh_host_pair.client_key)], check=True, capture_output=True)
        assert asyncio.run(run_on(target(ssh_host_pair, host, key_file=None), "id -un"))[1] == f"{host.user}\n"
    finally:
        agent.terminate()
        agent.wait()


# -- each failure: one line that names the host ---------------------------------------------


def test_refused_connection_names_the_host_and_port(ssh_client_home):
    with socket.socket() as closed:  # bound, never listening: connections to it are refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        message = connect_error(SshTarget(host="127.0.0.1", port=port, user="nobody"))
    assert message.startswith(f"host 127.0.0.1:{port}: connection refused")


def test_silent_host_times_out(ssh_client_home):
    with socket.socket() as silent:  # accepts (the kernel's backlog) and never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        message = connect_error(SshTarget(host="127.0.0.1", port=port, user="nobody"), connect_timeout=0.5)
    assert message.startswith(f"host 127.0.0.1:{port}: no answer within 0.5 s")


def test_unknown_host_name(ssh_client_home):
    message = connect_error(SshTarget(host="no-such-host.invalid", user="nobody"))
    assert message.startswith("host no-such-host.invalid: cannot resolve the host name")


def test_refused_key(ssh_host_pair, ssh_client_home, tmp_path):
    host = ssh_host_pair.hosts[0]
    stranger = tmp_path / "stranger_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    message = connect_error(target(ssh_host_pair, host, key_file=stranger))
    assert message.startswith(f"host 127.0.0.1:{host.port}: login refused for user {host.user} (key {stranger}")


def test_refused_password(ssh_host_pair, ssh_client_home):
    host = ssh_host_pair.hosts[1]
    message = connect_error(target(ssh_host_pair, host, key_file=None, password="not-" + host.password))
    assert message.startswith(f"host 127.0.0.1:{host.port}: login refused for user {host.user} (password tried)")


def test_wrong_passphrase(ssh_host_pair, ssh_client_home):
    host = ssh_host_pair.hosts[0]
    key = ssh_host_pair.client_key_with_passphrase
    message = connect_error(target(ssh_host_pair, host, key_file=key, passphrase="wrong"))
    assert message == f"host 127.0.0.1:{host.port}: cannot decrypt key {key}: wrong or missing passphrase"


def test_unknown_host_key_is_refused_by_default(ssh_host_pair, ssh_client_home, tmp_path):
    host = ssh_host_pair.hosts[0]
    other_only = ssh_host_pair.write_known_hosts(tmp_path / "known_hosts", [ssh_host_pair.hosts[1]])
    message = connect_error(target(ssh_host_pair, host, known_hosts=other_only))
    assert message == (f"host 127.0.0.1:{host.port}: host key not in {other_only}; add it (ssh-keyscan, or ssh to "
                       f"the host once) or set strictHostKeyChecking: accept-new")
    assert other_only.read_text() == ssh_host_pair.hosts[1].known_hosts_line()


def test_accept_new_records_an_unknown_key_and_refuses_a_changed_one(ssh_host_pair, ssh_client_home, tmp_path):
    host = ssh_host_pair.hosts[1]
    known_hosts = tmp_path / "new" / "known_hosts"
    first_use = target(ssh_host_pair, host, known_hosts=known_hosts, strict_host_key_checking="accept-new")
    assert asyncio.run(run_on(first_use, "true"))[0] == 0
    assert known_hosts.read_text() == host.known_hosts_line()
    # Recorded: the strict default now accepts it.
    assert asyncio.run(run_on(target(ssh_host_pair, host, known_hosts=known_hosts), "true"))[0] == 0
    # The host's key changes (reinstalled, or someone in between): refused, even with accept-new.
    another = tmp_path / "another_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(another)], check=True)
    changed = f"[127.0.0.1]:{host.port} " + " ".join(Path(f"{another}.pub").read_text().split()[:2]) + "\n"
    known_hosts.write_text(changed)
    message = connect_error(first_use)
    assert message.startswith(f"host 127.0.0.1:{host.port}: host key differs from the one in {known_hosts}")
    assert known_hosts.read_text() == changed


def test_host_without_python3(ssh_hosts, ssh_client_home, tmp_path):
    with ssh_hosts.extra_host("nopython", env={"PATH": "/nonexistent"}) as host:
        known_hosts = ssh_hosts.write_known_hosts(tmp_path / "known_hosts", [host])
        message = connect_error(target(ssh_hosts, host, known_hosts=known_hosts))
    assert message == (f"host 127.0.0.1 (127.0.0.1:{host.port}): no python3 on the PATH; "
                       f"install Python >= 3.8 or set pythonPath to the folder of one")


def test_python_path_first_on_path_and_too_old_a_python(ssh_host_pair, ssh_client_home):
    host = ssh_host_pair.hosts[0]
    folder = ssh_host_pair.root / f"old-python-{uuid.uuid4().hex[:8]}"
    folder.mkdir(mode=0o755)
    (folder / "python3").write_text("#!/bin/sh\necho '(3, 6)'\n")
    (folder / "python3").chmod(0o755)
    message = connect_error(target(ssh_host_pair, host, python_path=str(folder)))
    assert message == (f"host 127.0.0.1 (127.0.0.1:{host.port}): python3 (pythonPath {folder}) "
                       f"is Python 3.6; expmgr needs >= 3.8 on the host: set pythonPath to the folder of one")


# -- upload -----------------------------------------------------------------------------------


def test_upload_honours_nniignore_and_the_host_does_not_see_the_managers_folder(ssh_host_pair, ssh_client_home, tmp_path):
    host = ssh_host_pair.hosts[0]
    code = tmp_path / "code"
    for name, text in {"train.py": "print(1)\n", "lib/model.py": "x = 1\n", "data/big.bin": "0" * 100,
                       "lib/cache.ckpt": "c", "keep.ckpt": "k", "lib/data/inner.txt": "i",
                       ".nniignore": "/data\n*.ckpt\n!keep.ckpt\n"}.items():
        (code / name).parent.mkdir(parents=True, exist_ok=True)
        (code / name).write_text(text)
    (code / "train.py").chmod(0o755)
    (code / "model-link.py").symlink_to("lib/model.py")
    remote = f"uploads/{uuid.uuid4().hex[:8]}/code"

    async def upload_and_list() -> tuple[int, str, str]:
        connection = await HostConnection.connect(target(ssh_host_pair, host))
        try:
            sent = await connection.upload(code, remote)
            listing = await connection.run(f"cd {remote} && find . -mindepth 1 | sort && stat -c %a train.py "
                                           f"&& cat model-link.py")
            manager_side = await connection.run(f"test -e {code}")
        finally:
            await connection.close()
        assert manager_side.exit_status == 1, "the host sees the manager's folder"
        return sent, listing.stdout, ""

    sent, listing, _ = asyncio.run(upload_and_list())
    assert listing.split() == ["./.nniignore", "./keep.ckpt", "./lib", "./lib/data", "./lib/data/inner.txt",
                               "./lib/model.py", "./model-link.py", "./train.py", "755", "x", "=", "1"]
    assert sent == sum((code / name).stat().st_size for name in
                       [".nniignore", "keep.ckpt", "lib/data/inner.txt", "lib/model.py", "train.py"])


def test_upload_past_the_size_limit_is_refused_before_anything_is_sent(ssh_host_pair, ssh_client_home, tmp_path):
    host = ssh_host_pair.hosts[1]
    code = tmp_path / "code"
    code.mkdir()
    (code / "a.py").write_text("a" * 600)
    (code / "b.bin").write_text("b" * 600)
    remote = f"uploads/{uuid.uuid4().hex[:8]}"

    async def upload() -> tuple[str, int]:
        connection = await HostConnection.connect(target(ssh_host_pair, host))
        try:
            with pytest.raises(RemoteHostError) as raised:
                await connection.upload(code, remote, size_limit=1000)
            return str(raised.value), (await connection.run(f"test -e {remote}")).exit_status
        finally:
            await connection.close()

    message, exists = asyncio.run(upload())
    assert message == (f"host 127.0.0.1 (127.0.0.1:{host.port}): cannot upload: code folder {code} is "
                       f"over the upload limit: 1200 bytes of files to upload, limit 1000 bytes; exclude data "
                       f"and checkpoints in {code / '.nniignore'} (gitignore patterns)")
    assert exists == 1
    (code / ".nniignore").write_text("*.bin\n")
    async def upload_again() -> int:
        connection = await HostConnection.connect(target(ssh_host_pair, host))
        try:
            return await connection.upload(code, remote, size_limit=1000)
        finally:
            await connection.close()
    assert asyncio.run(upload_again()) == 600 + len("*.bin\n")


# -- forwarding, processes --------------------------------------------------------------------


def test_a_process_on_the_host_reaches_a_local_server_through_the_forwarded_port(ssh_host_pair, ssh_client_home):
    host = ssh_host_pair.hosts[1]

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"manager heard " + await reader.readline())
        await writer.drain()
        writer.close()

    async def main() -> str:
        server = await asyncio.start_server(echo, "127.0.0.1", 0)
        local_port = server.sockets[0].getsockname()[1]
        connection = await HostConnection.connect(target(ssh_host_pair, host))
        try:
            remote_port = await connection.forward_remote_port(local_port)
            client = ("import socket; s = socket.create_connection(('127.0.0.1', %d)); "
                      "s.sendall(b'report\\n'); print(s.makefile().readline(), end='')" % remote_port)
            result = await connection.run(f"python3 -c \"{client}\"")
            return result.stdout
        finally:
            await connection.close()
            server.close()
            await server.wait_closed()

    assert asyncio.run(main()) == "manager heard report\n"


def test_open_process_streams_both_ways_and_sees_eof_when_the_connection_closes(ssh_host_pair, ssh_client_home):
    host = ssh_host_pair.hosts[0]
    marker = f"eof-{uuid.uuid4().hex[:8]}"
    program = _stdin_reader(marker)

    async def main() -> tuple[bytes, list[psutil.Process]]:
        connection = await HostConnection.connect(target(ssh_host_pair, host))
        process = await connection.open_process(f"python3 -c '{program}' {marker}")
        process.stdin.write(b"ping\n")
        await process.stdin.drain()
        answer = await process.stdout.readline()
        remote = processes_with(host, marker)
        await connection.close()
        return answer, remote

    answer, remote = asyncio.run(main())
    assert answer == b"pong ping\n"
    assert remote, "the remote process was not found on the host"
    wait_until(lambda: not any(_alive(p) for p in remote), GONE_TIMEOUT, "the remote process to end")
    assert (host.home / marker).read_text() == "stdin closed"


def test_a_sigkilled_manager_leaves_its_remote_process_reading_eof(ssh_host_pair, ssh_client_home, tmp_path):
    host = ssh_host_pair.hosts[1]
    marker = f"eof-{uuid.uuid4().hex[:8]}"
    login = target(ssh_host_pair, host)
    client = tmp_path / "client.py"
    client.write_text(textwrap.dedent(f"""
        import asyncio, json, sys
        from pathlib import Path
        from expmgr.training.remote.ssh import HostConnection, SshTarget
        async def main():
            fields = json.loads(sys.argv[1])
            fields.update(key_file=Path(fields["key_file"]), known_hosts=Path(fields["known_hosts"]))
            connection = await HostConnection.connect(SshTarget(**fields))
            process = await connection.open_process(sys.argv[2])
            process.stdin.write(b"ping\\n")
            await process.stdin.drain()
            print((await process.stdout.readline()).decode(), end="", flush=True)
            await asyncio.Event().wait()
        asyncio.run(main())
    """))
    fields = {"host": login.host, "port": login.port, "user": login.user, "key_file": str(login.key_file),
              "known_hosts": str(login.known_hosts)}
    command = f"python3 -c '{_stdin_reader(marker)}' {marker}"
    errors = tmp_path / "client.stderr"
    with open(errors, "wb") as stderr:
        manager = subprocess.Popen([PYTHON, str(client), json.dumps(fields), command], stdout=subprocess.PIPE,
                                   stderr=stderr, text=True)
    try:
        assert manager.stdout is not None
        assert manager.stdout.readline() == "pong ping\n", errors.read_text()
        remote = processes_with(host, marker)
        assert remote, [p.cmdline() for p in host.processes()]
        manager.send_signal(signal.SIGKILL)
        manager.wait()
        wait_until(lambda: not any(_alive(p) for p in remote), GONE_TIMEOUT, "the remote process to end")
        assert (host.home / marker).read_text() == "stdin closed"
    finally:
        manager.kill()
        manager.wait()


def test_open_process_stderr_flood_does_not_stall_stdout_and_its_tail_and_exit_status_are_kept(
        ssh_host_pair, ssh_client_home):
    host = ssh_host_pair.hosts[1]
    # Both streams share the channel's window: unread stderr would stop stdout too.
    program = ("import sys; sys.stderr.write(\"e\" * 4000000 + \"last words\"); sys.stderr.flush(); "
               "print(\"done\", flush=True); sys.exit(5)")

    async def main() -> tuple[bytes, int | None, str]:
        connection = await HostConnection.connect(target(ssh_host_pair, host))
        try:
            process = await connection.open_process(f"python3 -c '{program}'")
            line = await asyncio.wait_for(process.stdout.readline(), GONE_TIMEOUT)
            return line, await process.wait(), process.stderr_tail()
        finally:
            await connection.close()

    line, status, tail = asyncio.run(main())
    assert (line, status) == (b"done\n", 5)
    assert len(tail) == STDERR_TAIL and tail.endswith("eeelast words")


def test_a_host_gone_silent_is_noticed_by_keepalive(ssh_hosts, ssh_client_home, tmp_path):
    # Every process of the host stopped: no FIN, no answer, as when its network goes away.
    with ssh_hosts.extra_host("silent") as host:
        known_hosts = ssh_hosts.write_known_hosts(tmp_path / "known_hosts", [host])

        async def main() -> bool:
            connection = await HostConnection.connect(target(ssh_hosts, host, known_hosts=known_hosts),
                                                      keepalive_interval=0.2)
            stopped = host.processes()
            for process in stopped:
                process.suspend()
            try:
                await asyncio.wait_for(connection.wait_closed(), GONE_TIMEOUT)
                return connection.closed
            finally:
                for process in stopped:
                    try:
                        process.resume()
                    except psutil.NoSuchProcess:
                        pass
                await connection.close()

        assert asyncio.run(main())


def test_run_output_past_its_limit_is_an_error(ssh_host_pair, ssh_client_home):
    host = ssh_host_pair.hosts[0]

    async def main() -> str:
        connection = await HostConnection.connect(target(ssh_host_pair, host))
        try:
            with pytest.raises(RemoteHostError) as raised:
                await connection.run("head -c 5000 /dev/zero", output_limit=4096)
            assert (await connection.run("echo still usable")).stdout == "still usable\n"
            return str(raised.value)
        finally:
            await connection.close()

    assert asyncio.run(main()).endswith("`head -c 5000 /dev/zero` wrote more than 4096 bytes")


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _stdin_reader(marker: str) -> str:
    """A Python one-liner (no single quotes) that answers one line, then waits for end-of-file
    on stdin and writes "stdin closed" to ~/<marker>."""
    return ("import os, sys; line = sys.stdin.readline(); print(\"pong \" + line, end=\"\", flush=True); "
            "sys.stdin.read(); open(os.path.expanduser(\"~/\" + sys.argv[1]), \"w\").write(\"stdin closed\")")
