"""The slot's side of the Ray service without a shared folder (``ray_node_files``), without Ray:
the node's trial folder, the output taken by offset in bounded answers, the end, the
checkpoint's round trip through the store. End to end on a cluster: test_ray_no_shared_folder.py."""
from __future__ import annotations

import asyncio
import secrets
import shutil
from pathlib import Path
from typing import Iterator

import pytest

from expmgr.training.checkpoint_storage import CheckpointStorage
from expmgr.training.ray_files import node_local_folder
from expmgr.training.ray_node_files import MAX_TAKE_BYTES, NodeTrialFiles


@pytest.fixture
def spec(tmp_path: Path) -> Iterator[dict]:
    experiment_id = "t" + secrets.token_hex(6)
    yield {"trial_id": "Ab1", "attempt": 1, "node_dir": str(node_local_folder(experiment_id, "Ab1")),
           "parameters": {"parameter_id": 0, "parameters": {"x": 1}},
           "storage": CheckpointStorage(str(tmp_path / "store"), experiment_id)}
    shutil.rmtree(node_local_folder(experiment_id, "Ab1").parent, ignore_errors=True)


async def take_all(files: NodeTrialFiles, got: dict[str, bytes] | None = None
                   ) -> tuple[dict[str, bytes], list[int], str | None]:
    """Every answer until done: the bytes per file (after those in ``got``), each answer's size, the marker."""
    got = dict(got or {})
    sizes = []
    while True:
        answer = await files.take("Ab1", 1, 5.0)
        sizes.append(sum(len(data) for _, _, data in answer["chunks"]))
        for name, offset, data in answer["chunks"]:
            assert offset == len(got.get(name, b"")), "in order, no gap"
            got[name] = got.get(name, b"") + data
        if answer["done"]:
            return got, sizes, answer["preempting"]


def test_output_is_taken_in_bounded_answers_all_of_it_before_done_and_the_folder_is_then_removed(spec):
    async def scenario():
        files = NodeTrialFiles()
        folder = await files.prepare(spec)
        assert folder.parameter_file.read_text() == '{"parameter_id": 0, "parameters": {"x": 1}}'
        big = b"".join(b"line %d\n" % i for i in range(600_000))  # over 4 MiB: several answers
        folder.stdout.write_bytes(big)
        folder.metrics.write_bytes(b'{"type": "FINAL"}\n')
        folder.preempting_marker.write_text("1")
        first = await files.take("Ab1", 1, 5.0)
        assert not first["done"] and 0 < sum(len(d) for _, _, d in first["chunks"]) <= MAX_TAKE_BYTES
        with open(folder.stdout, "ab") as out:   # written before the end: still sent
            out.write(b"last line\n")
        await files.finish("Ab1", 1)
        got, sizes, marker = await take_all(files, {"stdout": b"".join(data for _, _, data in first["chunks"])})
        return folder, first, got, sizes, marker

    folder, first, got, sizes, marker = asyncio.run(scenario())
    assert {name for name, _, _ in first["chunks"]} == {"stdout"}, "the first file's bounded share"
    assert got["stdout"] == b"".join(b"line %d\n" % i for i in range(600_000)) + b"last line\n"
    assert got["metrics.jsonl"] == b'{"type": "FINAL"}\n' and marker == "1"
    assert max(sizes) <= MAX_TAKE_BYTES, "the slot holds one bounded answer at a time"
    assert not folder.root.exists(), "removed once all was taken"


def test_a_take_waits_for_output_and_answers_as_soon_as_some_is_written(spec):
    async def scenario():
        files = NodeTrialFiles()
        folder = await files.prepare(spec)
        waiting = asyncio.ensure_future(files.take("Ab1", 1, 60.0))
        await asyncio.sleep(0)
        assert not waiting.done()
        with open(folder.stdout, "ab") as out:
            out.write(b"hello\n")
        answer = await asyncio.wait_for(waiting, 30.0)   # long before its 60 s
        await files.finish("Ab1", 1)
        await take_all(files)
        return answer

    answer = asyncio.run(scenario())
    assert answer["chunks"] == [("stdout", 0, b"hello\n")] and not answer["done"]


def test_the_checkpoint_is_uploaded_at_the_end_and_downloaded_by_the_next_attempt(spec):
    async def scenario():
        files = NodeTrialFiles()
        folder = await files.prepare(spec)
        assert not any(folder.checkpoint_dir.glob("*")), "nothing stored yet"
        folder.checkpoint_dir.mkdir(exist_ok=True)
        (folder.checkpoint_dir / "state").write_text("epoch 3")
        await files.finish("Ab1", 1)
        await take_all(files)
        assert not folder.root.exists()
        again = await files.prepare({**spec, "attempt": 2})
        return (again.checkpoint_dir / "state").read_text()

    assert asyncio.run(scenario()) == "epoch 3"
    assert (Path(spec["storage"].location("Ab1")) / "state").read_text() == "epoch 3"
