"""The dispatcher channel under oversized and malformed messages: the manager refuses to
write a frame over MAX_FRAME (ProtocolError, nothing sent), the dispatcher answers a frame
it cannot use with a non-fatal error and goes on, and imports go in chunks."""
from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import pytest

from expmgr.dispatcher.protocol import MAX_FRAME, FrameTooLarge, ProtocolError, encode_frame, read_frame, write_frame
from expmgr.dispatcher.client import DispatcherClient
from tests.helpers.dispatcher import ask, dispatcher  # noqa: F401 - the fixture

GRID = {"x": {"_type": "randint", "_value": [0, 3000]}}


def test_encoder_refuses_a_frame_over_the_limit_naming_its_size():
    with pytest.raises(FrameTooLarge, match=r"a message of [\d,]+ bytes exceeds the channel's limit of 67,108,864"):
        encode_frame({"cmd": "import_data", "data": "x" * MAX_FRAME})


def test_dispatcher_answers_frames_it_cannot_use_and_goes_on(dispatcher):  # noqa: F811
    process, log = dispatcher
    # An oversized frame (as an older manager wrote them): skipped, answered, not fatal.
    process.stdin.write(struct.pack(">I", MAX_FRAME + 1) + b" " * (MAX_FRAME + 1))
    process.stdin.flush()
    reply = read_frame(process.stdout)
    assert reply["id"] is None and reply["fatal"] is False and "exceeds the channel's limit" in reply["error"]
    # Not JSON, and not an object.
    for body in (b"{not json", b"[1, 2]"):
        process.stdin.write(struct.pack(">I", len(body)) + body)
        process.stdin.flush()
        reply = read_frame(process.stdout)
        assert reply["fatal"] is False and "a frame must hold" in reply["error"], reply
    assert ask(process, {"id": 7, "cmd": "no_such_command"}) == {
        "id": 7, "error": "unknown dispatcher command 'no_such_command'", "fatal": False}
    # Still serving.
    assert ask(process, {"id": 8, "cmd": "initialize", "search_space": GRID,
                         "tuner": {"name": "GridSearch", "classArgs": {}}, "assessor": None}) == {"id": 8}
    assert process.poll() is None
    assert "refused a command" in log.read_text()


def test_client_refuses_an_oversized_notification_before_writing_and_imports_in_chunks(tmp_path: Path):
    async def scenario() -> None:
        client = DispatcherClient(tmp_path / "dispatcher.log", "info")
        await client.start()
        try:
            await client.request("initialize", search_space=GRID, tuner={"name": "GridSearch", "classArgs": {}},
                                 assessor=None)
            with pytest.raises(ProtocolError, match="exceeds the channel's limit"):
                client.notify("import_data", data=[{"parameter": {"x": 1}, "value": 1.0, "pad": "x" * MAX_FRAME}])
            frames = []
            sent = await client.import_chunks([{"parameter": {"x": x}, "value": 1.0} for x in range(2500)],
                                              before_each=lambda chunk: frames.append(len(chunk)))
            assert sent == 2500 and frames == [1000, 1000, 500]
            # Every chunk reached the tuner, in order, before this request: the grid goes on at 2500.
            reply = await client.request("generate", parameter_ids=[0])
            assert reply["parameters"][0]["parameters"] == {"x": 2500}
            assert client.failure is None and client.refusals == []
        finally:
            await client.stop()

    asyncio.run(scenario())


def test_a_refused_request_fails_alone_and_the_experiment_channel_goes_on(tmp_path: Path):
    async def scenario() -> None:
        client = DispatcherClient(tmp_path / "dispatcher.log", "info")
        await client.start()
        try:
            with pytest.raises(Exception, match="unknown dispatcher command 'no_such_command'"):
                await client.request("no_such_command")
            await client.request("initialize", search_space=GRID, tuner={"name": "GridSearch", "classArgs": {}},
                                 assessor=None)
            assert client.failure is None and client.refusals == ["unknown dispatcher command 'no_such_command'"]
        finally:
            await client.stop()
        assert client.failure is None

    asyncio.run(scenario())
