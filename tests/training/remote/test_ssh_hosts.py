"""The sshd test hosts themselves (tests/helpers/ssh_hosts.py): two at once, each its own user,
host key and view of the files (not pytest's folders), and a host's death ends every process
on it, escaped ones too."""
from __future__ import annotations

import asyncio
import subprocess
import uuid
from pathlib import Path

import psutil

from expmgr.training.remote.ssh import HostConnection, SshTarget
from tests.helpers.common import wait_until
from tests.helpers.ssh_hosts import SshHost, SshHosts, ssh_client_home, ssh_host_pair, ssh_hosts  # noqa: F401


def _target(hosts: SshHosts, host: SshHost, known_hosts: Path | None = None) -> SshTarget:
    return SshTarget(host="127.0.0.1", port=host.port, user=host.user, key_file=hosts.client_key,
                     known_hosts=known_hosts or hosts.known_hosts)


async def _run(target: SshTarget, command: str) -> str:
    connection = await HostConnection.connect(target)
    try:
        result = await connection.run(command)
    finally:
        await connection.close()
    assert result.exit_status == 0, result.stderr
    return result.stdout


def test_two_hosts_each_with_its_own_port_user_home_and_host_key(ssh_host_pair, ssh_client_home):
    first, second = ssh_host_pair.hosts
    assert len({first.port, second.port}) == len({first.uid, second.uid}) == 2
    assert first.host_public_key != second.host_public_key
    for host in (first, second):
        machine = ssh_host_pair.machine(host)
        login = SshTarget(host=str(machine["host"]), port=int(str(machine["port"])), user=str(machine["user"]),
                          key_file=Path(str(machine["sshKeyFile"])), known_hosts=ssh_host_pair.known_hosts)
        out = asyncio.run(_run(login, "id -u; echo $HOME; echo $PATH"))
        assert out.split() == [str(host.uid), str(host.home), f"{host.bin_dir}:/usr/local/bin:/usr/bin:/bin"]


def test_a_host_sees_neither_pytests_folders_nor_the_machines_users(ssh_host_pair, ssh_client_home, tmp_path):
    host = ssh_host_pair.hosts[0]
    (tmp_path / "manager-file").write_text("the manager's")
    listing = asyncio.run(_run(_target(ssh_host_pair, host),
                               f"ls -A {tmp_path.parent} 2>/dev/null | wc -l; test -e {tmp_path} || echo hidden"))
    assert listing.split() == ["0", "hidden"]
    # The hosts' users exist on the hosts alone: the machine's user database is unchanged.
    assert host.user not in Path("/etc/passwd").read_text()


def test_killing_a_host_ends_every_process_on_it_even_a_detached_one(ssh_hosts, ssh_client_home, tmp_path):
    marker = f"escaped-{uuid.uuid4().hex[:8]}"
    with ssh_hosts.extra_host("doomed") as host:
        known_hosts = ssh_hosts.write_known_hosts(tmp_path / "known_hosts", [host])
        # setsid + nohup + &: leaves the session's process group and sshd's tree of the session
        asyncio.run(_run(_target(ssh_hosts, host, known_hosts),
                         f"setsid nohup python3 -c 'import time; time.sleep(1000)' {marker} </dev/null >/dev/null 2>&1 & "
                         "echo started"))
        escaped = wait_until(lambda: [p for p in host.processes() if marker in " ".join(p.cmdline())],
                             30, "the detached process on the host")
        host.kill()
        assert not host.processes()
        assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in escaped)  # type: ignore[union-attr]
        # and the host comes back, as a rebooted machine, on a new port
        host.start()
        known_hosts = ssh_hosts.write_known_hosts(tmp_path / "known_hosts", [host])
        assert asyncio.run(_run(_target(ssh_hosts, host, known_hosts), "echo back")) == "back\n"
    assert subprocess.run(["id", host.user], capture_output=True).returncode != 0
