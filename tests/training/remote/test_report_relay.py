"""The report relay's bounds, on a real socket pair: what a host's connection sends is
hostile until it is a trial's report (the relay end to end: test_remote_service.py)."""
from __future__ import annotations

import asyncio
import socket

from expmgr.training.remote._report_relay import ReportRelay, relay_report


async def _answer_of(sent: bytes, head_timeout: float) -> bytes:
    ours, theirs = socket.socketpair()
    with theirs:
        reader, writer = await asyncio.open_connection(sock=ours)
        theirs.sendall(sent)   # (before the relay reads: at most the socket's buffer, which these fit)
        # port 9 of loopback: nothing is relayed in these cases, the relay answers itself
        await relay_report(reader, writer, "127.0.0.1", 9, head_timeout=head_timeout)
        theirs.setblocking(False)
        loop = asyncio.get_running_loop()
        answer = b""
        # read on the loop: the relay's answer is written and its end closed as the loop runs
        while chunk := await asyncio.wait_for(loop.sock_recv(theirs, 65536), 30):
            answer += chunk
        return answer


def test_a_connection_that_sends_no_head_in_time_is_answered_408_and_closed():
    answer = asyncio.run(_answer_of(b"POST /api/v1/expmgr/trials/abc/metrics HTTP/1.1\r\n", head_timeout=0.2))
    assert answer.startswith(b"HTTP/1.1 408 "), answer


def test_a_request_other_than_a_report_is_refused_without_reaching_the_server():
    answer = asyncio.run(_answer_of(b"GET /api/v1/nni/experiment HTTP/1.1\r\nHost: x\r\n\r\n", head_timeout=5))
    assert answer.startswith(b"HTTP/1.1 403 ") and b"only a trial's metric report" in answer, answer


def test_an_overlong_head_is_refused():
    answer = asyncio.run(_answer_of(b"POST /" + b"a" * 40_000, head_timeout=5))
    assert answer.startswith(b"HTTP/1.1 400 "), answer


async def _connect(relay: ReportRelay) -> tuple[socket.socket, asyncio.Task]:
    """A connection to ``relay`` (our end, and the relay's handling of it as a task)."""
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)
    theirs.setblocking(False)
    return theirs, asyncio.ensure_future(relay(reader, writer))


async def _read_all(sock: socket.socket) -> bytes:
    loop, answer = asyncio.get_running_loop(), b""
    while chunk := await asyncio.wait_for(loop.sock_recv(sock, 65536), 30):
        answer += chunk
    return answer


def test_a_host_has_at_most_max_open_connections_relayed_and_more_are_answered_503_at_once():
    async def scenario() -> None:
        relay = ReportRelay("127.0.0.1", 9, max_open=2, head_timeout=60)
        held = [await _connect(relay) for _ in range(2)]   # silent: held until their head timeout
        await asyncio.sleep(0)   # (let them start)
        assert relay.open == 2
        extra, extra_task = await _connect(relay)
        answer = await _read_all(extra)    # at once: the held ones still wait for their heads
        assert answer.startswith(b"HTTP/1.1 503 ") and b"kept in metrics.jsonl" in answer, answer
        await extra_task
        for sock, task in held:   # they hang up: their places are free again
            sock.close()
            await asyncio.wait_for(task, 30)
        assert relay.open == 0
        later, later_task = await _connect(relay)
        later.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await _read_all(later)).startswith(b"HTTP/1.1 403 ")
        await later_task
        extra.close()
        later.close()

    asyncio.run(scenario())
