"""The framed JSON command channel between the manager and the dispatcher.

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8
JSON, one object per frame. The manager sends requests ``{"id": n, "cmd": ...}``;
the dispatcher answers each with ``{"id": n, ...}`` or ``{"id": n, "error": tb}``;
a request with ``"reply": false`` is answered only if it fails. A frame larger
than MAX_FRAME is refused by the writer (ProtocolError) and, should one come,
skipped by the reader; large imports go as several ``import_data`` frames
(``chunks``). See docs/architecture.md for the commands.
"""
from __future__ import annotations

import json
import struct
from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO

_HEADER = struct.Struct(">I")
HEADER_SIZE = _HEADER.size
MAX_FRAME = 64 * 1024 * 1024
IMPORT_CHUNK_RECORDS = 1000
"""Records per ``import_data`` frame: each frame is handled in one go by the tuner, and
the manager's loop runs other work between frames."""


class ProtocolError(Exception):
    """A frame that is too large or not a JSON object."""


class FrameTooLarge(ProtocolError):
    """A frame over MAX_FRAME; ``length`` is its size in bytes."""

    def __init__(self, length: int) -> None:
        super().__init__(f"a message of {length:,} bytes exceeds the channel's limit of {MAX_FRAME:,} bytes")
        self.length = length


def encode_frame(message: dict[str, Any]) -> bytes:
    """The frame of ``message``; FrameTooLarge rather than a frame the reader would refuse."""
    body = json.dumps(message, separators=(",", ":")).encode()
    if len(body) > MAX_FRAME:
        raise FrameTooLarge(len(body))
    return _HEADER.pack(len(body)) + body


def decode_length(header: bytes) -> int:
    (length,) = _HEADER.unpack(header)
    if length > MAX_FRAME:
        raise FrameTooLarge(length)
    return length


def decode_body(body: bytes) -> dict[str, Any]:
    try:
        message = json.loads(body)
    except (ValueError, RecursionError) as error:
        raise ProtocolError(f"a frame must hold JSON: {str(error)[:200]}") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"a frame must hold a JSON object, got {type(message).__name__}")
    return message


def read_frame(stream: BinaryIO) -> dict[str, Any] | None:
    """Read one frame from a blocking binary stream; None at end of stream.

    Raises ProtocolError for a frame it cannot use, after reading all of it, so the
    next frame can still be read."""
    header = stream.read(HEADER_SIZE)
    if len(header) < HEADER_SIZE:
        return None
    (length,) = _HEADER.unpack(header)
    if length > MAX_FRAME:
        left = length
        while left > 0:   # skip it without holding it
            skipped = stream.read(min(left, 1024 * 1024))
            if not skipped:
                return None
            left -= len(skipped)
        raise FrameTooLarge(length)
    body = stream.read(length)
    if len(body) < length:
        return None
    return decode_body(body)


def write_frame(stream: BinaryIO, message: dict[str, Any]) -> None:
    stream.write(encode_frame(message))
    stream.flush()


def chunks(records: Sequence[Any], size: int = IMPORT_CHUNK_RECORDS) -> Iterator[Sequence[Any]]:
    """``records`` in slices of at most ``size``, in order."""
    for start in range(0, len(records), size):
        yield records[start:start + size]
