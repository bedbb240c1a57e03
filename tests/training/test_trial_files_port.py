"""Everything that reads a trial's output or checkpoint goes through the trial-files port
(``expmgr/training/files.py``): outside the training services, no module names a trial's
folder. So a service whose trials' folders the manager cannot see (another host) plugs in
with its own ``TrialFiles`` without touching the server, the CLI or the engine."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from expmgr.layout import ExperimentPaths
from expmgr.training import TrainingServiceError, trial_files

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "expmgr"
FOLDER_NAMES = frozenset({"trial_dir", "trials_dir", "TrialFolder"})
"""What names a trial's folder on this machine (expmgr/layout.py)."""
OWNERS = ("training/", "layout.py", "trial.py")
"""The trial folder's own modules: the services that make and read it, the layout that
defines it, and the trial-side API, which runs inside it."""
KNOWN = {("engine/runner.py", "trial_dir"): "a new trial's id is never that of a folder left on this machine"}
"""Each use outside the owners that is not a read of a trial's files, and why."""


def folder_names_outside_the_owners(root: Path = PACKAGE_ROOT) -> list[tuple[str, str, int]]:
    """(module, name, line) of each folder name used outside the owners and KNOWN."""
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative.startswith(OWNERS):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else \
                next((alias.name for alias in node.names if alias.name in FOLDER_NAMES), None) \
                if isinstance(node, ast.ImportFrom) else None
            if name in FOLDER_NAMES and (relative, name) not in KNOWN:
                found.append((relative, name, getattr(node, "lineno", 0)))
    return found


def test_no_reader_outside_the_training_services_names_a_trials_folder():
    assert folder_names_outside_the_owners() == [], \
        "read a trial's files through its TrialFiles (expmgr.training.trial_files, or the service's files)"


def test_the_check_finds_a_folder_named_outside_the_owners(tmp_path: Path):
    package = tmp_path / "expmgr"
    (package / "server").mkdir(parents=True)
    (package / "training").mkdir()
    (package / "server" / "reads.py").write_text(
        "from expmgr.layout import TrialFolder\n\ndef stdout(paths, trial_id):\n"
        "    return TrialFolder(paths.trial_dir(trial_id)).stdout\n")
    (package / "training" / "own.py").write_text("def folder(paths, trial_id):\n    return paths.trial_dir(trial_id)\n")
    assert folder_names_outside_the_owners(package) == [("server/reads.py", "TrialFolder", 1),
                                                 ("server/reads.py", "TrialFolder", 4),
                                                 ("server/reads.py", "trial_dir", 4)]


def test_trial_files_for_a_platform_without_them_is_refused_naming_it(tmp_path: Path):
    with pytest.raises(TrainingServiceError, match="no trial files for platform 'kubeflow': expected one of local, ray"):
        trial_files(ExperimentPaths(tmp_path), "kubeflow")
