"""A zip file nobody vouches for (``expctl experiment load``'s), unpacked without leaving
the folder it is unpacked to and without filling the disk: every member is checked before
a byte is written, and a member that holds more than its header says is cut short::

    members = checked_members(archive)           # UnsafeArchive naming the first bad member
    unpack_member(archive, members[0], folder / "x", file_mode=0o600)
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import zipfile

MAX_MEMBERS = 200_000
"""Members (files and folders) an archive may have: an experiment of 30,000 trials fits."""
MAX_UNPACKED_BYTES = 16 * 2**30
"""What an archive's members may hold together, unpacked (16 GiB): a zip bomb stops here."""
_CHUNK_BYTES = 1 << 20
_ENCRYPTED_FLAG = 0x1


class UnsafeArchive(ValueError):
    """An archive refused; the message names the member and what is wrong with it."""


@dataclass(frozen=True)
class Member:
    """One member of an archive, its name checked: ``parts`` are its path's components,
    none empty, ``.`` or ``..``."""

    info: zipfile.ZipInfo
    parts: tuple[str, ...]

    @property
    def is_dir(self) -> bool:
        return self.info.is_dir()


def checked_members(archive: zipfile.ZipFile, max_members: int = MAX_MEMBERS,
                    max_bytes: int = MAX_UNPACKED_BYTES) -> list[Member]:
    """The archive's members; UnsafeArchive, before anything is unpacked, for too many of
    them or too many bytes, an absolute name, a ``..``, a symbolic link (or device, pipe),
    an encrypted member, a name given twice, or a name that is both a file and a folder."""
    infos = archive.infolist()
    if len(infos) > max_members:
        raise UnsafeArchive(f"{len(infos)} members; an archive may have at most {max_members}")
    unpacked_bytes = sum(info.file_size for info in infos)
    if unpacked_bytes > max_bytes:
        raise UnsafeArchive(f"its members hold {unpacked_bytes} bytes unpacked; at most {max_bytes} "
                            f"({max_bytes / 2**30:g} GiB) are unpacked")
    members: dict[tuple[str, ...], Member] = {}
    for info in infos:
        member = Member(info, _name_parts(info.filename))
        kind = stat.S_IFMT(info.external_attr >> 16)
        if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
            raise UnsafeArchive(f"member {info.filename!r} is a {_kind_name(kind)}; only files and folders "
                                "are unpacked")
        if info.flag_bits & _ENCRYPTED_FLAG:
            raise UnsafeArchive(f"member {info.filename!r} is encrypted")
        if member.parts in members:
            raise UnsafeArchive(f"member {info.filename!r} is in the archive twice")
        members[member.parts] = member
    folders = {member.parts[:depth] for member in members.values() for depth in range(1, len(member.parts))}
    for member in members.values():
        if not member.is_dir and member.parts in folders:
            raise UnsafeArchive(f"member {member.info.filename!r} is both a file and a folder")
    return list(members.values())


def _name_parts(name: str) -> tuple[str, ...]:
    parts = tuple(name[:-1].split("/") if name.endswith("/") else name.split("/"))
    if name.startswith("/") or "\\" in name or any(part in ("", ".", "..") for part in parts):
        raise UnsafeArchive(f"member {name!r}: a name must be a relative path without '.', '..', "
                            "backslashes or empty parts")
    return parts


def _kind_name(kind: int) -> str:
    return {stat.S_IFLNK: "symbolic link", stat.S_IFIFO: "named pipe", stat.S_IFSOCK: "socket",
            stat.S_IFCHR: "character device", stat.S_IFBLK: "block device"}.get(kind, f"file of type {kind:#o}")


def read_member(archive: zipfile.ZipFile, member: Member, max_bytes: int) -> bytes:
    """A small member's bytes; UnsafeArchive when it holds more than ``max_bytes``."""
    if member.info.file_size > max_bytes:
        raise UnsafeArchive(f"member {member.info.filename!r} holds {member.info.file_size} bytes; "
                            f"at most {max_bytes} are read")
    with archive.open(member.info) as source:
        data = source.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UnsafeArchive(f"member {member.info.filename!r} holds more than {max_bytes} bytes")
    return data


def unpack_member(archive: zipfile.ZipFile, member: Member, target: Path, file_mode: int | None) -> None:
    """Write a file member to ``target``, a new file (never through a symbolic link), with
    ``file_mode`` whatever the umask, or the usual mode (0666 less the umask) for None.
    UnsafeArchive when it holds more bytes than its header says."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    descriptor = os.open(target, flags, 0o666 if file_mode is None else file_mode)
    with os.fdopen(descriptor, "wb") as file:
        if file_mode is not None:
            os.fchmod(descriptor, file_mode)
        written = 0
        with archive.open(member.info) as source:
            while chunk := source.read(_CHUNK_BYTES):
                written += len(chunk)
                if written > member.info.file_size:  # CPython's zipfile stops there already; not relied on
                    raise UnsafeArchive(f"member {member.info.filename!r} holds more than the "
                                        f"{member.info.file_size} bytes its header says")
                file.write(chunk)
