"""Checkpoint storage (expmgr/training/checkpoint_storage.py), each behaviour on a local folder
and on a real S3-compatible server (moto's, tests/helpers/s3_server.py): round trips, what an
upload sends and deletes, PBT's copy, hostile stored keys, symlinks, the storage path's checks,
and check_writable's clear and bounded errors."""
from __future__ import annotations

import logging
import os
import pickle
import socket
import subprocess
import threading
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from expmgr.training import checkpoint_storage
from expmgr.training.checkpoint_storage import CheckpointStorage, StorageError, check_storage_path
from tests.helpers.common import ENV_WITH_REPO, PYTHON, REPO
from tests.helpers.s3_server import S3_ENV

pafs = pytest.importorskip("pyarrow.fs", reason="pyarrow is not installed (pip install 'expmgr[ray]')")

EXPERIMENT = "exp1"
BOUND = 180.0
"""Seconds a failing check may take before the test calls it a hang (its own bounds are far less)."""


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """AWS's variables as a user would set them (dummy keys, a region), for an endpoint that is not moto's."""
    for name, value in S3_ENV.items():
        monkeypatch.setenv(name, value)


@pytest.fixture(params=["local", "s3"])
def storage_uri(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "local":
        return str(tmp_path / "storage")
    return request.getfixturevalue("s3_server").uri


def stored_filesystem(uri: str) -> tuple[Any, str]:
    """A filesystem of the test's own on the storage (not the product's), and the root path in it."""
    if "://" not in uri:
        return pafs.LocalFileSystem(), uri
    return pafs.FileSystem.from_uri(uri + "&region=us-east-1")


def stored_keys(uri: str, trial_id: str) -> dict[str, str]:
    """Each stored file of the trial's checkpoint: its path below checkpoint/ -> its full path."""
    fs, root = stored_filesystem(uri)
    base = f"{root}/{EXPERIMENT}/{trial_id}/checkpoint"
    infos = fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    return {info.path[len(base) + 1:]: info.path for info in infos if info.type == pafs.FileType.File}


def stored_files(uri: str, trial_id: str) -> dict[str, bytes]:
    fs, _ = stored_filesystem(uri)
    return {relative: fs.open_input_stream(path).read() for relative, path in stored_keys(uri, trial_id).items()}


def write_stored(uri: str, trial_id: str, relative: str, content: bytes) -> None:
    fs, root = stored_filesystem(uri)
    path = f"{root}/{EXPERIMENT}/{trial_id}/checkpoint/{relative}"
    if "://" not in uri:
        fs.create_dir(path.rpartition("/")[0], recursive=True)
    with fs.open_output_stream(path) as stream:
        stream.write(content)


def put_object_as_is(s3_server, key: str, content: bytes) -> None:
    """Store an object under exactly ``key`` (pyarrow's HTTP client removes '..' parts from a
    path; the key quoted whole is not touched). moto checks no signature."""
    url = f"http://{s3_server.endpoint}/{s3_server.bucket}/{urllib.parse.quote(key, safe='')}"
    request = urllib.request.Request(url, data=content, method="PUT",
                                     headers={"Content-Type": "application/octet-stream"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200


def tree(folder: Path) -> dict[str, bytes]:
    """Every regular file below ``folder`` (symlinks not followed) and its content."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*"))
            if path.is_file() and not path.is_symlink()}


def nested_checkpoint(folder: Path) -> dict[str, bytes]:
    files = {"model.pt": os.urandom(300_000), "optimizer/state.bin": bytes(range(256)) * 40,
             "optimizer/deep/er/step.txt": b"41\n", "empty.bin": b""}
    for relative, content in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_bytes(content)
    return files


# -- round trips ------------------------------------------------------------------------------

def test_a_nested_tree_of_binary_files_comes_back_whole_with_its_modification_times(storage_uri: str, tmp_path: Path):
    storage = CheckpointStorage(storage_uri, EXPERIMENT)
    source = tmp_path / "node-a" / "checkpoint"
    files = nested_checkpoint(source)
    storage.upload("trial1", source)
    assert stored_files(storage_uri, "trial1") == files

    target = tmp_path / "node-b" / "checkpoint"
    assert storage.download("trial1", target) is True
    assert tree(target) == files
    for relative in files:
        assert (target / relative).stat().st_mtime_ns == (source / relative).stat().st_mtime_ns, relative


def test_the_storage_is_picklable_and_opens_its_filesystem_again_after(storage_uri: str, tmp_path: Path):
    storage = CheckpointStorage(storage_uri, EXPERIMENT)
    storage.check_writable()     # opens the filesystem here
    state = storage.__getstate__()
    assert state == {"uri": storage_uri, "experiment_id": EXPERIMENT}
    copy = pickle.loads(pickle.dumps(storage))
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "a").write_bytes(b"a")
    copy.upload("trial1", tmp_path / "ckpt")
    assert stored_files(storage_uri, "trial1") == {"a": b"a"}


def test_a_checkpoint_uploaded_by_another_process_from_the_pickled_storage_is_downloaded_here(
        storage_uri: str, tmp_path: Path):
    # As on Ray: the storage is pickled to a node's process, which opens the filesystem itself.
    storage = CheckpointStorage(storage_uri, EXPERIMENT)
    (tmp_path / "storage.pickle").write_bytes(pickle.dumps(storage))
    files = nested_checkpoint(tmp_path / "node" / "checkpoint")
    script = ("import pickle, sys; from pathlib import Path\n"
              "storage = pickle.loads(Path(sys.argv[1]).read_bytes())\n"
              "storage.upload('trial1', Path(sys.argv[2]))\n")
    arguments = [str(tmp_path / "storage.pickle"), str(tmp_path / "node" / "checkpoint")]
    done = subprocess.run([PYTHON, "-c", script, *arguments],
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert storage.download("trial1", tmp_path / "here") is True
    assert tree(tmp_path / "here") == files


# -- what an upload sends ---------------------------------------------------------------------

def test_a_changed_file_is_uploaded_again_and_an_unchanged_one_is_not(storage_uri: str, tmp_path: Path):
    storage = CheckpointStorage(storage_uri, EXPERIMENT)
    local = tmp_path / "checkpoint"
    local.mkdir()
    (local / "weights.bin").write_bytes(b"w" * 1000)
    (local / "step.txt").write_bytes(b"step 1")
    storage.upload("trial1", local)
    # A marker stored in place of the unchanged file, of its size: it stays only if the file is not sent again.
    write_stored(storage_uri, "trial1", "weights.bin", b"m" * 1000)
    # Same size, new content and time: changed.
    (local / "step.txt").write_bytes(b"step 2")
    stat = (local / "step.txt").stat()
    os.utime(local / "step.txt", ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))

    storage.upload("trial1", local)

    assert stored_files(storage_uri, "trial1") == {"weights.bin": b"m" * 1000, "step.txt": b"step 2"}


def test_a_file_whose_time_alone_changed_is_uploaded_again(storage_uri: str, tmp_path: Path):
    storage = CheckpointStorage(storage_uri, EXPERIMENT)
    local = tmp_path / "checkpoint"
    local.mkdir()
    (local / "weights.bin").write_bytes(b"w" * 100)
    storage.upload("trial1", local)
    write_stored(storage_uri, "trial1", "weights.bin", b"m" * 100)
    stat = (local / "weights.bin").stat()
    os.utime(local / "weights.bin", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    storage.upload("trial1", local)
    assert stored_files(storage_uri, "trial1") == {"weights.bin": b"w" * 100}


def test_a_file_deleted_locally_is_deleted_from_the_storage(storage_uri: str, tmp_path: Path):
    storage = CheckpointStorage(storage_uri, EXPERIMENT)
    local = tmp_path / "checkpoint"
    nested_checkpoint(local)
    storage.upload("trial1", local)
    (local / "optimizer" / "deep" / "er" / "step.txt").unlink()
    (local / "model.pt").unlink()
    storage.upload("trial1", local)

    assert set(stored_files(storage_uri, "trial1")) == {"optimizer/state.bin", "empty.bin"}
    elsewhere = tmp_path / "elsewhere"
    storage.download("trial1", elsewhere)
    assert set(tree(elsewhere)) == {"optimizer/state.bin", "empty.bin"}


@pytest.mark.parametrize("emptied", ["empty", "missing"])
def test_an_empty_or_missing_folder_clears_the_stored_checkpoint(storage_uri: str, tmp_path: Path, emptied: str):
    storage = CheckpointStorage(storage_uri, EXPERIMENT)
    local = tmp_path / "checkpoint"
    nested_checkpoint(local)
    storage.upload("trial1", local)
    for path in sorted(local.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    if emptied == "missing":
        local.rmdir()

    storage.upload("trial1", local)

    assert stored_files(storage_uri, "trial1") == {}
    assert storage.download("trial1", tmp_path / "elsewhere") is False


# -- download ---------------------------------------------------------------------------------

def test_a_download_of_nothing_is_false_and_leaves_the_folder_empty(storage_uri: str, tmp_path: Path):
    storage = CheckpointStorage(storage_uri, EXPERIMENT)
    local = tmp_path / "checkpoint"
    nested_checkpoint(local)       # left from an earlier attempt on this node
    assert storage.download("never-uploaded", local) is False
    assert local.is_dir() and list(local.iterdir()) == []


def test_a_download_makes_the_folder_equal_to_the_stored_tree(storage_uri: str, tmp_path: Path):
    storage = CheckpointStorage(storage_uri, EXPERIMENT)
    source = tmp_path / "source"
    files = nested_checkpoint(source)
    storage.upload("trial1", source)
    local = tmp_path / "checkpoint"
    (local / "stale" / "deeper").mkdir(parents=True)
    (local / "stale" / "deeper" / "old.bin").write_bytes(b"old")
    (local / "model.pt").write_bytes(b"an older model")
    (local / "optimizer").write_bytes(b"a file where the stored tree has a folder")

    assert storage.download("trial1", local) is True
    assert tree(local) == files
    assert not (local / "stale").exists()


def test_a_download_never_writes_through_a_symlink_in_the_folder(storage_uri: str, tmp_path: Path):
    storage = CheckpointStorage(storage_uri, EXPERIMENT)
    source = tmp_path / "source"
    files = nested_checkpoint(source)
    storage.upload("trial1", source)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "model.pt").write_bytes(b"not yours")
    local = tmp_path / "checkpoint"
    local.mkdir()
    os.symlink(outside / "model.pt", local / "model.pt")
    os.symlink(outside, local / "optimizer")

    storage.download("trial1", local)

    assert tree(outside) == {"model.pt": b"not yours"}
    assert not (local / "model.pt").is_symlink() and not (local / "optimizer").is_symlink()
    assert tree(local) == files


@pytest.mark.parametrize("hostile", ["../escaped.bin", "/absolute.bin", "a/../../escaped.bin"])
def test_a_stored_key_that_leads_out_of_the_folder_is_refused(s3_server, tmp_path: Path, hostile: str):
    # Only an object store can hold such a key: a folder's names cannot contain '..' or '/'.
    storage = CheckpointStorage(s3_server.uri, EXPERIMENT)
    write_stored(s3_server.uri, "trial1", "fine.bin", b"fine")
    put_object_as_is(s3_server, f"{s3_server.prefix}/{EXPERIMENT}/trial1/checkpoint/{hostile}", b"escaped")
    assert set(stored_keys(s3_server.uri, "trial1")) == {"fine.bin", hostile}   # stored as is, not normalized
    local = tmp_path / "node" / "trial1" / "checkpoint"

    with pytest.raises(StorageError, match=r"refused the stored key .*outside the checkpoint folder") as raised:
        storage.download("trial1", local)
    assert s3_server.bucket in str(raised.value)
    assert [path.name for path in tmp_path.rglob("*.bin")] == []
    with pytest.raises(StorageError, match="refused the stored key"):
        storage.copy("trial1", "trial2")
    # Not deleted either: its '..' would be resolved on the way, deleting another object.
    (tmp_path / "fresh").mkdir()
    (tmp_path / "fresh" / "new.txt").write_bytes(b"new")
    with pytest.raises(StorageError, match="refused the stored key"):
        storage.upload("trial1", tmp_path / "fresh")
    assert set(stored_keys(s3_server.uri, "trial1")) == {"fine.bin", hostile}


# -- symlinks when uploading ------------------------------------------------------------------

def test_symlinks_are_skipped_not_followed_and_named_once_in_the_log(storage_uri: str, tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture):
    storage = CheckpointStorage(storage_uri, EXPERIMENT)
    outside = tmp_path / "outside"
    (outside / "secrets").mkdir(parents=True)
    (outside / "secrets" / "key").write_bytes(b"secret")
    (outside / "passwd").write_bytes(b"root:x:0:0")
    local = tmp_path / "checkpoint"
    (local / "sub").mkdir(parents=True)
    (local / "sub" / "real.bin").write_bytes(b"real")
    os.symlink(outside / "secrets", local / "linked-folder")
    os.symlink(outside / "passwd", local / "sub" / "linked-file")

    with caplog.at_level(logging.WARNING, logger=checkpoint_storage.__name__):
        storage.upload("trial1", local)

    assert stored_files(storage_uri, "trial1") == {"sub/real.bin": b"real"}
    warnings = [record.getMessage() for record in caplog.records if "symlink" in record.getMessage()]
    assert len(warnings) == 1, warnings
    assert "linked-folder" in warnings[0] and "sub/linked-file" in warnings[0]


# -- PBT's copy -------------------------------------------------------------------------------

def test_copy_makes_the_target_checkpoint_a_copy_of_the_source(storage_uri: str, tmp_path: Path):
    storage = CheckpointStorage(storage_uri, EXPERIMENT)
    files = nested_checkpoint(tmp_path / "source")
    storage.upload("source", tmp_path / "source")
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "model.pt").write_bytes(b"the target's own, worse model")
    (tmp_path / "target" / "only-in-target.txt").write_bytes(b"gone after the exploit")
    storage.upload("target", tmp_path / "target")

    assert storage.copy("source", "target") is True

    assert stored_files(storage_uri, "target") == files
    assert stored_files(storage_uri, "source") == files
    restored = tmp_path / "restored"
    storage.download("target", restored)
    assert tree(restored) == files


def test_copy_from_a_trial_without_a_checkpoint_is_false_and_leaves_the_target(storage_uri: str, tmp_path: Path):
    storage = CheckpointStorage(storage_uri, EXPERIMENT)
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "model.pt").write_bytes(b"kept")
    storage.upload("target", tmp_path / "target")
    assert storage.copy("no-checkpoint", "target") is False
    assert stored_files(storage_uri, "target") == {"model.pt": b"kept"}


# -- names ------------------------------------------------------------------------------------

def test_location_and_describe_name_the_storage_without_credentials(s3_server):
    uri = s3_server.uri.replace("s3://", "s3://AKIDEXAMPLE:wJalrXUtnFEMIsecret@")
    storage = CheckpointStorage(uri, EXPERIMENT)
    assert "wJalrXUtnFEMIsecret" not in storage.describe() and "AKIDEXAMPLE" not in storage.describe()
    assert storage.describe() == s3_server.uri
    assert storage.location("trial1") == f"s3://{s3_server.bucket}/{s3_server.prefix}/{EXPERIMENT}/trial1/checkpoint/"
    local = CheckpointStorage("/mnt/shared/ckpt", EXPERIMENT)
    assert local.location("trial1") == f"/mnt/shared/ckpt/{EXPERIMENT}/trial1/checkpoint/"


# -- the storage path's checks ----------------------------------------------------------------

@pytest.mark.parametrize("value, problem", [
    ("", "empty"),
    ("checkpoints/here", "'checkpoints/here' is a relative path"),
    ("gs://bucket/prefix", "scheme 'gs' is not supported"),
    ("hdfs://namenode/x", "scheme 'hdfs' is not supported"),
    ("s3:///prefix", "names no bucket"),
    ("s3://bucket/prefix?endpoint_overide=127.0.0.1:9000", "Unexpected query parameter in S3 URI: 'endpoint_overide'"),
    ("s3://KEY:SECRET@bucket/prefix?color=blue", "'s3://bucket/prefix?color=blue'"),
    ("s3://bucket/../prefix", "'..'"),
    ("file://host/path", "file:// URI names a local folder only"),
])
def test_check_storage_path_names_the_problem_in_one_line(value: str, problem: str):
    message = check_storage_path(value)
    assert message is not None and problem in message, message
    assert "\n" not in message and "SECRET" not in message


@pytest.mark.parametrize("value", [
    "/mnt/shared/checkpoints", "file:///mnt/shared/checkpoints", "s3://bucket", "s3://bucket/a/prefix",
    "s3://bucket/prefix?region=eu-west-1", "s3://bucket/p?endpoint_override=127.0.0.1:9000&scheme=http",
])
def test_check_storage_path_takes_the_forms_ray_tune_takes(value: str):
    assert check_storage_path(value) is None


def test_without_pyarrow_the_error_says_what_to_install(tmp_path: Path):
    script = f"""
import sys
sys.modules["pyarrow"] = None       # as if not installed
from pathlib import Path
from expmgr.training.checkpoint_storage import CheckpointStorage, StorageError, check_storage_path
print(check_storage_path("s3://bucket/prefix"))
try:
    CheckpointStorage({str(tmp_path / 'storage')!r}, "exp").upload("t", Path({str(tmp_path)!r}))
except StorageError as error:
    print(error)
"""
    result = subprocess.run([PYTHON, "-c", script], env=ENV_WITH_REPO, capture_output=True, text=True, timeout=120)
    lines = result.stdout.splitlines()
    assert result.returncode == 0 and len(lines) == 2, result.stdout + result.stderr
    assert all("pyarrow is not installed (pip install 'expmgr[ray]')" in line for line in lines), lines


# -- check_writable ---------------------------------------------------------------------------

def test_check_writable_passes_and_leaves_nothing_behind(storage_uri: str):
    CheckpointStorage(storage_uri, EXPERIMENT).check_writable()
    fs, root = stored_filesystem(storage_uri)
    left = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    assert [info.path for info in left if info.type == pafs.FileType.File] == []


def test_check_writable_on_a_missing_bucket_names_it(s3_server):
    storage = CheckpointStorage(s3_server.server.uri_of("no-such-bucket", "prefix"), EXPERIMENT)
    error = failure_within_bound(storage.check_writable)
    assert "s3://no-such-bucket/prefix" in error and "writing a probe object failed" in error, error
    assert "does not exist (create the bucket, or correct its name in the storage path)" in error, error


def test_check_writable_where_nothing_listens_is_a_clear_error(aws_env):
    # A socket bound but not listening: its port refuses connections, and no other process takes it meanwhile.
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        uri = f"s3://AKIDEXAMPLE:wJalrXUtnFEMIsecret@bucket/prefix?endpoint_override=127.0.0.1:{port}&scheme=http"
        error = failure_within_bound(CheckpointStorage(uri, EXPERIMENT).check_writable)
    assert f"endpoint_override=127.0.0.1:{port}" in error and "writing a probe object failed" in error, error
    assert "Could not connect" in error and "check that this node reaches the endpoint" in error, error
    assert "wJalrXUtnFEMIsecret" not in error and "\n" not in error


def test_check_writable_where_the_endpoint_never_answers_is_a_clear_error(aws_env, monkeypatch: pytest.MonkeyPatch):
    # Accepts connections (the kernel's backlog) and never says a word.
    monkeypatch.setattr(checkpoint_storage, "REQUEST_TIMEOUT", 1.0)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        uri = f"s3://bucket/prefix?endpoint_override=127.0.0.1:{port}&scheme=http"
        error = failure_within_bound(CheckpointStorage(uri, EXPERIMENT).check_writable)
    assert "writing a probe object failed" in error and "Timeout" in error, error


def failure_within_bound(check) -> str:
    """Run ``check`` in a thread: it must raise StorageError before BOUND seconds (a hang fails
    the test); the error's message."""
    outcome: list[BaseException | None] = []
    def run() -> None:
        try:
            check()
            outcome.append(None)
        except BaseException as error:  # noqa: BLE001 - handed to the test
            outcome.append(error)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(BOUND)
    assert outcome, f"the check did not end within {BOUND} s"
    assert isinstance(outcome[0], StorageError), outcome[0]
    return str(outcome[0])
