"""docs/nni-migration.md's tables (issue 13's acceptance): every row says ``same``,
``different: how`` or ``not supported: why``; every ``same`` row names the tests that cover
it, and each test named exists; and the nnictl and config tables list every nnictl command
and every v2 config field of NNI 3.0."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers.common import REPO

DOC = REPO / "docs" / "nni-migration.md"
STATUS = re.compile(r"^(same\b|different: |not supported: )")

NNICTL_COMMANDS = ["create", "resume", "view", "update searchspace", "update concurrency", "update duration",
                   "update trialnum", "stop", "trial ls", "trial kill", "experiment show", "experiment status",
                   "experiment list", "experiment delete", "experiment import", "experiment export",
                   "experiment save", "experiment load", "platform clean", "webui url", "config show",
                   "log stdout", "log stderr", "log trial", "algo register", "algo unregister", "algo show",
                   "algo list", "trainingservice", "package", "top", "ss_gen", "jupyter-extension", "hello",
                   "--version"]
"""Every command of NNI 3.0's nni/tools/nnictl/nnictl.py."""

NNI_CONFIG_FIELDS = ["experimentName", "experimentType", "searchSpaceFile", "searchSpace", "trialCommand",
                     "trialCodeDirectory", "trialConcurrency", "trialGpuNumber", "maxExperimentDuration",
                     "maxTrialNumber", "maxTrialDuration", "nniManagerIp", "useAnnotation", "debug", "logLevel",
                     "experimentWorkingDirectory", "tunerGpuIndices", "tuner", "assessor", "advisor",
                     "trainingService", "sharedStorage", "name", "className", "codeDirectory", "classArgs",
                     "platform", "useActiveGpu", "maxTrialNumberPerGpu", "gpuIndices", "reuseMode"]
"""Every field of NNI 3.0's ExperimentConfig, _AlgorithmConfig and LocalConfig, camelCase."""


def tables() -> dict[str, list[list[str]]]:
    """Each table of the page whose second column is "under expmgr", by its first header
    cell: its rows as cells."""
    found: dict[str, list[list[str]]] = {}
    lines = DOC.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines):
        if line.startswith("| ") and "| under expmgr |" in line and lines[number + 1].startswith("|---"):
            header = _cells(line)
            rows = []
            for row in lines[number + 2:]:
                if not row.startswith("|"):
                    break
                rows.append(_cells(row))
            found[header[0]] = [header, *rows]
    return found


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def named_tests(cell: str) -> list[str]:
    return re.findall(r"`(tests/[^`]+)`", cell)


def test_the_page_has_a_table_for_each_part_of_nni():
    assert {"NNI 3.0", "NNI 3.0 field", "nnictl (NNI 3.0)", "NNI 3.0 route"} <= set(tables())


@pytest.mark.parametrize("name", sorted(tables()))
def test_every_row_has_a_status_and_every_same_row_names_tests_that_exist(name: str):
    header, *rows = tables()[name]
    assert header[1:] == ["under expmgr", "tests"], f"{name}: the columns are: NNI's, under expmgr, tests"
    for row in rows:
        assert len(row) == 3, row
        assert STATUS.match(row[1]), f"{row[0]}: the status is same, different: how, or not supported: why"
        tests = named_tests(row[2])
        if row[1].startswith("same"):
            assert tests, f"{row[0]}: a same row names the tests that cover it"
        for test in tests:
            path, _, function = test.partition("::")
            assert (REPO / path).is_file(), f"{row[0]}: no test file {path}"
            if function:
                source = (REPO / path).read_text(encoding="utf-8")
                assert re.search(rf"^(async )?def {re.escape(function)}\(", source, re.MULTILINE), (
                    f"{row[0]}: no test {function} in {path}")


def test_the_nnictl_table_has_every_nnictl_command():
    listed = " ".join(row[0] for row in tables()["nnictl (NNI 3.0)"][1:])
    for command in NNICTL_COMMANDS:
        first, *rest = command.split()
        assert re.search(rf"`(nnictl )?{re.escape(first)}\b[^`]*{' '.join(rest)}", listed), command


def test_the_config_table_has_every_nni_config_field():
    listed = " ".join(row[0] for row in tables()["NNI 3.0 field"][1:])
    for field in NNI_CONFIG_FIELDS:
        assert f"`{field}`" in listed, field
