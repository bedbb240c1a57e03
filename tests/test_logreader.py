"""Reading rotated logs (expmgr/logreader.py): the kept files in order, the last lines found
by reading only the end, a symlink or a FIFO in a rotated file's place never opened."""
from __future__ import annotations

import os
from pathlib import Path, PurePath

import pytest

from expmgr import logreader
from expmgr.logreader import LogFile, RefusedFile, last_bytes, last_lines_start, open_kept, read_blocks
from expmgr.rotation import RotatingWriter, RotationLimits, rotated_path


def log_of(path: Path) -> LogFile:
    return LogFile(path.parent, PurePath(path.name))


def written(path: Path, lines: int, limit: int, keep: int) -> list[bytes]:
    """``lines`` numbered lines written to ``path`` through a RotatingWriter; the lines."""
    writer = RotatingWriter(path, RotationLimits(limit, keep=keep))
    text = [f"line {index:04d}\n".encode() for index in range(lines)]
    for line in text:
        writer.write(line)
    writer.close()
    return text


def stream(files: list[tuple], index: int = 0, offset: int = 0) -> bytes:
    return b"".join(read_blocks(files, index, offset))


def test_the_kept_files_are_listed_oldest_first_with_what_rotation_deleted(tmp_path: Path):
    path = tmp_path / "stdout"
    lines = written(path, 40, limit=100, keep=3)
    listing = log_of(path).listing()
    assert [kept.index for kept in listing.files] == [2, 1, 0]
    assert listing.rotated == 2 and listing.current is not None and listing.current.index == 0
    kept = b"".join(rotated_path(path, index).read_bytes() for index in (2, 1)) + path.read_bytes()
    assert listing.dropped == len(b"".join(lines)) - len(kept) > 0
    assert listing.base(2) == listing.dropped + sum(kept.size for kept in listing.files[:2])
    snapshot = open_kept(log_of(path))
    try:
        assert stream(snapshot.readable()) == kept
    finally:
        snapshot.close()


def test_the_last_lines_continue_into_the_rotated_files_and_say_when_there_are_fewer(tmp_path: Path):
    path = tmp_path / "stdout"
    lines = written(path, 40, limit=100, keep=3)
    snapshot = open_kept(log_of(path))
    try:
        files = snapshot.readable()
        current_lines = path.read_bytes().count(b"\n")
        for count in (1, current_lines, current_lines + 1, 20):
            index, offset, found = last_lines_start(files, count)
            assert found == count and stream(files, index, offset) == b"".join(lines[-count:])
        assert last_lines_start(files, current_lines + 1)[0] == 1, "one line from stdout.1"
        kept = stream(files).count(b"\n")
        index, offset, found = last_lines_start(files, 1000)
        assert (index, offset, found) == (0, 0, kept) and stream(files, index, offset) == b"".join(lines[-kept:])
        assert last_lines_start(files, 0) == (2, path.stat().st_size, 0)
    finally:
        snapshot.close()


def test_a_last_line_without_a_newline_counts_and_an_empty_log_has_none(tmp_path: Path):
    path = tmp_path / "log"
    path.write_bytes(b"a\nb\nunfinished")
    with open(path, "rb") as file:
        files = [(file, path.stat().st_size)]
        assert stream(files, *last_lines_start(files, 2)[:2]) == b"b\nunfinished"
    assert last_lines_start([], 5) == (0, 0, 0)


def test_the_last_lines_of_a_huge_file_are_found_reading_only_its_end(tmp_path: Path, monkeypatch):
    path = tmp_path / "stdout"
    with open(path, "wb") as file:
        file.truncate(8 * 2**30)  # sparse: 8 GiB of zeros that take no disk
        file.seek(0, os.SEEK_END)
        file.write(b"".join(f"last {index}\n".encode() for index in range(5)))
    read = []
    pread = os.pread
    monkeypatch.setattr(logreader.os, "pread", lambda fd, size, at: read.append(size) or pread(fd, size, at))
    with open(path, "rb") as file:
        files = [(file, path.stat().st_size)]
        index, offset, found = last_lines_start(files, 3)
        assert stream(files, index, offset) == b"last 2\nlast 3\nlast 4\n"
    assert sum(read) < 200_000, "a block or two from the end, and the lines"


def test_a_symlink_or_fifo_among_the_rotated_files_is_passed_over_unopened(tmp_path: Path):
    secret = tmp_path / "secret"
    secret.write_text("private key\n")
    root = tmp_path / "experiment"
    root.mkdir()
    path = root / "stdout"
    path.write_bytes(b"now\n")
    rotated_path(path, 1).symlink_to(secret)
    os.mkfifo(rotated_path(path, 2))
    rotated_path(path, 3).write_bytes(b"old\n")
    os.mkfifo(root / "stdout.dropped")  # read without blocking: no number
    log = LogFile(root, PurePath("stdout"))
    listing = log.listing()
    assert [(kept.index, kept.regular) for kept in listing.files] == [(3, True), (2, False), (1, False), (0, True)]
    assert listing.dropped == 0
    snapshot = open_kept(log)
    try:
        assert stream(snapshot.readable()) == b"old\nnow\n"
        assert [opened.refused for opened in snapshot.files if opened.refused] == [
            "stdout.2: refused, not a regular file", "stdout.1: refused, it is a symlink"]
    finally:
        snapshot.close()
    with pytest.raises(RefusedFile, match="symlink"):
        log.open(1)
    assert last_bytes(log, 6) == b"d\nnow\n"


def test_a_current_file_that_is_a_symlink_or_a_symlinked_folder_is_refused(tmp_path: Path):
    root = tmp_path / "experiment"
    (root / "logs").mkdir(parents=True)
    (root / "logs" / "experiment.log").symlink_to(tmp_path)
    with pytest.raises(RefusedFile, match="symlink"):
        open_kept(LogFile(root, PurePath("logs/experiment.log")))
    (root / "trials").symlink_to(tmp_path)
    with pytest.raises(RefusedFile, match="inside a symlink"):
        LogFile(root, PurePath("trials/t1/stdout")).listing()


def test_a_log_seen_in_the_middle_of_a_rotation_lists_each_file_once_in_order(tmp_path: Path):
    path = tmp_path / "log"
    for index, text in [(3, b"3"), (1, b"1")]:  # NAME.2 was just renamed to NAME.3
        rotated_path(path, index).write_bytes(text)
    path.write_bytes(b"0")
    assert [kept.index for kept in log_of(path).listing().files] == [3, 1, 0], "one missing name is passed"
