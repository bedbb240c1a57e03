"""Trials' checkpoints kept in a storage path (the Ray service's ``storagePath``), so that a
trial retried, preempted or exploited by PBT finds its checkpoint on whichever node it runs
next, with no folder shared by the nodes: an absolute local path (or ``file://`` URI: a folder
every node mounts) or an S3 bucket (AWS or any S3-compatible server) through ``pyarrow.fs``, as
Ray Tune's ``storage_path``::

    storage = CheckpointStorage("s3://bucket/runs?region=eu-west-1", experiment_id)
    storage.check_writable()                              # StorageError: one line, the cause
    storage.upload(trial_id, trial_folder / "checkpoint")  # what changed since the last upload
    storage.download(trial_id, node_folder / "checkpoint") # False: nothing stored

A trial's checkpoint is ``<storagePath>/<experiment id>/<trial id>/checkpoint/``, a copy of its
checkpoint folder's files (empty folders are not kept: object stores have none). Beside it,
``manifest.json`` records each file's size and modification time as last uploaded, so that the
next upload sends only what changed and a download gives files their original times back.
Every method blocks (callers run them in a thread); the object is picklable (strings only:
the filesystem is opened in each process that uses it, as on Ray nodes).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import uuid
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Iterator
from urllib.parse import parse_qs, urlsplit, urlunsplit

CONNECT_TIMEOUT = 5.0
"""Seconds to open a connection to the S3 endpoint (AWS's SDK retries a request 3 times)."""
REQUEST_TIMEOUT = 20.0
"""Seconds an S3 request may go without a byte transferred before it fails (a silent endpoint)."""
CHUNK_BYTES = 4 * 2**20
"""Bytes read and written at a time when copying a file in or out of the storage."""
MANIFEST = "manifest.json"
CHECKPOINT = "checkpoint"
_STAGING = ".staging"
"""Local storage only: files are written there, then renamed into the checkpoint."""
_INSTALL_HINT = "pip install 'expmgr[ray]'"
_SYMLINKS_NAMED = 3
"""Skipped symlinks named in the log line (then "and N more")."""

_log = logging.getLogger(__name__)


class StorageError(Exception):
    """The checkpoint storage could not be used: one line naming the storage path (without
    secrets) and what failed."""


def check_storage_path(value: str) -> str | None:
    """None if ``value`` is a storage path this module takes, else the problem in one line.
    No network: an S3 path's options are checked as pyarrow reads them, not its bucket."""
    try:
        _parse(value)
    except StorageError as error:
        return str(error)
    return None


@dataclass(frozen=True)
class _Location:
    """A parsed storage path: ``local`` (a root folder) or ``s3`` (a URI for pyarrow)."""

    kind: str
    root: str       # local: the absolute folder; s3: the whole URI (for pyarrow)
    shown: str      # without credentials, for messages


def _parse(value: str) -> _Location:
    if not value or not value.strip():
        raise StorageError("the storage path is empty: give an absolute path or an s3:// URI")
    if "://" not in value:
        if not Path(value).is_absolute():
            raise StorageError(f"{value!r} is a relative path: give an absolute path (the same on every node) "
                               f"or an s3:// URI")
        return _Location("local", os.path.normpath(value), value)
    parts = urlsplit(value)
    scheme = parts.scheme.lower()
    shown = _without_credentials(value)
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
            raise StorageError(f"{shown!r}: a file:// URI names a local folder only (file:///absolute/path), "
                               f"with no host or options")
        if not parts.path.startswith("/"):
            raise StorageError(f"{shown!r} is not an absolute path")
        return _Location("local", os.path.normpath(parts.path), shown)
    if scheme != "s3":
        raise StorageError(f"{shown!r}: scheme {parts.scheme!r} is not supported; give an absolute path, "
                           f"a file:// URI or an s3:// URI")
    if not parts.hostname:
        raise StorageError(f"{shown!r} names no bucket (s3://bucket/prefix)")
    if parts.fragment:
        raise StorageError(f"{shown!r}: an s3:// URI has no #fragment")
    if any(part in (".", "..") for part in parts.path.split("/")):
        raise StorageError(f"{shown!r}: the prefix has a '.' or '..' part")
    # pyarrow checks the options (an unknown one is refused). It looks the bucket's region up
    # over the network when none is given and no endpoint either: a placeholder avoids that here.
    query = parts.query
    if "region" not in parse_qs(query):
        query = "&".join(filter(None, [query, "region=us-east-1"]))
    fs_module = _pyarrow_fs(shown)
    try:
        fs_module.FileSystem.from_uri(urlunsplit(parts._replace(query=query)))
    except Exception as error:  # ArrowInvalid (a ValueError) names the option
        raise StorageError(f"{shown!r}: {_one_line(error)}") from None
    return _Location("s3", value, shown)


def _without_credentials(uri: str) -> str:
    """The URI with no user or password (``s3://KEY:SECRET@bucket`` is pyarrow's way to pass keys)."""
    parts = urlsplit(uri)
    if "@" not in parts.netloc:
        return uri
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def _pyarrow_fs(shown: str) -> Any:
    try:
        import pyarrow.fs
    except ImportError:
        raise StorageError(f"checkpoint storage {shown}: pyarrow is not installed ({_INSTALL_HINT})") from None
    return pyarrow.fs


_HINTS = {
    "NO_SUCH_BUCKET": "create the bucket, or correct its name in the storage path",
    "ACCESS_DENIED": "check the credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, "
                     "or the node's role) and the bucket's policy",
    "INVALID_ACCESS_KEY_ID": "check the credentials (AWS_ACCESS_KEY_ID, AWS_PROFILE, or the node's role)",
    "SIGNATURE_DOES_NOT_MATCH": "check the credentials (AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or the node's role)",
    "NETWORK_CONNECTION": "check that this node reaches the endpoint: endpoint_override, scheme",
}
"""What to do about the AWS errors pyarrow names in its messages."""


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    # AWS's request ids make each message unique and say nothing to the user.
    text = text.split(" (Request ID:")[0]
    hints = [hint for code, hint in _HINTS.items() if f"AWS Error {code} " in text]
    return f"{text} ({hints[0]})" if hints else text


def _component(name: str, what: str) -> str:
    """An id used as one folder name of the storage."""
    if not name or "/" in name or name in (".", ".."):
        raise StorageError(f"{what} {name!r} cannot be a folder name")
    return name


def _refuse_escaping_key(relative: str, shown: str) -> None:
    """Refuse a stored file's path below a checkpoint folder that could lead out of the folder
    it is downloaded into (``..``, an absolute path, an empty part)."""
    parts = relative.split("/")
    if relative.startswith("/") or any(part in ("", ".", "..") for part in parts) or "\0" in relative:
        raise StorageError(f"checkpoint storage {shown}: refused the stored key {relative!r}: "
                           f"it would be written outside the checkpoint folder")


class CheckpointStorage:
    """See the module docstring."""

    def __init__(self, uri: str, experiment_id: str) -> None:
        self.uri = uri
        self.experiment_id = experiment_id
        self._fs: Any = None
        self._root = ""

    def __getstate__(self) -> dict[str, str]:
        return {"uri": self.uri, "experiment_id": self.experiment_id}

    def __setstate__(self, state: dict[str, str]) -> None:
        self.uri, self.experiment_id = state["uri"], state["experiment_id"]
        self._fs, self._root = None, ""

    # -- names -----------------------------------------------------------------------------

    def describe(self) -> str:
        """The storage path without credentials, for messages."""
        return _without_credentials(self.uri)

    def location(self, trial_id: str) -> str:
        """Where the trial's checkpoint is kept, for logs and docs (an S3 path without its options)."""
        parts = urlsplit(self.describe())
        base = self.describe() if "://" not in self.uri else urlunsplit(parts._replace(query="", fragment=""))
        return f"{base.rstrip('/')}/{self.experiment_id}/{trial_id}/{CHECKPOINT}/"

    # -- transfers -------------------------------------------------------------------------

    def upload(self, trial_id: str, local_dir: Path) -> None:
        """Make the stored checkpoint equal to ``local_dir``'s files: new and changed ones (size
        or modification time not as last uploaded) sent, those gone deleted; an empty or missing
        ``local_dir`` clears it. Symlinks are skipped (named once in the log), never followed."""
        trial = self._trial(trial_id)
        with self._failing(f"uploading the checkpoint of trial {trial_id} from {local_dir}"):
            local, skipped = _local_files(local_dir)
            if skipped:
                more = f" and {len(skipped) - _SYMLINKS_NAMED} more" if len(skipped) > _SYMLINKS_NAMED else ""
                _log.warning("checkpoint of trial %s: symlinks not uploaded (not followed): %s%s", trial_id,
                             ", ".join(skipped[:_SYMLINKS_NAMED]), more)
            stored = self._stored_files(trial)
            manifest = self._read_manifest(trial) if stored else {}
            if not local:
                self._clear(trial)
                return
            for relative, (size, mtime_ns) in sorted(local.items()):
                if manifest.get(relative) == [size, mtime_ns] and stored.get(relative) == size:
                    continue
                manifest[relative] = list(self._put(trial, relative, local_dir / relative))
            for relative in sorted(set(stored) - set(local)):
                self._fs.delete_file(f"{trial}/{CHECKPOINT}/{relative}")
            self._write_manifest(trial, {relative: manifest[relative] for relative in local})

    def download(self, trial_id: str, local_dir: Path) -> bool:
        """Make ``local_dir`` equal to the stored checkpoint (files already there with the stored
        size and time are kept); False, with ``local_dir`` left empty, when nothing is stored.
        A stored key that would lead out of ``local_dir`` is refused (StorageError)."""
        trial = self._trial(trial_id)
        with self._failing(f"downloading the checkpoint of trial {trial_id} into {local_dir}"):
            stored = self._stored_files(trial)
            wanted = {PurePosixPath(relative): size for relative, size in stored.items()}
            manifest = self._read_manifest(trial) if stored else {}
            _make_folder(local_dir)
            _remove_others(local_dir, {str(relative) for relative in wanted})
            for relative, size in sorted(wanted.items()):
                recorded = manifest.get(str(relative))
                mtime_ns = recorded[1] if recorded and recorded[0] == size else None
                self._get(f"{trial}/{CHECKPOINT}/{relative}", local_dir, relative, size, mtime_ns)
        return bool(wanted)

    def copy(self, source_trial: str, target_trial: str) -> bool:
        """The target trial's stored checkpoint becomes a copy of the source's (PBT's exploit);
        False, the target's left as it is, when the source has none."""
        source, target = self._trial(source_trial), self._trial(target_trial)
        with self._failing(f"copying the checkpoint of trial {source_trial} to trial {target_trial}"):
            stored = self._stored_files(source)
            if not stored:
                return False
            manifest = self._read_manifest(source)
            for relative in sorted(stored):
                destination = f"{target}/{CHECKPOINT}/{relative}"
                if self._local:
                    staging = self._staging(target)
                    self._fs.copy_file(f"{source}/{CHECKPOINT}/{relative}", staging)
                    self._fs.create_dir(destination.rpartition("/")[0], recursive=True)
                    self._fs.move(staging, destination)
                else:
                    self._fs.copy_file(f"{source}/{CHECKPOINT}/{relative}", destination)
            for relative in sorted(set(self._stored_files(target)) - set(stored)):
                self._fs.delete_file(f"{target}/{CHECKPOINT}/{relative}")
            self._write_manifest(target, {relative: manifest[relative] for relative in stored if relative in manifest})
        return True

    def check_writable(self) -> None:
        """Write, read back and delete a probe object; StorageError with the cause (no such
        bucket, access denied, an endpoint that does not answer: within bounded time)."""
        probe = f"{self._experiment_root()}/.expmgr-probe-{uuid.uuid4().hex}"
        content = f"expmgr storage probe {uuid.uuid4().hex}".encode()
        with self._failing("writing a probe object"):
            self._write_whole(probe, content)
        with self._failing("reading the probe object back"):
            with self._fs.open_input_stream(probe) as stream:
                read = stream.read()
        if read != content:
            raise StorageError(f"checkpoint storage {self.describe()}: the probe object read back differs "
                               f"from what was written")
        with self._failing("deleting the probe object"):
            self._fs.delete_file(probe)

    # -- inside ----------------------------------------------------------------------------

    @property
    def _local(self) -> bool:
        return "://" not in self.uri or urlsplit(self.uri).scheme.lower() == "file"

    def _open(self) -> None:
        """The filesystem and the storage's root path in it, opened once per process."""
        if self._fs is not None:
            return
        location = _parse(self.uri)
        fs_module = _pyarrow_fs(location.shown)
        with self._failing("opening the storage"):
            if location.kind == "local":
                self._fs, self._root = fs_module.LocalFileSystem(), location.root
            else:
                filesystem, self._root = fs_module.FileSystem.from_uri(location.root)
                self._fs = _with_timeouts(fs_module, filesystem, parse_qs(urlsplit(location.root).query))
            self._root = self._root.rstrip("/")

    def _experiment_root(self) -> str:
        self._open()
        root = f"{self._root}/{_component(self.experiment_id, 'experiment id')}"
        if self._local:
            with self._failing(f"creating the folder {root}"):
                self._fs.create_dir(root, recursive=True)
        return root

    def _trial(self, trial_id: str) -> str:
        self._open()
        return f"{self._root}/{_component(self.experiment_id, 'experiment id')}/{_component(trial_id, 'trial id')}"

    def _stored_files(self, trial: str) -> dict[str, int]:
        """Relative path -> size of each file of the trial's stored checkpoint; a key that
        could lead out of a folder it is downloaded into is refused (StorageError), whatever
        the operation (S3's HTTP client would also resolve its '..' when deleting it)."""
        fs_module = _pyarrow_fs(self.describe())
        base = f"{trial}/{CHECKPOINT}"
        infos = self._fs.get_file_info(fs_module.FileSelector(base, recursive=True, allow_not_found=True))
        files = {info.path[len(base) + 1:]: info.size for info in infos if info.type == fs_module.FileType.File}
        for relative in files:
            _refuse_escaping_key(relative, self.describe())
        return files

    def _read_manifest(self, trial: str) -> dict[str, list[int]]:
        """The files as last uploaded (relative path -> [size, mtime_ns]); empty when it is
        missing or unreadable (then every file counts as changed)."""
        try:
            with self._fs.open_input_stream(f"{trial}/{MANIFEST}") as stream:
                files = json.loads(stream.read()).get("files", {})
        except (FileNotFoundError, ValueError, AttributeError):
            return {}
        if not isinstance(files, dict):
            return {}
        return {relative: record for relative, record in files.items()
                if isinstance(record, list) and len(record) == 2 and all(isinstance(n, int) for n in record)}

    def _write_manifest(self, trial: str, files: dict[str, list[int]]) -> None:
        self._write_whole(f"{trial}/{MANIFEST}", json.dumps({"version": 1, "files": files}).encode())

    def _clear(self, trial: str) -> None:
        fs_module = _pyarrow_fs(self.describe())
        for path in (f"{trial}/{CHECKPOINT}", f"{trial}/{MANIFEST}", f"{trial}/{_STAGING}"):
            info = self._fs.get_file_info(path)
            if info.type == fs_module.FileType.Directory:
                self._fs.delete_dir(path)
            elif info.type == fs_module.FileType.File:
                self._fs.delete_file(path)

    def _staging(self, trial: str) -> str:
        folder = f"{trial}/{_STAGING}"
        self._fs.create_dir(folder, recursive=True)
        return f"{folder}/{uuid.uuid4().hex}"

    def _write_whole(self, path: str, content: bytes) -> None:
        """A reader sees the old object or the new one, never part: S3 writes objects whole; a
        local file is written beside and renamed."""
        target = path
        if self._local:
            self._fs.create_dir(path.rpartition("/")[0], recursive=True)
            path = self._staging(path.rpartition("/")[0])
        with self._fs.open_output_stream(path) as stream:
            stream.write(content)
        if self._local:
            self._fs.move(path, target)

    def _put(self, trial: str, relative: str, source: Path) -> tuple[int, int]:
        """Send one local file (opened without following a symlink); its size and mtime_ns as sent."""
        destination = f"{trial}/{CHECKPOINT}/{relative}"
        path = self._staging(trial) if self._local else destination
        descriptor = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(descriptor, "rb") as file:
            status = os.fstat(file.fileno())
            with self._fs.open_output_stream(path) as stream:
                while chunk := file.read(CHUNK_BYTES):
                    stream.write(chunk)
        if self._local:
            self._fs.create_dir(destination.rpartition("/")[0], recursive=True)
            self._fs.move(path, destination)
        return status.st_size, status.st_mtime_ns

    def _get(self, stored: str, local_dir: Path, relative: PurePosixPath, size: int, mtime_ns: int | None) -> None:
        """Fetch one stored file into ``local_dir`` (kept if already there with that size and
        time), through a temporary file renamed into place."""
        folder = local_dir
        for part in relative.parts[:-1]:
            folder = folder / part
            _make_folder(folder)
        target = folder / relative.name
        try:
            here = os.lstat(target)
            if (stat.S_ISREG(here.st_mode) and here.st_size == size and mtime_ns is not None
                    and here.st_mtime_ns == mtime_ns):
                return
        except FileNotFoundError:
            pass
        partial = folder / f".{relative.name}.{uuid.uuid4().hex}.partial"
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            with os.fdopen(descriptor, "wb") as file, self._fs.open_input_stream(stored) as stream:
                while chunk := stream.read(CHUNK_BYTES):
                    file.write(chunk)
            if mtime_ns is not None:
                os.utime(partial, ns=(mtime_ns, mtime_ns))
            if os.path.isdir(target) and not os.path.islink(target):
                shutil.rmtree(target)
            os.replace(partial, target)  # replaces a symlink there, never what it points to
        except BaseException:
            partial.unlink(missing_ok=True)
            raise

    def _failing(self, what: str) -> AbstractContextManager[None]:
        return _failing(self.describe(), what)


@contextmanager
def _failing(shown: str, what: str) -> Iterator[None]:
    """Turns an error of the filesystem (pyarrow's OSError, ArrowException) into StorageError."""
    try:
        yield
    except StorageError:
        raise
    except _filesystem_errors() as error:
        raise StorageError(f"checkpoint storage {shown}: {what} failed: {_one_line(error)}") from error


def _filesystem_errors() -> tuple[type[BaseException], ...]:
    try:
        from pyarrow.lib import ArrowException
    except ImportError:
        return (OSError, ValueError)
    return (OSError, ValueError, ArrowException)


def _with_timeouts(fs_module: Any, filesystem: Any, options: dict[str, list[str]]) -> Any:
    """The S3 filesystem pyarrow made from the URI, with our connect and request timeouts (its
    URI options have none). Its settings are read back as pyarrow pickles it; when they do not
    carry every option of the URI (``tls_verify_certificates`` has no keyword), it is kept as
    it is, with the AWS SDK's own timeouts (1 s to connect, 3 s without a byte)."""
    try:
        settings = dict(filesystem.__reduce__()[1][0])
        if set(options) - set(settings):
            return filesystem
        settings.update(connect_timeout=CONNECT_TIMEOUT, request_timeout=REQUEST_TIMEOUT)
        return fs_module.S3FileSystem(**settings)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError) as error:
        _log.warning("checkpoint storage: pyarrow's S3 settings could not be read back (%s); AWS's default "
                     "timeouts apply", error)
        return filesystem


