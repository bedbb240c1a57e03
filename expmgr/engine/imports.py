"""Results imported into the tuner (NNI's ``import-data``), checked and held compactly
until the tuner takes them::

    batch = await read_import(body)   # UpdateRefused naming the first bad record
    runner.import_data(batch, on_taken=release)
    await send_import(dispatcher, batch, lock, record_import=store.record_import, logger=logger)   # the runner's task

The body is read one record at a time (``json.JSONDecoder.raw_decode``) on the event loop,
which runs other work every RECORDS_PER_TURN records (a millisecond or two: several imports
read at once share each turn); never in one ``json.loads``, which
for 16 MB holds the GIL for a second (stalling the loop even from a thread: so does any
CPU-bound thread, the loop waiting for the GIL at each of its system calls) and keeps every
record as Python objects (about seven times the body's size). The records are held as the
JSON text of their frames (protocol.IMPORT_CHUNK_RECORDS each), about the body's size,
until sent.
"""
from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from expmgr import strict_json
from expmgr.dispatcher.protocol import IMPORT_CHUNK_RECORDS
from expmgr.engine import reports
from expmgr.engine.errors import MetricRejected, RefusalKind, UpdateRefused
from expmgr.metrics import metric_number

if TYPE_CHECKING:
    from expmgr.engine.dispatching import Dispatcher

RECORDS_PER_TURN = 100
"""Records read and checked in one turn of the event loop (about a millisecond of 300-byte records)."""
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_AFTER_RECORD = re.compile(r"[ \t\n\r]*([,\]])[ \t\n\r]*")


@dataclass
class ImportBatch:
    """Checked records, as the JSON text of lists of at most IMPORT_CHUNK_RECORDS records."""

    frames: list[str] = field(default_factory=list)
    count: int = 0

    def chunks(self) -> Iterator[list[dict[str, Any]]]:
        """The records, a frame's worth at a time; each frame's text is dropped once read."""
        while self.frames:
            yield json.loads(self.frames.pop(0))


NON_FINITE_NAMES = ("NaN", "Infinity", "-Infinity")
"""How an export writes a non-finite result (views.json_safe): such a record is no use to a tuner."""


def decoded_value(value: Any) -> Any:
    """A record's ``value`` as a tuner takes it: NNI's export keeps it a JSON string (``"0.5"``,
    ``"{\"default\": 0.5}"``), which is decoded, as NNI's dispatcher does; a number or a
    dict (expctl's own form, or a hand-written file) is kept. A string that is not JSON is
    kept as it is, for check_record to refuse."""
    if not isinstance(value, str):
        return value
    try:
        return strict_json.loads(value)
    except (ValueError, RecursionError):
        return value


def is_non_finite_result(value: Any) -> bool:
    """Whether an exported ``value`` (decoded or not) is a non-finite result, as an export
    names one: ``"NaN"``, ``"Infinity"``, ``"-Infinity"``, or a dict with one under ``default``."""
    if not (isinstance(value, str) and value in NON_FINITE_NAMES):  # "NaN" alone decodes to a float
        value = decoded_value(value)
    number = value.get("default") if isinstance(value, dict) else value
    if isinstance(number, float):
        return not math.isfinite(number)
    return isinstance(number, str) and number in NON_FINITE_NAMES


def decoded_record(record: Any) -> Any:
    """``record`` with its ``value`` decoded (``decoded_value``); anything else as it is."""
    if isinstance(record, dict) and isinstance(record.get("value"), str):
        return {**record, "value": decoded_value(record["value"])}
    return record


def check_record(index: int, record: Any) -> None:
    """UpdateRefused naming ``[index]`` when ``record`` is not ``{"parameter": {...}, "value": finite}``
    (``value`` decoded first: see ``decoded_record``)."""
    if not isinstance(record, dict) or not isinstance(record.get("parameter"), dict):
        raise UpdateRefused(RefusalKind.INVALID, f"[{index}].parameter: expected a dict of parameters")
    try:
        reports.check_metric_value(record.get("value"), f"[{index}].value")
    except MetricRejected as error:
        raise UpdateRefused(RefusalKind.INVALID, str(error)) from None
    try:
        finite = metric_number(record["value"]) is not None
    except OverflowError:   # an integer beyond any float
        finite = False
    if not finite:
        raise UpdateRefused(RefusalKind.INVALID, f"[{index}].value: not a finite number; tuners are given "
                                                  "finite results only")


