"""Reading log files by byte offset: growing, truncated, from the end, in limited chunks,
across rotations (the file a position is in named by its inode), jumping to the end."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path, PurePath

import pytest

from expmgr.layout import ExperimentPaths
from expmgr.store import TrialRecord
from expmgr.engine.errors import RefusalKind
from expmgr.rotation import RotatingWriter, RotationLimits, dropped_bytes, rotated_files, rotated_path
from expmgr.server.tails import MAX_BYTES, LogFile, TailError, log_file, read_tail, whole_log
from expmgr.states import TrialState
from expmgr.training import trial_files
from tests.helpers.store import new_store


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
    assert log_file(paths, trial_files(paths, "local"), store, "stderr", "t1").path == paths.trial_dir("t1") / "stderr"
    assert log_file(paths, trial_files(paths, "local"), store, "trial.log", "t1").path == paths.trial_dir("t1") / "trial.log"
    assert log_file(paths, trial_files(paths, "local"), store, "dispatcher.log", None).path == paths.dispatcher_log
    for which, trial, kind, message in [("stdout", "nosuch", RefusalKind.NOT_FOUND, "no trial 'nosuch'"),
                                        ("stdout", None, RefusalKind.INVALID, "trial: stdout is a trial's file"),
                                        ("../../config.yml", "t1", RefusalKind.INVALID, "file: expected one of stdout")]:
        with pytest.raises(TailError, match=message) as error:
            log_file(paths, trial_files(paths, "local"), store, which, trial)
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


def test_a_reader_passing_the_inode_reads_on_across_rotations_every_byte_once_as_a_writer_rotates(tmp_path: Path):
    path = tmp_path / "stdout"
    lines = [f"line {index:05d} {'x' * (index % 37)}\n".encode() for index in range(3000)]
    writer = RotatingWriter(path, RotationLimits(2000, keep=1000))  # rotated about 60 times, none deleted
    done = threading.Event()

    def write() -> None:
        for line in lines[1:]:
            writer.write(line)
        writer.close()
        done.set()

    # The reader's first look comes before the writer goes on (else, on a loaded machine, the
    # writer may have rotated the first file away from the name before it, and a reader with
    # no inode yet starts at the current file).
    writer.write(lines[0])
    got, tail = [], read_tail(log(path), 0, max_bytes=700)
    got.append(tail.text)
    thread = threading.Thread(target=write)
    thread.start()
    deadline = time.monotonic() + 60
    while not (done.is_set() and tail.next == tail.size and tail.inode == os.stat(path).st_ino):
        assert time.monotonic() < deadline, "the reader did not catch up"
        tail = read_tail(log(path), tail.next, max_bytes=700, inode=tail.inode, base=tail.base)
        assert tail.skipped == 0
        got.append(tail.text)
    thread.join()
    assert "".join(got) == b"".join(lines).decode()
    assert tail.rotated == len(rotated_files(path)) > 10 and tail.dropped == 0


def test_a_file_rotated_away_before_it_was_read_is_passed_over_and_counted_as_skipped(tmp_path: Path):
    path = tmp_path / "stdout"
    writer = RotatingWriter(path, RotationLimits(100, keep=3))
    everything = b""
    for index in range(5):
        everything += (line := f"early {index}\n".encode())
        writer.write(line)
    first = read_tail(log(path), 0, max_bytes=16)
    for index in range(60):  # rotated far past what is kept
        everything += (line := f"later {index:02d}\n".encode())
        writer.write(line)
    writer.close()
    kept = b"".join(rotated_path(path, index).read_bytes() for index in (2, 1)) + path.read_bytes()
    tail = read_tail(log(path), first.next, inode=first.inode, base=first.base)
    assert tail.offset == 0 and tail.inode == os.stat(rotated_path(path, 2)).st_ino, "the oldest kept file"
    assert tail.skipped == len(everything) - len(kept) - first.next
    unknown = read_tail(log(path), 5, inode=1)  # a file never kept, and no base: how much is not known
    assert (unknown.offset, unknown.inode, unknown.skipped) == (0, tail.inode, None)
    assert (tail.rotated, tail.dropped) == (2, dropped_bytes(path))


def test_a_follower_far_behind_jumps_to_the_last_bytes_of_the_log_from_a_line_start(tmp_path: Path):
    path = tmp_path / "stdout"
    path.write_bytes(b"old line\n" * 10)
    start = read_tail(log(path), 0)
    os.rename(path, rotated_path(path, 1))  # rotated, then a fast writer writes 3 MiB
    path.write_bytes(b"".join(f"new line {index:07d}\n".encode() for index in range(3 * 2**20 // 17)))
    size = path.stat().st_size
    near = read_tail(log(path), start.next, inode=start.inode, jump_behind=size + 1)
    assert (near.offset, near.skipped, near.inode) == (0, 0, path.stat().st_ino), "not far: read on"
    far = read_tail(log(path), start.next, inode=start.inode, base=start.base, jump_behind=2**20)
    assert far.inode == path.stat().st_ino and size - MAX_BYTES < far.offset < size - MAX_BYTES + 17
    assert far.text.startswith("new line ") and far.next == size
    assert far.skipped == far.offset, "the rest of stdout.1 (nothing) and the new file up to the jump"
    assert read_tail(log(path), 0, inode=far.inode, jump_behind=None).skipped == 0, "REST reads never jump"


def test_a_rotated_symlink_or_fifo_is_passed_over_without_blocking_or_reading_through_it(tmp_path: Path):
    secret = tmp_path / "secret"
    secret.write_text("private key\n")
    root = tmp_path / "experiment"
    root.mkdir()
    path = root / "stdout"
    rotated_path(path, 3).write_text("three\n")
    os.mkfifo(rotated_path(path, 2))
    rotated_path(path, 1).symlink_to(secret)
    path.write_text("now\n")
    os.mkfifo(root / "stdout.dropped")
    first = read_tail(LogFile(root, PurePath("stdout")), 0, inode=rotated_path(path, 3).stat().st_ino)
    assert first.text == "three\n"
    after = read_tail(LogFile(root, PurePath("stdout")), first.next, inode=first.inode)
    assert (after.text, after.inode, after.rotated, after.dropped) == ("now\n", path.stat().st_ino, 3, 0)
    assert b"".join(whole_log(LogFile(root, PurePath("stdout")))) == b"three\nnow\n"


def test_a_reader_with_a_place_keeps_it_while_the_log_has_no_file_to_read(tmp_path: Path):
    """In the middle of a rotation the log may list no file, or lose the one listed before it
    is opened. A reader that had a place stays there (and counts what it skipped once files
    are settled); an answer without a file started the page's follow over on the next file
    from 0, and the skipped output went unsaid (tests/webui/test_log_rotation.py's burst)."""
    path = tmp_path / "stdout"
    writer = RotatingWriter(path, RotationLimits(100, keep=3))
    for index in range(30):
        writer.write(f"line {index:02d}\n".encode())
    writer.close()
    first = read_tail(log(path), 0, max_bytes=16, inode=rotated_path(path, 2).stat().st_ino, base=0)
    for gone in (path, *(rotated_path(path, index) for index in (1, 2, 3))):
        gone.unlink(missing_ok=True)
    tail = read_tail(log(path), first.next, inode=first.inode, base=first.base)
    assert (tail.inode, tail.base, tail.offset, tail.next, tail.text) == (first.inode, first.base, first.next,
                                                                          first.next, "")
    fresh = read_tail(log(path), 0)
    assert (fresh.inode, fresh.next) == (None, 0), "a reader without a place: the log has no file yet"
