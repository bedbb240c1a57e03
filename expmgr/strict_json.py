"""JSON read strictly: an object naming a key twice is an error naming the key, not the
last value silently winning (json.loads alone keeps the last). The one reader of JSON a
user or a client sends: a search-space file (config) and every request body (server)::

    strict_json.loads('{"x": 1, "x": 2}')   # DuplicateKeyError: duplicate key 'x'
"""
from __future__ import annotations

import json
from typing import Any


class DuplicateKeyError(ValueError):
    """An object of the JSON names ``key`` twice."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key = key


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise DuplicateKeyError(key)
        result[key] = value
    return result


DECODER = json.JSONDecoder(object_pairs_hook=_object_without_duplicates)
"""For reading JSON piece by piece (``DECODER.raw_decode``), as strictly as ``loads``."""


def loads(text: str | bytes) -> Any:
    """``json.loads`` refusing duplicate keys (DuplicateKeyError, a ValueError)."""
    return json.loads(text, object_pairs_hook=_object_without_duplicates)
