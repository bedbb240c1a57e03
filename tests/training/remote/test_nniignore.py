"""Which files of a code folder go to remote hosts: NNI's ``.nniignore`` (gitignore rules, the
one file at the top, as NNI's manager reads it in ts/nni_manager/common/tarball.ts) and NNI's
limits of 2000 entries and 300 MB, checked before anything is sent."""
from __future__ import annotations

from pathlib import Path

import pytest

from expmgr.training.remote._nniignore import CodeFolderError, code_files

NO_LIMIT = {"size_limit": 2**40, "file_limit": 10**6}


def make(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_nnis_own_example_top_level_patterns_match_at_any_depth(tmp_path):
    # NNI's test (fileUtility.test.ts) with tarball.ts's reading: only the top .nniignore counts.
    root = make(tmp_path, {".nniignore": "abc\nxyz", "abc": "123", "abcd": "1234", "xyz/f": "",
                           "xyy/.nniignore": "qq", "xyy/abc": "123", "xyy/qq": "1234", "xyy/pp": "1234",
                           "www/.nniignore": "pp", "www/abc": "123", "www/qq": "1234", "www/pp": "1234"})
    (root / "xx").mkdir()
    found = code_files(root, **NO_LIMIT)
    assert found.folders == ["www", "xx", "xyy"]
    assert found.files == [".nniignore", "abcd", "www/.nniignore", "www/pp", "www/qq",
                           "xyy/.nniignore", "xyy/pp", "xyy/qq"]


def test_gitignore_rules_anchored_folder_only_negation_and_double_star(tmp_path):
    root = make(tmp_path, {".nniignore": "# a comment\n/build\ndata/\n*.ckpt\n!best.ckpt\nlogs/**/*.log\n",
                           "build/x": "", "src/build/y": "", "data/a": "", "src/data": "not a folder",
                           "m.ckpt": "", "best.ckpt": "", "src/n.ckpt": "", "logs/a/b/run.log": "",
                           "logs/keep.txt": ""})
    found = code_files(root, **NO_LIMIT)
    assert found.files == [".nniignore", "best.ckpt", "logs/keep.txt", "src/build/y", "src/data"]
    assert found.folders == ["logs", "logs/a", "logs/a/b", "src", "src/build"]


def test_links_are_listed_as_links_and_not_followed(tmp_path):
    root = make(tmp_path / "code", {"real/f.py": "x"})
    (root / "alias").symlink_to("real")
    (root / "outside").symlink_to(tmp_path)
    found = code_files(root, **NO_LIMIT)
    assert (found.links, found.files) == (["alias", "outside"], ["real/f.py"])


def test_size_limit_names_the_folder_its_size_and_the_limit(tmp_path):
    root = make(tmp_path, {"a.bin": "a" * 700, "b.bin": "b" * 700, "c.py": "c"})
    with pytest.raises(CodeFolderError) as raised:
        code_files(root, size_limit=1000, file_limit=2000)
    assert str(raised.value) == (f"code folder {root} is over the upload limit: 1401 bytes of files to upload, "
                                 f"limit 1000 bytes; exclude data and checkpoints in {root / '.nniignore'} "
                                 f"(gitignore patterns)")
    make(root, {".nniignore": "*.bin\n"})
    assert code_files(root, size_limit=1000, file_limit=2000).files == [".nniignore", "c.py"]


def test_too_many_files_as_nni_counts_them(tmp_path):
    root = make(tmp_path, {f"{i}.txt": "" for i in range(5)})
    with pytest.raises(CodeFolderError, match=r"has more than 4 files and folders to upload; exclude"):
        code_files(root, size_limit=2**20, file_limit=4)
    make(root, {".nniignore": "*.txt"})
    assert code_files(root, size_limit=2**20, file_limit=4).files == [".nniignore"]
