"""Which user is at the other end of a loopback TCP connection, read from Linux's
``/proc/net/tcp`` and ``/proc/net/tcp6``: the row whose local address is the client's end
and whose remote address is the server's end carries the uid that owns the client's
socket. auth.py lets a token-less request through only from the server's own user::

    uid = peer_uid(connection.getpeername(), connection.getsockname())   # None: cannot tell

None (refuse) when the table cannot be read (not Linux, a /proc without it), when no row
matches, or when the client's socket has no owner any more (its inode is 0: the client
closed it, and the kernel then shows uid 0, which must not pass for root).
"""
from __future__ import annotations

import ipaddress
import socket
import sys

TABLES = ("/proc/net/tcp", "/proc/net/tcp6")


def can_tell_peers() -> bool:
    """Whether this system shows who owns a TCP socket (Linux's /proc/net/tcp is readable)."""
    try:
        with open(TABLES[0], "rb") as table:
            table.readline()
        return True
    except OSError:
        return False


def _hex_address(packed: bytes) -> bytes:
    """An address as the tables print it: each 32-bit word of it in the machine's byte order, in hex."""
    return b"".join(b"%08X" % int.from_bytes(packed[i:i + 4], sys.byteorder) for i in range(0, len(packed), 4))


def _row_keys(client: tuple, server: tuple) -> list[tuple[str, bytes]]:
    """(table, ``client:port server:port`` as its row starts) for each table the client's
    socket may be in: an IPv4 client may also be an IPv6 socket, as ``::ffff:a.b.c.d``."""
    client_ip = ipaddress.ip_address(client[0].split("%")[0])
    server_ip = ipaddress.ip_address(server[0].split("%")[0])
    keys = []
    for table, family_of in ((TABLES[0], 4), (TABLES[1], 6)):
        ends = []
        for ip in (client_ip, server_ip):
            if family_of == 4:
                if ip.version != 4:
                    break
                ends.append(_hex_address(ip.packed))
            else:
                ends.append(_hex_address((ipaddress.IPv6Address(f"::ffff:{ip}") if ip.version == 4 else ip).packed))
        if len(ends) == 2:
            keys.append((table, b"%s:%04X %s:%04X" % (ends[0], client[1], ends[1], server[1])))
    return keys


def peer_uid(client: tuple, server: tuple) -> int | None:
    """The uid owning the client's socket of the TCP connection from ``client`` (the
    server's ``getpeername()``) to ``server`` (its ``getsockname()``), or None when it
    cannot be told. One read of each table at most; only the matching row is parsed."""
    for table, key in _row_keys(client, server):
        try:
            with open(table, "rb") as file:
                text = file.read()
        except OSError:
            continue
        at = text.find(b" " + key + b" ")
        if at < 0:
            continue
        end = text.find(b"\n", at)
        fields = text[at:end if end >= 0 else len(text)].split()
        # local remote st queues timer retransmits uid timeout inode
        if len(fields) < 9:
            return None
        uid, inode = fields[6], fields[8]
        if not uid.isdigit() or not inode.isdigit() or int(inode) == 0:
            return None
        return int(uid)
    return None


def connection_peer_uid(connection: socket.socket) -> int | None:
    """``peer_uid`` of an accepted connection; None when it is not TCP or already closed."""
    try:
        return peer_uid(connection.getpeername(), connection.getsockname())
    except (OSError, ValueError, IndexError):
        return None
