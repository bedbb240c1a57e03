"""Where expmgr keeps things on disk: the one place that knows the file layout.

    paths = ExperimentPaths(Path("~/expmgr-experiments/ab12cd34").expanduser())
    paths.trial_dir("Xy3zQ") / "stdout"
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

HOME_ENV = "EXPMGR_HOME"
REGISTRY_FILE = "registry.sqlite"
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
ID_RULE = "letters, digits, '-' and '_', at most 32"
_VALID_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")


def is_valid_id(text: str) -> bool:
    """Whether ``text`` can be an experiment's or a trial's id (ID_RULE): each names a
    folder (``<home>/<exp_id>``, ``trials/<trial_id>``), so it is never a path (``..``,
    ``/``) nor empty."""
    return _VALID_ID.fullmatch(text) is not None


def make_private_dir(path: Path) -> None:
    """Create ``path`` (and missing parents) readable by its owner only: 0700 whatever
    the umask. A folder that exists already keeps its mode (the user chose it)."""
    if path.is_dir():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir(mode=PRIVATE_DIR_MODE)
    except FileExistsError:
        return  # made by another process in between, or not a folder: the caller's open says so
    os.chmod(path, PRIVATE_DIR_MODE)  # mkdir's mode is masked by the umask


def make_private_files(*paths: Path) -> None:
    """Make the files among ``paths`` that exist readable by their owner only (0600)."""
    for path in paths:
        try:
            os.chmod(path, PRIVATE_FILE_MODE)
        except FileNotFoundError:
            pass


def default_home() -> Path:
    """The folder holding every experiment: ``$EXPMGR_HOME`` or ``~/expmgr-experiments``."""
    return Path(os.environ.get(HOME_ENV) or "~/expmgr-experiments").expanduser().absolute()


@dataclass(frozen=True)
class ExperimentPaths:
    """The files of one experiment, all below ``root`` (``<home>/<exp_id>``)."""

    root: Path

    @property
    def config_file(self) -> Path:
        return self.root / "config.yml"

    @property
    def access_file(self) -> Path:
        """Host, url prefix and access token of its server (mode 0600; see expmgr/server/auth.py)."""
        return self.root / "access.json"

    @property
    def report_socket(self) -> Path:
        """The Unix socket local trials send their reports to while the experiment runs
        (mode 0600; expmgr/server/report_socket.py), removed when its server stops."""
        return self.root / "reports.sock"

    @property
    def database(self) -> Path:
        return self.root / "db" / "experiment.sqlite"

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"

    @property
    def experiment_log(self) -> Path:
        return self.log_dir / "experiment.log"

    @property
    def dispatcher_log(self) -> Path:
        return self.log_dir / "dispatcher.log"

    @property
    def daemon_log(self) -> Path:
        """A daemon's stdout (``expctl create``'s, once its experiment runs): nnictl's ``log stdout``."""
        return self.log_dir / "daemon.log"

    @property
    def daemon_stderr_log(self) -> Path:
        """A daemon's stderr, kept apart from its stdout: nnictl's ``log stderr``."""
        return self.log_dir / "daemon-stderr.log"

    @property
    def trials_dir(self) -> Path:
        return self.root / "trials"

    def trial_dir(self, trial_id: str) -> Path:
        return self.trials_dir / trial_id

    @property
    def database_files(self) -> tuple[Path, ...]:
        """The database and the files SQLite keeps beside it (WAL, shared memory)."""
        return (self.database, *(self.database.with_name(self.database.name + suffix)
                                 for suffix in ("-wal", "-shm", "-journal")))

    def create(self) -> None:
        """The experiment's folders, readable by their owner only (0700): whatever is
        written below them, trials' folders and logs included, is private through them."""
        make_private_dir(self.root.parent)
        for folder in (self.root, self.database.parent, self.log_dir, self.trials_dir):
            make_private_dir(folder)


@dataclass(frozen=True)
class TrialFolder:
    """The files of one trial, in ``trials/<trial_id>/``."""

    root: Path

    @property
    def parameter_file(self) -> Path:
        return self.root / "parameter.json"

    @property
    def stdout(self) -> Path:
        return self.root / "stdout"

    @property
    def stderr(self) -> Path:
        return self.root / "stderr"

    @property
    def trial_log(self) -> Path:
        return self.root / "trial.log"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def checkpoint_dir(self) -> Path:
        return self.root / "checkpoint"

    @property
    def preempting_marker(self) -> Path:
        """Written by ``mark_preempting()`` with the attempt number."""
        return self.root / "preempting"
