"""``expctl experiment save`` and ``load`` (issue 21): the archive leaves the experiment's
secrets out and is readable by its owner only; a loaded experiment is as private as a
created one, with a key of its own; and an archive is not trusted: an id or a member that
would land outside the home or --codeDir, a link, a zip bomb, a name twice, a damaged
registry.json, an experiment already there, are refused with nothing written.

One real experiment is created and saved for the module; the crafted archives are that
archive rewritten."""
from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import stat
import subprocess
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path
from typing import Callable, Iterator

import pytest

from expmgr.cli.unpacking import UnsafeArchive, checked_members
from tests.helpers.cli_create import BASE
from tests.helpers.common import REPO

Members = list[tuple[zipfile.ZipInfo, bytes]]
REGISTRY_FILES = {"registry.sqlite", "registry.sqlite-wal", "registry.sqlite-shm"}
OUTSIDE = "<outside>"
"""In a crafted registry.json: the absolute path of the test's ``Loading.outside``."""


def expctl(home: Path, cwd: Path, *args: str, umask: int | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "expmgr.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120, preexec_fn=None if umask is None else lambda: os.umask(umask))


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


class Saved:
    """The module's experiment, stopped, and its archive (saved with its code, umask 0)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cwd = root / "project"
        self.home = root / "home"
        self.cwd.mkdir()
        (self.cwd / "trial.py").write_text("import expmgr\nexpmgr.report_final_result(1.0)\n")
        (self.cwd / "space.json").write_text('{"x": {"_type": "uniform", "_value": [0, 1]}}')
        (self.cwd / "config.yml").write_text(BASE)
        created = expctl(self.home, self.cwd, "create", "--config", "config.yml", "--port", "0", "--foreground",
                         "--exit-when-done")
        assert created.returncode == 0, created.stderr
        (self.folder,) = [path for path in self.home.iterdir() if path.is_dir()]
        self.id = self.folder.name
        self.out = root / "out"
        saved = expctl(self.home, self.cwd, "experiment", "save", self.id, "--path", str(self.out), "--saveCodeDir",
                       umask=0)  # the most open umask there is
        assert saved.returncode == 0, saved.stderr
        self.archive = self.out / f"nni_experiment_{self.id}.zip"

    def members(self) -> Members:
        with zipfile.ZipFile(self.archive) as archive:
            return [(info, archive.read(info)) for info in archive.infolist()]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Saved:
    return Saved(tmp_path_factory.mktemp("saved"))


class Loading:
    """A home to load into, three folders deep in the test's folder so that an id of
    ``../../x`` lands in the test's folder too (``outside``), and a --codeDir."""

    def __init__(self, saved: Saved, tmp_path: Path) -> None:
        self.saved = saved
        self.tmp_path = tmp_path
        self.home = tmp_path / "a" / "b" / "home"
        self.code = tmp_path / "code"
        self.outside = tmp_path / "a" / "x"

    def load(self, archive: Path, umask: int | None = None) -> subprocess.CompletedProcess:
        return expctl(self.home, self.saved.cwd, "experiment", "load", "--path", str(archive),
                      "--codeDir", str(self.code), "--logDir", str(self.home), umask=umask)

    def crafted(self, change: Callable[[Members], Members], name: str = "crafted.zip") -> Path:
        """The module's archive with its members changed by ``change``."""
        path = self.tmp_path / name
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # zipfile's "Duplicate name"
            with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
                for info, data in change(self.saved.members()):
                    archive.writestr(info, data.replace(OUTSIDE.encode(), str(self.outside).encode()))
        return path

    def assert_nothing_loaded(self) -> None:
        """No experiment, no unpacked folder left in the home, nothing in --codeDir, nothing beside the home."""
        left = {path.name for path in self.home.iterdir()} if self.home.exists() else set()
        assert left <= REGISTRY_FILES, f"left in the home: {left - REGISTRY_FILES}"
        assert not self.code.exists() or not any(self.code.iterdir())
        assert not self.outside.exists() and {path.name for path in (self.tmp_path / "a").rglob("*")} <= {
            "b", "home", *REGISTRY_FILES}


@pytest.fixture
def loading(saved: Saved, tmp_path: Path) -> Loading:
    return Loading(saved, tmp_path)


def with_metadata(**fields: object) -> Callable[[Members], Members]:
    def change(members: Members) -> Members:
        return [(info, json.dumps({**json.loads(data), **fields}).encode() if info.filename == "registry.json"
                 else data) for info, data in members]
    return change


def with_member(name: str, data: bytes = b"#!/bin/sh\necho owned\n",
                kind: int = stat.S_IFREG) -> Callable[[Members], Members]:
    info = zipfile.ZipInfo(name)
    info.create_system = 3  # Unix: external_attr's high bits are a file mode
    info.external_attr = (kind | 0o777) << 16
    return lambda members: [*members, (info, data)]


def with_database(statement: str, *values: object) -> Callable[[Members], Members]:
    """The experiment's database changed by one SQL statement."""
    def change(members: Members) -> Members:
        changed = []
        for info, data in members:
            if info.filename == "experiment/db/experiment.sqlite":
                with tempfile.TemporaryDirectory() as folder:
                    database = Path(folder) / "experiment.sqlite"
                    database.write_bytes(data)
                    with contextlib.closing(sqlite3.connect(database)) as connection, connection:
                        connection.execute(statement, values)
                    data = database.read_bytes()
            changed.append((info, data))
        return changed
    return change


def chained(*changes: Callable[[Members], Members]) -> Callable[[Members], Members]:
    return lambda members: functools.reduce(lambda changed, change: change(changed), changes, members)


def replaced(name: str, data: bytes) -> Callable[[Members], Members]:
    return lambda members: [(info, data if info.filename == name else content) for info, content in members]


def test_the_saved_archive_is_0600_and_holds_no_secret(saved: Saved):
    assert (saved.folder / "access.json").is_file() and (saved.folder / "trial-secret").is_file()
    assert _mode(saved.archive) == 0o600, oct(_mode(saved.archive))
    names = [info.filename for info, _ in saved.members()]
    assert "experiment/access.json" not in names and "experiment/trial-secret" not in names
    assert "experiment/db/experiment.sqlite" in names and "code/trial.py" in names
    assert [path.name for path in saved.out.iterdir()] == [saved.archive.name], "no temporary file left"


def test_a_loaded_experiment_is_private_and_has_a_key_of_its_own(loading: Loading):
    loaded = loading.load(loading.saved.archive, umask=0)
    assert loaded.returncode == 0, loaded.stderr
    root = loading.home / loading.saved.id
    for folder in (loading.home, root, *(path for path in root.rglob("*") if path.is_dir())):
        assert _mode(folder) == 0o700, f"{folder}: {oct(_mode(folder))}"
    files = [path for path in root.rglob("*") if not path.is_dir()]
    assert {"experiment.sqlite", "trial-secret", "config.yml"} <= {path.name for path in files}
    for file in files:
        assert _mode(file) == 0o600, f"{file}: {oct(_mode(file))}"
    assert (root / "trial-secret").read_bytes() != (loading.saved.folder / "trial-secret").read_bytes()
    assert not (root / "access.json").exists()
    assert {path.name for path in loading.home.iterdir()} <= {loading.saved.id, *REGISTRY_FILES}, \
        "no unpacked folder left"
    listed = json.loads(expctl(loading.home, loading.saved.cwd, "trial", "ls", loading.saved.id, "--json").stdout)
    assert [row["final"] for row in listed] == [1.0, 1.0]


def test_an_older_archive_s_secrets_are_not_taken(loading: Loading):
    archive = loading.crafted(chained(with_member("experiment/access.json", b'{"token": "theirs"}'),
                                      with_member("experiment/trial-secret", b"their key")))
    loaded = loading.load(archive)
    assert loaded.returncode == 0, loaded.stderr
    root = loading.home / loading.saved.id
    assert not (root / "access.json").exists()
    assert (root / "trial-secret").read_bytes() != b"their key" and _mode(root / "trial-secret") == 0o600


CRAFTED = {
    "id ../../x": (with_metadata(id="../../x"), "invalid experiment id '../../x'"),
    "id ../../x, the database's too": (
        chained(with_metadata(id="../../x"), with_database("UPDATE experiment SET id = ?", "../../x")),
        "invalid experiment id '../../x'"),
    "a trial id ../../x": (with_database("UPDATE trials SET trial_id = ? WHERE sequence_id = 0", "../../../../x"),
                           "its database has a trial id '../../../../x'"),
    "id absolute": (with_metadata(id=OUTSIDE), "invalid experiment id '/"),
    "id with a space": (with_metadata(id="a b"), "invalid experiment id 'a b'"),
    "id empty": (with_metadata(id=""), "invalid experiment id ''"),
    "id a number": (with_metadata(id=12), "invalid experiment id 12"),
    "id too long": (with_metadata(id="a" * 33), "invalid experiment id"),
    "member ../": (with_member("experiment/../../../x"), "member 'experiment/../../../x'"),
    "member absolute": (with_member("/expmgr-archive-test"), "member '/expmgr-archive-test'"),
    "code member ../": (with_member("code/../x"), "member 'code/../x'"),
    "member with a backslash": (with_member("experiment\\..\\..\\x"), "a relative path"),
    "symbolic link": (with_member("experiment/trials/link", b"/etc/passwd", stat.S_IFLNK), "is a symbolic link"),
    "code symbolic link": (with_member("code/link", b"/", stat.S_IFLNK), "is a symbolic link"),
    "device": (with_member("experiment/dev", b"", stat.S_IFCHR), "is a character device"),
    "a name twice": (with_member("experiment/config.yml", b"searchSpace: {}\n"), "is in the archive twice"),
    "a file and a folder": (with_member("experiment/db/experiment.sqlite/x"), "both a file and a folder"),
    "a member of no part": (with_member("evil.sh"), "member 'evil.sh' is not part of a saved experiment"),
    "registry.json not JSON": (replaced("registry.json", b"{'id': "), "registry.json is not valid JSON"),
    "registry.json a list": (replaced("registry.json", b"[]"), "registry.json: expected a JSON object, got list"),
    "status running": (with_metadata(status="RUNNING"), "status: expected one of"),
    "start_time a string": (with_metadata(start_time="now"), "start_time: expected a number, got 'now'"),
    "another experiment's database": (with_metadata(id="other"), "registry.json is experiment other's"),
    "no experiment folder": (lambda members: [(info, data) for info, data in members
                                              if not info.filename.startswith("experiment/")], "no experiment/ folder"),
}


@pytest.mark.parametrize("case", list(CRAFTED))
def test_a_crafted_archive_is_refused_with_nothing_written(loading: Loading, case: str):
    change, message = CRAFTED[case]
    refused = loading.load(loading.crafted(change))
    assert refused.returncode == 2 and message in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    loading.assert_nothing_loaded()
    assert not Path("/expmgr-archive-test").exists()


@pytest.mark.parametrize("name", ["experiment/trials/big", "code/big.py"])
def test_a_member_bigger_than_its_header_says_is_refused(loading: Loading, name: str):
    """The size in the central directory is what the bomb check adds up: a member that
    holds more is cut short, and refused, not unpacked whole; the code's other files are
    not put in --codeDir either."""
    archive = loading.crafted(with_member(name, b"0" * 100_000))
    data = bytearray(archive.read_bytes())
    header = data.rindex(b"PK\x01\x02")  # the last member's entry in the central directory
    assert int.from_bytes(data[header + 24:header + 28], "little") == 100_000
    data[header + 24:header + 28] = (10).to_bytes(4, "little")  # its uncompressed size
    archive.write_bytes(bytes(data))
    refused = loading.load(archive)
    assert refused.returncode == 2 and "is not an archive of experiment save" in refused.stderr, refused.stderr
    loading.assert_nothing_loaded()


def test_a_zip_bomb_is_refused_before_anything_is_unpacked(loading: Loading):
    """Five members saying 4 GiB each: 20 GiB, over the 16 GiB an archive may hold."""
    def five_more(members: Members) -> Members:
        return [*members, *((zipfile.ZipInfo(f"experiment/trials/big{index}"), b"0" * 1000) for index in range(5))]
    archive = loading.crafted(five_more)
    data = bytearray(archive.read_bytes())
    position = len(data)
    for _ in range(5):  # the central directory's last five entries: their uncompressed sizes
        position = data.rindex(b"PK\x01\x02", 0, position)
        data[position + 24:position + 28] = (2**32 - 2).to_bytes(4, "little")
    archive.write_bytes(bytes(data))
    refused = loading.load(archive)
    assert refused.returncode == 2 and "at most 17179869184 (16 GiB) are unpacked" in refused.stderr, refused.stderr
    loading.assert_nothing_loaded()


def test_too_many_members_are_refused(tmp_path: Path):
    path = tmp_path / "many.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for index in range(11):
            archive.writestr(f"experiment/{index}", b"")
    with zipfile.ZipFile(path) as archive:
        assert len(checked_members(archive, max_members=11)) == 11
        with pytest.raises(UnsafeArchive, match="11 members; an archive may have at most 10"):
            checked_members(archive, max_members=10)


def test_an_experiment_already_in_the_home_is_not_overwritten(loading: Loading):
    folder = loading.home / loading.saved.id
    folder.mkdir(parents=True)
    (folder / "mine").write_text("kept")
    refused = loading.load(loading.saved.archive)
    assert refused.returncode == 2 and f"experiment {loading.saved.id} is already in" in refused.stderr
    assert [path.name for path in folder.iterdir()] == ["mine"]
    assert {path.name for path in loading.home.iterdir()} <= {loading.saved.id, *REGISTRY_FILES}


def test_code_is_not_unpacked_through_a_link_in_code_dir(loading: Loading):
    """--codeDir's own symbolic link to a folder elsewhere: the code that would go through it is refused."""
    elsewhere = loading.tmp_path / "elsewhere"
    elsewhere.mkdir()
    loading.code.mkdir()
    (loading.code / "lib").symlink_to(elsewhere)
    refused = loading.load(loading.crafted(with_member("code/lib/module.py")))
    assert refused.returncode == 2 and "--codeDir: " in refused.stderr and "is not a folder" in refused.stderr
    assert list(elsewhere.iterdir()) == []
    assert not (loading.home / loading.saved.id).exists()
