"""Filling a small disk (the ``small_disk`` fixture of tests/faults/conftest.py): all its
blocks, or all its inodes."""
from __future__ import annotations

import errno
from pathlib import Path


def fill(disk: Path) -> Path:
    """Write zeros into ``disk`` until it is full (ENOSPC); the file to unlink to free it."""
    filler = disk / "filler"
    chunk = bytes(64 * 1024)
    with open(filler, "wb", buffering=0) as file:
        try:
            while True:
                file.write(chunk)
        except OSError as error:
            if error.errno != errno.ENOSPC:
                raise
    return filler


def use_up_inodes(disk: Path) -> Path:
    """Create empty files in ``disk`` until no file or folder can be made there (ENOSPC),
    while files already there can still grow; the folder to remove to free them."""
    fillers = disk / "inode-fillers"
    fillers.mkdir()
    for number in range(10**6):
        try:
            (fillers / str(number)).touch()
        except OSError as error:
            if error.errno != errno.ENOSPC:
                raise
            return fillers
    raise AssertionError(f"{disk} takes any number of files: mount it with nr_inodes")