def _local_files(local_dir: Path) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """Relative path -> (size, mtime_ns) of each regular file below ``local_dir``, and the
    symlinks found (neither followed nor sent). A missing folder has no files."""
    files: dict[str, tuple[int, int]] = {}
    symlinks: list[str] = []
    for relative, status in _walk(local_dir, PurePosixPath()):
        if stat.S_ISLNK(status.st_mode):
            symlinks.append(str(relative))
        elif stat.S_ISREG(status.st_mode):
            files[str(relative)] = (status.st_size, status.st_mtime_ns)
    return files, symlinks


def _walk(folder: Path, relative: PurePosixPath) -> Iterator[tuple[PurePosixPath, os.stat_result]]:
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        try:
            status = entry.stat(follow_symlinks=False)
        except FileNotFoundError:   # removed since the folder was read
            continue
        if stat.S_ISDIR(status.st_mode):
            yield from _walk(Path(entry.path), relative / entry.name)
        else:
            yield relative / entry.name, status


def _make_folder(folder: Path) -> None:
    """``folder`` as a real folder: a symlink or file in its place is removed first."""
    try:
        status = os.lstat(folder)
    except FileNotFoundError:
        folder.mkdir(parents=True)
        return
    if not stat.S_ISDIR(status.st_mode):
        folder.unlink()
        folder.mkdir()


def _remove_others(local_dir: Path, keep: set[str]) -> None:
    """Remove from ``local_dir`` every file (or symlink) not in ``keep`` and the folders left empty."""
    for relative, status in list(_walk(local_dir, PurePosixPath())):
        if str(relative) not in keep:
            (local_dir / relative).unlink()
    for folder, _, _ in sorted(os.walk(local_dir), key=lambda entry: -len(entry[0])):
        if Path(folder) != local_dir and not os.listdir(folder):
            os.rmdir(folder)


