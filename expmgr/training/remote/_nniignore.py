"""Which files of a trial code folder go to a remote host: all but those NNI's ``.nniignore``
excludes, within NNI's limits on count and size, checked before anything is sent.

    files = code_files(Path("~/mnist").expanduser(), size_limit=300 * 2**20, file_limit=2000)
    files.folders, files.files, files.links     # relative paths; a folder before what it holds

As NNI's manager does (ts/nni_manager/common/tarball.ts): the one ``.nniignore`` at the top of
the folder, read with gitignore's rules (``*.ckpt``, ``data/``, ``/build``, ``!keep.ckpt``);
a folder it excludes is not entered; symbolic links are sent as links.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

IGNORE_FILE = ".nniignore"


class CodeFolderError(Exception):
    """The code folder cannot be sent as it is (too large, too many files, unreadable)."""


@dataclass
class CodeFiles:
    """What of a code folder is sent, as paths relative to it, in walk order (a folder before its files)."""

    root: Path
    folders: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    total_bytes: int = 0


def code_files(root: Path, *, size_limit: int, file_limit: int) -> CodeFiles:
    """The files of ``root`` that ``.nniignore`` keeps; CodeFolderError past either limit
    (counted as NNI counts: files, folders and links; the bytes of files)."""
    ignore_file = root / IGNORE_FILE
    spec = pathspec.GitIgnoreSpec.from_lines(ignore_patterns(root))
    found = CodeFiles(root)
    try:
        _walk(root, "", spec, found, size_limit, file_limit)
    except OSError as error:
        raise CodeFolderError(f"cannot read {error.filename}: {error.strerror}") from None
    if found.total_bytes > size_limit:
        raise CodeFolderError(
            f"code folder {root} is over the upload limit: {_size(found.total_bytes)} of files to upload, "
            f"limit {_size(size_limit)}; exclude data and checkpoints in {ignore_file} (gitignore patterns)")
    return found


def ignore_patterns(root: Path) -> list[str]:
    """The lines of ``root``'s ``.nniignore`` (gitignore patterns; none without one);
    CodeFolderError if it cannot be read. (Ray's runtime_env ``excludes`` take them as they are.)"""
    ignore_file = root / IGNORE_FILE
    try:
        return ignore_file.read_text().splitlines() if ignore_file.is_file() else []
    except OSError as error:
        raise CodeFolderError(f"cannot read {ignore_file}: {error.strerror}") from None


def _walk(root: Path, relative: str, spec: pathspec.GitIgnoreSpec, found: CodeFiles,
          size_limit: int, file_limit: int) -> None:
    with os.scandir(root / relative) as scan:
        entries = sorted(scan, key=lambda e: e.name)
    for entry in entries:
        path = f"{relative}{entry.name}"
        is_folder = entry.is_dir(follow_symlinks=False)
        if spec.match_file(path + "/" if is_folder else path):
            continue
        if entry.is_symlink():
            found.links.append(path)
        elif is_folder:
            found.folders.append(path)
        elif entry.is_file(follow_symlinks=False):
            found.files.append(path)
            found.total_bytes += entry.stat(follow_symlinks=False).st_size
        else:
            continue  # sockets, fifos, devices: nothing a trial's code needs
        count = len(found.folders) + len(found.files) + len(found.links)
        if count > file_limit:
            raise CodeFolderError(
                f"code folder {root} has more than {file_limit} files and folders to upload; "
                f"exclude what trials do not need in {root / IGNORE_FILE} (gitignore patterns)")
        if is_folder:
            _walk(root, path + "/", spec, found, size_limit, file_limit)


def _size(count: int) -> str:
    if count >= 2**20:
        return f"{count / 2**20:.1f} MiB ({count} bytes)"
    return f"{count} bytes"
