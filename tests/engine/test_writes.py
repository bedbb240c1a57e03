"""Queued writes (engine/writes.py): what is said of the writes left when the experiment ended."""
from __future__ import annotations

import asyncio

from expmgr.engine.writes import FINAL_WRITE_PATIENCE, WriteQueue
from expmgr.store import StoreUnavailable


def test_the_writes_left_unrecorded_are_counted_with_why_and_where():
    async def left() -> tuple[int, str]:
        queue = WriteQueue(record_outage=lambda at, reason: None, on_paused=lambda reason: None,
                           on_resumed=lambda: None, on_failed=lambda name: None)
        queue.refused(StoreUnavailable("the disk is full", reason="disk full"))   # queues the outage's record
        queue.commit(lambda: None)
        queue.commit(lambda: None)
        line = queue.unrecorded("DONE", "/exp/db/experiment.sqlite")
        queue.close()
        return len(queue), line
    count, line = asyncio.run(left())
    assert count == 3
    assert line.startswith(f"the experiment ended DONE, but /exp/db/experiment.sqlite could not be written for "
                           f"{FINAL_WRITE_PATIENCE:g}s (disk full): its last 3 change(s)")
