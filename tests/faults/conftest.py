"""Fixtures of the fault tests: small disks that can fill up (a tmpfs mounted for one test,
root only), and the helpers that fill them::

    def test_x(small_disk):            # 16 MiB
        filler = fill(small_disk)      # ENOSPC from now on, until filler.unlink()
"""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Callable, Iterator

import pytest


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """``tmpfs(options)`` mounts a tmpfs with these mount options (``size=16m``) for this
    test and returns its folder; skips the test where mounting is refused (not root)."""
    mounted: list[Path] = []

    def mount(options: str) -> Path:
        mountpoint = tmp_path / f"disk{len(mounted) or ''}"
        mountpoint.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mountpoint)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}); the locked-store test covers the pause")
        mounted.append(mountpoint)
        return mountpoint

    try:
        yield mount
    finally:
        for mountpoint in mounted:
            subprocess.run(["umount", "-l", str(mountpoint)], check=False)


@pytest.fixture
def small_disk(tmpfs: Callable[[str], Path]) -> Path:
    """A 16 MiB tmpfs mounted for this test (root only): a disk that can fill up."""
    return tmpfs("size=16m")


