"""An import's body read record by record (expmgr/engine/imports.py): the same records and
the same refusals as one json.loads, held as frames of JSON text."""
from __future__ import annotations

import asyncio
import json

import pytest

from expmgr.dispatcher.protocol import IMPORT_CHUNK_RECORDS
from expmgr.engine.errors import UpdateRefused
from expmgr.engine.imports import read_import


def read(body: bytes) -> list[object]:
    batch = asyncio.run(read_import(body))
    records = [record for chunk in batch.chunks() for record in chunk]
    assert len(records) == batch.count and not batch.frames
    return records


def test_the_records_come_back_as_they_were_sent_in_frames_of_a_thousand():
    records = [{"parameter": {"x": index, "note": "é"}, "value": index / 7}
               for index in range(2 * IMPORT_CHUNK_RECORDS + 1)]
    body = json.dumps(records, indent=1).encode()
    batch = asyncio.run(read_import(body))
    assert [len(json.loads(frame)) for frame in batch.frames] == [IMPORT_CHUNK_RECORDS, IMPORT_CHUNK_RECORDS, 1]
    assert read(body) == records
    assert read(b" [ ] ") == []


@pytest.mark.parametrize("body, message", [
    (b"[{]", "body: not JSON (Expecting property name enclosed in double quotes"),
    (b'[{"parameter": {}, "value": 1} {"parameter": {}, "value": 1}]', "body: not JSON (expected ',' or ']' at char 30)"),
    (b'[{"parameter": {}, "value": 1}] x', "body: not JSON (extra data at char 32)"),
    (b'[{"parameter": {}, "value": 1}', "body: not JSON (expected ',' or ']' at char 30)"),
    (b'{"parameter": {}}', "body: expected a list of records, got dict"),
    (b'\xff', "body: not JSON ('utf-8' codec can't decode"),
    (b'[{"parameter": {}, "value": 1}, {"parameter": 3, "value": 1}]', "[1].parameter: expected a dict of parameters"),
    (b'[{"parameter": {}, "value": NaN}]', "[0].value: not a finite number"),
])
def test_a_bad_body_is_refused_naming_what_and_where(body: bytes, message: str):
    with pytest.raises(UpdateRefused) as refused:
        asyncio.run(read_import(body))
    assert str(refused.value).startswith(message), str(refused.value)


def test_values_as_nnis_json_strings_are_decoded_and_checked():
    """What ``GET export-data`` gives (``value`` a JSON string, as NNI keeps it) is decoded,
    as NNI's dispatcher does; a number or dict stays; a string that is not a finite result is refused."""
    body = json.dumps([{"parameter": {"x": 1}, "value": json.dumps(1 / 3), "trialJobId": "a"},
                       {"parameter": {"x": 2}, "value": '{"default": 0.25, "loss": 2}'},
                       {"parameter": {"x": 3}, "value": 0.5}]).encode()
    assert [record["value"] for record in read(body)] == [1 / 3, {"default": 0.25, "loss": 2}, 0.5]
    for value, message in (("high", "[0].value: expected a number"), ('"NaN"', "[0].value: expected a number"),
                           ("NaN", "[0].value: not a finite number")):
        with pytest.raises(UpdateRefused) as refused:
            asyncio.run(read_import(json.dumps([{"parameter": {}, "value": value}]).encode()))
        assert str(refused.value).startswith(message), (value, str(refused.value))
