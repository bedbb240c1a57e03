"""Giving freed memory back to the system after a burst (imports read, websocket backlogs
written): CPython frees large objects to malloc, and glibc keeps the freed top of its heaps
and its other arenas until told (``malloc_trim``). Elsewhere (not glibc) this does nothing."""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
import threading
from typing import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim  # type: ignore[no-any-return]


def give_back() -> None:
    """Return the freed memory of malloc's heaps to the system, where malloc can (glibc).
    In a thread of its own: trimming a few hundred MB of heap takes about a second, and a
    call through ctypes lets go of the GIL, so the event loop runs on meanwhile."""
    trim = _malloc_trim()
    if trim is not None:
        threading.Thread(target=trim, args=(0,), name="malloc_trim", daemon=True).start()
