"""The rotation rules of expmgr/rotation.py: sizes bounded, lines kept whole, what was
dropped counted, the kept files in order."""
from __future__ import annotations

from pathlib import Path

import pytest

from expmgr.rotation import RotatingWriter, RotationLimits, dropped_bytes, rotate, rotated_files, rotated_path


def _stream(path: Path) -> bytes:
    """What the kept files hold, oldest first."""
    return b"".join(p.read_bytes() for p in reversed(rotated_files(path))) + path.read_bytes()


def test_files_stay_under_the_limit_and_lines_are_not_split(tmp_path: Path) -> None:
    path = tmp_path / "stdout"
    writer = RotatingWriter(path, RotationLimits(100, keep=3))
    lines = [f"line {i:04d}\n".encode() for i in range(200)]
    for line in lines:
        writer.write(line)
    writer.close()
    kept = [path, *rotated_files(path)]
    assert [p.name for p in kept] == ["stdout", "stdout.1", "stdout.2"]
    for file in kept:
        data = file.read_bytes()
        assert len(data) <= 100
        assert data.endswith(b"\n") and all(line in lines for line in data.splitlines(keepends=True))
    whole = b"".join(lines)
    assert whole.endswith(_stream(path))
    assert dropped_bytes(path) == len(whole) - len(_stream(path))


def test_a_chunk_is_cut_at_its_last_newline_that_fits(tmp_path: Path) -> None:
    path = tmp_path / "log"
    writer = RotatingWriter(path, RotationLimits(10, keep=2))
    writer.write(b"abc\ndefgh\nijklmnop\n")
    writer.close()
    assert rotated_path(path, 1).read_bytes() == b"abc\ndefgh\n"
    assert path.read_bytes() == b"ijklmnop\n"


def test_a_burst_of_many_files_in_one_write_splits_no_line(tmp_path: Path) -> None:
    """Each new file of a burst is cut at its last newline too, not filled to the limit (a
    line cut there showed up as half a line after a skip in the web UI)."""
    path = tmp_path / "log"
    writer = RotatingWriter(path, RotationLimits(100, keep=50))
    lines = [f"record {i:05d} of a burst\n".encode() for i in range(150)]   # 23 bytes: 100 is no multiple
    writer.write(b"".join(lines))
    writer.close()
    files = [*reversed(rotated_files(path)), path]
    assert len(files) > 30 and b"".join(p.read_bytes() for p in files) == b"".join(lines)
    for file in files:
        data = file.read_bytes()
        assert len(data) <= 100 and data.endswith(b"\n") and set(data.splitlines(keepends=True)) <= set(lines), file


def test_a_line_longer_than_a_file_is_cut_to_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "log"
    writer = RotatingWriter(path, RotationLimits(4, keep=10))
    writer.write(b"0123456789")
    writer.close()
    assert _stream(path) == b"0123456789"
    assert all(len(p.read_bytes()) <= 4 for p in [path, *rotated_files(path)])


def test_keep_one_starts_the_file_anew(tmp_path: Path) -> None:
    path = tmp_path / "log"
    writer = RotatingWriter(path, RotationLimits(5, keep=1))
    writer.write(b"1234\n5678\n")
    writer.close()
    assert path.read_bytes() == b"5678\n" and rotated_files(path) == []
    assert dropped_bytes(path) == 5


def test_a_smaller_keep_than_before_removes_the_extra_files(tmp_path: Path) -> None:
    path = tmp_path / "log"
    for index in range(1, 5):
        rotated_path(path, index).write_bytes(b"x" * index)
    path.write_bytes(b"now")
    rotate(path, keep=2)
    assert rotated_files(path) == [rotated_path(path, 1)]
    assert rotated_path(path, 1).read_bytes() == b"now" and not path.exists()
    assert dropped_bytes(path) == 1 + 2 + 3 + 4


def test_an_existing_file_counts_toward_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"12345678\n")
    writer = RotatingWriter(path, RotationLimits(10, keep=2))
    writer.write(b"abc\n")
    writer.close()
    assert rotated_path(path, 1).read_bytes() == b"12345678\n" and path.read_bytes() == b"abc\n"


def test_unbounded_never_rotates(tmp_path: Path) -> None:
    path = tmp_path / "log"
    writer = RotatingWriter(path, RotationLimits(0, keep=1))
    writer.write(b"x\n" * 10_000)
    writer.close()
    assert path.stat().st_size == 20_000 and rotated_files(path) == []


@pytest.mark.parametrize("text", [None, "", "abc", "1:", ":2", "-1:2", "10:0"])
def test_limits_from_a_bad_environment_value_are_none(text: str | None) -> None:
    assert RotationLimits.from_env(text) is None


def test_limits_round_trip_through_the_environment() -> None:
    limits = RotationLimits(123, keep=4)
    assert RotationLimits.from_env(limits.as_env()) == limits


def test_a_fifo_or_symlink_where_a_log_or_its_count_goes_neither_blocks_nor_is_followed(tmp_path: Path) -> None:
    """A trial may make its own stdout, or stdout.dropped, a FIFO or a symlink: the writer
    must not block on the one (its thread carries every trial's output) nor write through the
    other."""
    import os
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    path = tmp_path / "stdout"
    os.mkfifo(tmp_path / "stdout.dropped")
    (tmp_path / "stdout.dropped.tmp").symlink_to(victim)
    writer = RotatingWriter(path, RotationLimits(10, keep=1))
    writer.write(b"123456789\n" * 3)  # each rotation deletes a file and counts it
    writer.close()
    assert victim.read_text() == "untouched"
    assert dropped_bytes(path) == 20 and path.read_bytes() == b"123456789\n"  # the FIFO was replaced by a count
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(OSError):  # ENXIO: no reader, and the writer does not wait for one
        RotatingWriter(path, RotationLimits(10, keep=1)).write(b"x\n")
    path.unlink()
    path.symlink_to(victim)
    with pytest.raises(OSError):
        RotatingWriter(path, RotationLimits(10, keep=1)).write(b"x\n")
    assert victim.read_text() == "untouched"
