"""The dispatcher as a real subprocess, spoken to over its framed JSON channel."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

from expmgr.dispatcher.client import DispatcherClient
from expmgr.dispatcher.protocol import ProtocolError, decode_length, encode_frame, read_frame, write_frame
from expmgr.rotation import RotatingWriter, RotationLimits
from tests.helpers.dispatcher import ask, dispatcher

SPACE = {"x": {"_type": "choice", "_value": [1, 2, 3]}}


def test_frames_round_trip_and_oversized_frames_are_refused():
    stream = io.BytesIO()
    write_frame(stream, {"id": 1, "cmd": "generate", "parameter_ids": [0]})
    stream.seek(0)
    assert read_frame(stream) == {"id": 1, "cmd": "generate", "parameter_ids": [0]}
    assert read_frame(stream) is None
    with pytest.raises(ProtocolError, match="exceeds"):
        decode_length(b"\xff\xff\xff\xff")
    assert read_frame(io.BytesIO(encode_frame({"id": 2})[:-1])) is None, "a torn frame is end of stream"


def test_dispatcher_serves_a_grid_then_says_no_more_and_exits_when_its_channel_closes(dispatcher):
    process, log = dispatcher
    assert ask(process, {"id": 1, "cmd": "initialize", "search_space": SPACE,
                         "tuner": {"name": "GridSearch", "classArgs": {}}, "assessor": None}) == {"id": 1}
    reply = ask(process, {"id": 2, "cmd": "generate", "parameter_ids": [0, 1, 2, 3]})
    assert reply["no_more"] is True
    assert [p["parameters"] for p in reply["parameters"]] == [{"x": 1}, {"x": 2}, {"x": 3}]
    write_frame(process.stdin, {"id": 3, "cmd": "report", "reply": False, "parameter_id": 0,
                                "parameters": {"x": 1}, "value": 0.5})
    assert ask(process, {"id": 4, "cmd": "trial_end", "parameter_id": 0, "trial_id": "abcde",
                         "success": True}) == {"id": 4}, "the notification before it got no reply"
    process.stdin.close()
    assert process.wait(timeout=30) == 0
    assert "tuner GridSearchTuner ready" in log.read_text()


def test_a_failing_command_is_answered_with_its_traceback_and_ends_the_dispatcher(dispatcher):
    process, log = dispatcher
    reply = ask(process, {"id": 1, "cmd": "initialize", "search_space": SPACE,
                          "tuner": {"name": "Random", "classArgs": {"sead": 1}}, "assessor": None})
    assert reply["id"] == 1
    assert "AlgorithmError" in reply["error"] and "'sead'" in reply["error"]
    assert process.wait(timeout=30) == 1
    assert "'sead'" in log.read_text()


def test_what_a_tuner_prints_goes_to_the_log_not_into_the_channel(dispatcher, tmp_path: Path):
    process, log = dispatcher
    (tmp_path / "noisy.py").write_text(
        "from expmgr.algorithms.tuner import Tuner\n"
        "class Noisy(Tuner):\n"
        "    def update_search_space(self, space):\n"
        "        print('hello from the tuner')\n"
        "    def generate_parameters(self, parameter_id, **kwargs):\n"
        "        print('generating', parameter_id)\n"
        "        return {'x': parameter_id}\n")
    assert ask(process, {"id": 1, "cmd": "initialize", "search_space": SPACE, "assessor": None,
                         "tuner": {"className": "noisy.Noisy", "codeDirectory": str(tmp_path)}}) == {"id": 1}
    assert ask(process, {"id": 2, "cmd": "generate", "parameter_ids": [7]})["parameters"] == [
        {"parameter_id": 7, "parameters": {"x": 7}}]
    process.stdin.close()
    assert process.wait(timeout=30) == 0
    assert "hello from the tuner" in log.read_text() and "generating 7" in log.read_text()


def test_a_result_the_tuner_cannot_use_is_logged_and_the_dispatcher_goes_on(dispatcher):
    process, log = dispatcher
    space = {"x": {"_type": "uniform", "_value": [0, 1]}}
    assert ask(process, {"id": 1, "cmd": "initialize", "search_space": space,
                         "tuner": {"name": "TPE", "classArgs": {"seed": 1}}, "assessor": None}) == {"id": 1}
    generated = ask(process, {"id": 2, "cmd": "generate", "parameter_ids": [0]})["parameters"][0]
    write_frame(process.stdin, {"id": 3, "cmd": "report", "reply": False, "parameter_id": 0,
                                "parameters": generated["parameters"], "value": {"loss": 0.5}})
    reply = ask(process, {"id": 4, "cmd": "generate", "parameter_ids": [1]})
    assert reply["id"] == 4 and len(reply["parameters"]) == 1 and process.poll() is None
    assert "cannot use the result of parameter id 0" in log.read_text()


def test_generate_says_when_the_tuner_waits_and_where_a_checkpoint_comes_from(dispatcher):
    process, _ = dispatcher
    space = {"lr": {"_type": "uniform", "_value": [0, 1]}}
    ask(process, {"id": 1, "cmd": "initialize", "search_space": space, "assessor": None,
                  "tuner": {"name": "PBT", "classArgs": {"population_size": 2, "seed": 0}}})
    first = ask(process, {"id": 2, "cmd": "generate", "parameter_ids": [0, 1, 2]})
    assert len(first["parameters"]) == 2 and first["waiting"] is True and first["no_more"] is False
    assert all("checkpoint_from" not in entry for entry in first["parameters"])
    for parameter_id, value in ((0, 0.9), (1, 0.1)):
        write_frame(process.stdin, {"id": 10 + parameter_id, "cmd": "report", "reply": False,
                                    "parameter_id": parameter_id, "parameters": {}, "value": value})
        write_frame(process.stdin, {"id": 20 + parameter_id, "cmd": "trial_end", "reply": False,
                                    "parameter_id": parameter_id, "trial_id": f"t{parameter_id}", "success": True})
    second = ask(process, {"id": 3, "cmd": "generate", "parameter_ids": [2, 3]})
    assert sorted(entry["checkpoint_from"] for entry in second["parameters"]) == [0, 0]


def numpy_is_loaded(pid: int) -> bool:
    """Whether the process has numpy's compiled core mapped: importing numpy always loads it."""
    return "numpy" in Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/<pid>/maps")