async def batch_of(records: Any) -> ImportBatch:
    """The batch of parsed ``records`` (a list), each checked."""
    if not isinstance(records, list):
        raise UpdateRefused(RefusalKind.INVALID, f"body: expected a list of records, got {type(records).__name__}")
    return await _compact(iter(records))


async def read_import(body: bytes) -> ImportBatch:
    """The batch of a JSON body, read record by record; UpdateRefused (INVALID) for a body
    that is not JSON, not a list, or holds a bad record."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UpdateRefused(RefusalKind.INVALID, f"body: not JSON ({error})") from None
    del body  # freed here when the caller kept no reference to it
    start = _WHITESPACE.match(text).end()  # type: ignore[union-attr] # matches the empty string
    if not text.startswith("[", start):
        try:
            records = strict_json.loads(text)
        except strict_json.DuplicateKeyError as error:
            raise UpdateRefused(RefusalKind.INVALID, f"body: {error}") from None
        except (ValueError, RecursionError) as error:
            raise UpdateRefused(RefusalKind.INVALID, f"body: not JSON ({error})") from None
        return await batch_of(records)
    return await _compact(_array_items(text, start))


def _array_items(text: str, start: int) -> Iterator[Any]:
    """The items of the JSON array at ``text[start]``, one ``raw_decode`` each."""
    position = _WHITESPACE.match(text, start + 1).end()  # type: ignore[union-attr]
    if text.startswith("]", position):
        end = position + 1
    else:
        while True:
            try:
                item, position = strict_json.DECODER.raw_decode(text, position)
            except strict_json.DuplicateKeyError as error:
                raise UpdateRefused(RefusalKind.INVALID, f"body: {error}") from None
            except (ValueError, RecursionError) as error:
                raise UpdateRefused(RefusalKind.INVALID, f"body: not JSON ({error})") from None
            yield item
            after = _AFTER_RECORD.match(text, position)
            if after is None:
                raise UpdateRefused(RefusalKind.INVALID, f"body: not JSON (expected ',' or ']' at char {position})")
            if after.group(1) == "]":
                end = after.start(1) + 1
                break
            position = after.end()
    rest = _WHITESPACE.match(text, end).end()  # type: ignore[union-attr]
    if rest != len(text):
        raise UpdateRefused(RefusalKind.INVALID, f"body: not JSON (extra data at char {rest})")


async def _compact(records: Iterator[Any]) -> ImportBatch:
    batch = ImportBatch()
    chunk: list[Any] = []
    for index, record in enumerate(records):
        if index and index % RECORDS_PER_TURN == 0:
            await asyncio.sleep(0)  # the loop's other work
        record = decoded_record(record)  # NNI's export form: value as a JSON string
        check_record(index, record)
        chunk.append(record)
        if len(chunk) == IMPORT_CHUNK_RECORDS:
            batch.frames.append(json.dumps(chunk, separators=(",", ":")))
            chunk = []
        batch.count += 1
    if chunk:
        batch.frames.append(json.dumps(chunk, separators=(",", ":")))
    return batch


async def send_import(dispatcher: "Dispatcher", batch: ImportBatch, lock: asyncio.Lock, *,
                      record_import: Callable[[Sequence[Any]], None], logger: logging.Logger,
                      on_taken: Callable[[], None] | None = None) -> None:
    """Send ``batch`` to the tuner a frame at a time (``record_import`` stores each frame
    before it is sent), holding ``lock``: frames of several imports in one turn of the loop
    would add up to a stall. A failure (say the store refused a write) is the import's
    problem, not the experiment's: it is logged. ``on_taken`` is called once done with the
    batch (sent, or failed), whose frames are then dropped."""
    count = batch.count
    try:
        async with lock:
            sent = await dispatcher.import_frames(batch.chunks(), before_each=record_import)
    except Exception:
        logger.error("importing %d results failed:\n%s", count, traceback.format_exc())
        return
    finally:
        batch.frames.clear()
        if on_taken is not None:
            on_taken()
    if sent < count:
        logger.warning("%d of %d imported results reached the tuner before it ended", sent, count)
    else:
        logger.info("%d results imported into the tuner", count)
