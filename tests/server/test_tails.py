"""Reading log files by byte offset: growing, truncated, from the end, in limited chunks."""
from __future__ import annotations

import time
import os
from pathlib import Path, PurePath

import pytest

from expmgr.layout import ExperimentPaths
from expmgr.store import TrialRecord
from expmgr.engine.errors import RefusalKind
from expmgr.server.tails import MAX_BYTES, LogFile, TailError, log_file, read_tail
from expmgr.states import TrialState
from tests.store.test_store import new_store


def log(path: Path) -> LogFile:
    return LogFile(path.parent, PurePath(path.name))

def test_a_growing_file_is_read_from_where_the_last_read_ended(tmp_path: Path):
    path = tmp_path / "stdout"
    assert (read_tail(log(path), 0).next, read_tail(log(path), 0).size, read_tail(log(path), 0).text) == (0, 0, "")
    path.write_text("one\n")
    first = read_tail(log(path), 0)
    assert (first.offset, first.next, first.size, first.text) == (0, 4, 4, "one\n")
    with path.open("a") as file:
        file.write("two\n")
    second = read_tail(log(path), first.next)
    assert (second.offset, second.next, second.text) == (4, 8, "two\n")
    assert read_tail(log(path), second.next).text == ""


def test_an_offset_past_the_end_means_the_file_was_truncated_and_it_is_read_from_the_start(tmp_path: Path):
    path = tmp_path / "stdout"
    path.write_text("a long first life of the file\n")
    end = read_tail(log(path), 0).next
    path.write_text("new\n")
    tail = read_tail(log(path), end)
    assert (tail.offset, tail.next, tail.size, tail.text) == (0, 4, 4, "new\n")


def test_a_negative_offset_reads_the_last_bytes_starting_at_a_whole_character(tmp_path: Path):
    path = tmp_path / "trial.log"
    path.write_bytes("line one\nline two: é\n".encode())
    assert read_tail(log(path), -3).text == "é\n"
    tail = read_tail(log(path), -2)  # the last 2 bytes begin inside "é": skip to the next character
    assert (tail.offset, tail.text) == (path.stat().st_size - 1, "\n")
    whole = read_tail(log(path), -10_000)
    assert (whole.offset, whole.text) == (0, "line one\nline two: é\n")


def test_a_read_returns_at_most_max_bytes_and_never_splits_a_character(tmp_path: Path):
    path = tmp_path / "stdout"
    path.write_bytes(b"x" * (MAX_BYTES - 1) + "€".encode() + b"tail")  # "€" is 3 bytes across the limit
    first = read_tail(log(path), 0)
    assert (first.next, len(first.text)) == (MAX_BYTES - 1, MAX_BYTES - 1)
    rest = read_tail(log(path), first.next)
    assert (rest.offset, rest.text, rest.next) == (MAX_BYTES - 1, "€tail", path.stat().st_size)
    assert read_tail(log(path), 0, max_bytes=10).text == "x" * 10


def test_a_character_still_being_written_waits_for_its_last_bytes_and_invalid_bytes_are_replaced(tmp_path: Path):
    path = tmp_path / "stdout"
    path.write_bytes(b"ok \xe2\x82")  # the first two bytes of "€"
    tail = read_tail(log(path), 0)
    assert (tail.text, tail.next, tail.size) == ("ok ", 3, 5)
    with path.open("ab") as file:
        file.write(b"\xac \xff\n")
    assert read_tail(log(path), tail.next).text == "€ \ufffd\n"


def test_files_are_named_by_kind_and_trial_files_need_a_known_trial(tmp_path: Path):
    paths = ExperimentPaths(tmp_path)
    store = new_store(paths.database)
    store.add_trial(TrialRecord("t1", 0, {}, TrialState.WAITING, time.time()))
    assert log_file(paths, store, "stderr", "t1").path == paths.trial_dir("t1") / "stderr"
    assert log_file(paths, store, "trial.log", "t1").path == paths.trial_dir("t1") / "trial.log"
    assert log_file(paths, store, "dispatcher.log", None).path == paths.dispatcher_log
    for which, trial, kind, message in [("stdout", "nosuch", RefusalKind.NOT_FOUND, "no trial 'nosuch'"),
                                        ("stdout", None, RefusalKind.INVALID, "trial: stdout is a trial's file"),
                                        ("../../config.yml", "t1", RefusalKind.INVALID, "file: expected one of stdout")]:
        with pytest.raises(TailError, match=message) as error:
            log_file(paths, store, which, trial)
        assert error.value.kind == kind


def test_a_symlink_a_fifo_or_a_symlinked_folder_is_refused_and_nothing_is_read_through_it(tmp_path: Path):
    secret = tmp_path / "secret"
    secret.write_text("private key\n")
    root = tmp_path / "experiment"
    (root / "trials" / "t1").mkdir(parents=True)
    (root / "trials" / "t1" / "stdout").symlink_to(secret)
    os.mkfifo(root / "trials" / "t1" / "stderr")
    (root / "trials" / "t2").symlink_to(tmp_path)  # a trial's folder replaced by a link
    for relative in ["trials/t1/stdout", "trials/t1/stderr", "trials/t2/secret"]:
        with pytest.raises(TailError, match="refused") as error:
            read_tail(LogFile(root, PurePath(relative)), 0)
        assert error.value.kind == RefusalKind.FORBIDDEN
    assert read_tail(LogFile(root, PurePath("trials/t1/trial.log")), 0).size == 0, "not there yet"
