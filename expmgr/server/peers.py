"""Which user is at the other end of a loopback TCP connection, as Linux tells: the uid
that owns the client's socket. auth.py lets a token-less request through only from the
server's own user::

    uid = peer_uid(connection.getpeername(), connection.getsockname())   # None: cannot tell

Asked first of the kernel's socket diagnostics (netlink ``SOCK_DIAG_BY_FAMILY``, the exact
socket of the client's address and port to the server's: about 0.05 ms, however many
connections the machine has), else read from ``/proc/net/tcp`` and ``/proc/net/tcp6``: the
row whose local address is the client's end and whose remote address is the server's end
(a whole read of the table, which grows with the machine's connections: milliseconds,
tests/perf/peer_uid.py).

None (refuse) when neither can be read (not Linux), when no socket matches, or when the
client's socket has no owner any more (its inode is 0: the client closed it, and the
kernel then shows uid 0, which must not pass for root).
"""
from __future__ import annotations

import errno
import ipaddress
import socket
import struct
import sys

TABLES = ("/proc/net/tcp", "/proc/net/tcp6")


def can_tell_peers() -> bool:
    """Whether this system shows who owns a TCP socket (socket diagnostics answer, or
    Linux's /proc/net/tcp is readable)."""
    try:
        uid_from_diag(("127.0.0.1", 1), ("127.0.0.1", 1))  # no such socket: an answer all the same
        return True
    except CannotAsk:
        pass
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


_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLMSG_ERROR = 2
_NLMSG_HEADER = struct.Struct("=IHHII")
_NO_COOKIE = 0xFFFFFFFF
_UID_AT = _NLMSG_HEADER.size + 4 + 48 + 12
"""inet_diag_msg: family, state, timer, retrans; the socket id (48 bytes); expires, rqueue,
wqueue; then uid and inode."""


class CannotAsk(Exception):
    """Socket diagnostics are not available here (not Linux, or refused)."""


def uid_from_diag(client: tuple, server: tuple) -> int | None:
    """The uid from the kernel's socket diagnostics; None when no such socket (or no owner)."""
    host = client[0].split("%")[0]
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        def address(text: str) -> bytes:
            return socket.inet_pton(family, text.split("%")[0]).ljust(16, b"\0")
        socket_id = (struct.pack("!HH", client[1], server[1]) + address(client[0]) + address(server[0])
                     + struct.pack("=III", 0, _NO_COOKIE, _NO_COOKIE))
        request = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + socket_id
        header = _NLMSG_HEADER.pack(_NLMSG_HEADER.size + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0)
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as diag:
            diag.settimeout(5)
            diag.sendto(header + request, (0, 0))
            answer = diag.recv(65536)
    except (AttributeError, OSError, ValueError) as error:
        raise CannotAsk(str(error)) from None
    kind = _NLMSG_HEADER.unpack_from(answer)[1] if len(answer) >= _NLMSG_HEADER.size else None
    if kind == _NLMSG_ERROR and len(answer) >= _NLMSG_HEADER.size + 4:
        if -struct.unpack_from("=i", answer, _NLMSG_HEADER.size)[0] == errno.ENOENT:
            return None  # no such socket: the client is gone
        raise CannotAsk("refused")
    if kind != _SOCK_DIAG_BY_FAMILY or len(answer) < _UID_AT + 8:
        raise CannotAsk("unexpected answer")
    uid, inode = struct.unpack_from("=II", answer, _UID_AT)
    return uid if inode else None


def peer_uid(client: tuple, server: tuple) -> int | None:
    """The uid owning the client's socket of the TCP connection from ``client`` (the
    server's ``getpeername()``) to ``server`` (its ``getsockname()``), or None when it
    cannot be told."""
    try:
        return uid_from_diag(client, server)
    except CannotAsk:
        return uid_from_tables(client, server)


def uid_from_tables(client: tuple, server: tuple) -> int | None:
    """``peer_uid`` from /proc/net/tcp{,6}: one read of each table at most; only the
    matching row is parsed."""
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
