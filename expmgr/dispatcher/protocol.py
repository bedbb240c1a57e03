"""The framed JSON command channel between the manager and the dispatcher.

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8
JSON, one object per frame. The manager sends requests ``{"id": n, "cmd": ...}``;
the dispatcher answers each with ``{"id": n, ...}`` or ``{"id": n, "error": tb}``;
a request with ``"reply": false`` is answered only if it fails.
See docs/architecture.md for the commands.
"""
from __future__ import annotations

import json
import struct
from typing import Any, BinaryIO

_HEADER = struct.Struct(">I")
HEADER_SIZE = _HEADER.size
MAX_FRAME = 64 * 1024 * 1024


class ProtocolError(Exception):
    """A frame that is too large or not a JSON object."""


def encode_frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    return _HEADER.pack(len(body)) + body


def decode_length(header: bytes) -> int:
    (length,) = _HEADER.unpack(header)
    if length > MAX_FRAME:
        raise ProtocolError(f"frame of {length} bytes exceeds the limit of {MAX_FRAME}")
    return length


def decode_body(body: bytes) -> dict[str, Any]:
    message = json.loads(body)
    if not isinstance(message, dict):
        raise ProtocolError(f"a frame must hold a JSON object, got {type(message).__name__}")
    return message


def read_frame(stream: BinaryIO) -> dict[str, Any] | None:
    """Read one frame from a blocking binary stream; None at end of stream."""
    header = stream.read(HEADER_SIZE)
    if len(header) < HEADER_SIZE:
        return None
    length = decode_length(header)
    body = stream.read(length)
    if len(body) < length:
        return None
    return decode_body(body)


def write_frame(stream: BinaryIO, message: dict[str, Any]) -> None:
    stream.write(encode_frame(message))
    stream.flush()
