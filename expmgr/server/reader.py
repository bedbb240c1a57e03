"""A read-only store on a worker thread of its own, for answers too big to build on the
event loop: the changes of 10,000 trials take a good part of a second, and the loop also
takes the trials' reports. SQLite does its part of the work without holding the GIL::

    reader = StoreReader(paths)
    text = await reader.run(lambda store: views.trial_jobs_view(store, files))
    reader.close()
"""
from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Callable, TypeVar

from expmgr.layout import ExperimentPaths
from expmgr.store import Store, open_store

T = TypeVar("T")


class StoreReader:
    """Runs functions of a read-only store, one at a time, on one thread."""

    def __init__(self, paths: ExperimentPaths) -> None:
        self._paths = paths
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._store: Store | None = None

    async def run(self, function: Callable[[Store], T]) -> T:
        """``function(store)`` on the reader's thread; its result or its exception."""
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="expmgr-store-reader")
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._call, function)

    def _call(self, function: Callable[[Store], T]) -> T:
        if self._store is None:
            self._store = open_store(self._paths, readonly=True)
        return function(self._store)

    def close(self) -> None:
        """Wait for the function running, if any, and close the store; idempotent."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)  # its thread has ended: the store is ours to close
        if self._store is not None:
            self._store.close()
            self._store = None