@pytest.mark.parametrize("tuner, space, numpy_expected", [
    ("Random", {"x": {"_type": "loguniform", "_value": [1e-3, 1]}, "n": {"_type": "qnormal", "_value": [0, 1, 1]}},
     False),
    ("GridSearch", {"x": {"_type": "loguniform", "_value": [1e-3, 1]}}, False),
    ("Batch", {"combine_params": {"_type": "choice", "_value": [{"x": 1}, {"x": 2}]}}, False),
    ("TPE", {"x": {"_type": "uniform", "_value": [0, 1]}}, True),   # shows the check sees numpy
])
def test_the_light_tuners_run_without_importing_numpy(dispatcher, tuner, space, numpy_expected):
    """numpy costs the dispatcher ~0.25 s of start-up and ~25 MiB; only tuners that compute
    with it may load it."""
    process, _ = dispatcher
    assert ask(process, {"id": 1, "cmd": "initialize", "search_space": space,
                         "tuner": {"name": tuner, "classArgs": {}}, "assessor": None}) == {"id": 1}
    reply = ask(process, {"id": 2, "cmd": "generate", "parameter_ids": [0]})
    assert len(reply["parameters"]) == 1
    assert ask(process, {"id": 3, "cmd": "report", "parameter_id": 0,
                         "parameters": reply["parameters"][0]["parameters"], "value": 0.5}) == {"id": 3}
    assert ask(process, {"id": 4, "cmd": "generate", "parameter_ids": [1]})["id"] == 4
    assert numpy_is_loaded(process.pid) is numpy_expected


def test_a_failed_dispatchers_message_ends_with_its_log_even_just_after_a_rotation(tmp_path: Path):
    log = tmp_path / "dispatcher.log"
    writer = RotatingWriter(log, RotationLimits(200, keep=3))
    for index in range(30):
        writer.write(f"record {index:02d} of the tuner's log\n".encode())
    writer.rotate()  # the last rotation started an empty dispatcher.log
    writer.write(b"Traceback: boom\n")
    writer.close()
    message = DispatcherClient(log, "info")._describe_exit(1)
    assert message.startswith(f"the dispatcher exited with status 1; the end of {log}:\n")
    assert message.endswith("record 28 of the tuner's log\nrecord 29 of the tuner's log\nTraceback: boom\n")
