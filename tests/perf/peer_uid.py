"""Benchmark: what telling the user of a loopback client costs the server, once per connection
(expmgr/server/peers.py), with many other TCP connections open on the machine: the kernel's
socket diagnostics (netlink, what the server asks first) and the /proc/net/tcp read (its
fallback).

    .venv/bin/python tests/perf/peer_uid.py [--open 0 1000 5000] [--rounds 200]

For each count, it opens that many idle loopback connections (twice as many rows in
/proc/net/tcp: both ends; the descriptor limit bounds the count), then times each lookup on
one more accepted connection ``--rounds`` times and prints the median and worst, and the
table's size. It measures, it does not assert.
"""
from __future__ import annotations

import argparse
import resource
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from expmgr.server.peers import TABLES, uid_from_diag, uid_from_tables  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--open", type=int, nargs="+", default=[0, 1000, 5000])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    address = listener.getsockname()
    held: list[socket.socket] = []
    for count in sorted(args.open):
        while len(held) < 2 * count:
            client = socket.create_connection(address)
            held += [client, listener.accept()[0]]
        client = socket.create_connection(address)
        accepted = listener.accept()[0]
        size = len(Path(TABLES[0]).read_bytes())
        for name, lookup in (("netlink", uid_from_diag), ("/proc/net/tcp", uid_from_tables)):
            timings = []
            for _ in range(args.rounds):
                started = time.perf_counter()
                uid = lookup(accepted.getpeername(), accepted.getsockname())
                timings.append(time.perf_counter() - started)
            assert uid is not None
            print(f"{count:6d} other connections ({size / 1e6:5.2f} MB of {TABLES[0]}), {name:14s}: median "
                  f"{statistics.median(timings) * 1e3:7.3f} ms, worst {max(timings) * 1e3:7.3f} ms per lookup")
        client.close()
        accepted.close()
    for sock in held:
        sock.close()
    listener.close()


if __name__ == "__main__":
    main()
