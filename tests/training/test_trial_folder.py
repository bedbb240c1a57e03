"""A trial's folder as the services that share the manager's folders make it
(``_folder.prepare_folder``): parameter.json written at the first attempt, kept after,
and written again if its manager died while writing it."""
from __future__ import annotations

import json
from pathlib import Path

from expmgr.layout import TrialFolder
from expmgr.training._folder import prepare_folder

RECORD = {"parameter_id": 3, "parameter_source": "algorithm", "parameters": {"lr": 0.1}, "parameter_index": 0}


def test_parameter_file_is_written_at_the_first_attempt_and_kept_after(tmp_path: Path):
    files = TrialFolder(tmp_path / "trials" / "Ab3dE")
    prepare_folder(files, RECORD)
    assert json.loads(files.parameter_file.read_text()) == RECORD
    prepare_folder(files, {**RECORD, "parameters": {"lr": 0.5}})  # a later attempt never rewrites it
    assert json.loads(files.parameter_file.read_text()) == RECORD


def test_a_parameter_file_cut_short_by_a_dying_manager_is_written_again(tmp_path: Path):
    files = TrialFolder(tmp_path / "trials" / "Ab3dE")
    files.root.mkdir(parents=True)
    whole = json.dumps(RECORD).encode()
    for torn in (whole[:-1], whole[:7], b"", b"\0" * len(whole)):
        files.parameter_file.write_bytes(torn)
        prepare_folder(files, RECORD)
        assert json.loads(files.parameter_file.read_text()) == RECORD, torn
    assert [path.name for path in files.root.iterdir()] == ["parameter.json"]
