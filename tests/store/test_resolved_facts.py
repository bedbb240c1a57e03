"""Facts resolved from the config when an experiment is created, stored with it and read
back (not re-derived from the stored config): its platform and optimize direction in its
profile and the registry, each trial's parameter source; and a version 5 store, which kept
none of them, read and migrated with them filled in from its config."""
from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from expmgr.states import ExperimentState, TrialState
from expmgr.store import SCHEMA_VERSION, ExperimentProfile, ExperimentStore, TrialRecord
from expmgr.store.registry import Registry, RegistryEntry
from tests.helpers.store import downgrade_to_schema_5

RAY_MINIMIZING = {"trialConcurrency": 1, "trainingService": {"platform": "ray"},
                  "tuner": {"name": "TPE", "classArgs": {"optimize_mode": "minimize"}}}


def as_version_5(database: Path) -> None:
    """Make a current store what version 5 wrote: none of the facts stored since 6."""
    downgrade_to_schema_5(database)


def version_of(database: Path) -> int:
    conn = sqlite3.connect(database)
    try:
        return conn.execute("SELECT version FROM schema_version").fetchone()[0]
    finally:
        conn.close()


def create(path: Path, config: dict, platform: str = "local", minimizes: bool = False) -> ExperimentStore:
    return ExperimentStore.create(path, ExperimentProfile(
        id="abcd1234", name="t", config=config, status=ExperimentState.INITIALIZED, error=None,
        start_time=time.time(), end_time=None, port=8080, log_dir=str(path.parent), platform=platform,
        minimizes=minimizes))


def add_trial(store: ExperimentStore, trial_id: str, sequence_id: int, source: str) -> None:
    store.add_trial(TrialRecord(trial_id=trial_id, sequence_id=sequence_id, parameters={"x": sequence_id},
                                status=TrialState.WAITING, submit_time=time.time(), parameter_source=source))


def test_the_profile_reads_the_platform_and_direction_stored_not_the_configs(tmp_path: Path):
    # The config says local and maximize (its default): what was stored wins.
    store = create(tmp_path / "experiment.sqlite", {"trialConcurrency": 1}, platform="ray", minimizes=True)
    store.close()
    with ExperimentStore.open(tmp_path / "experiment.sqlite", readonly=True) as reopened:
        profile = reopened.profile()
    assert (profile.platform, profile.minimizes) == ("ray", True)


def test_each_trial_keeps_the_parameter_source_it_was_created_with(tmp_path: Path):
    store = create(tmp_path / "experiment.sqlite", {"trialConcurrency": 1})
    add_trial(store, "tuned", 0, "algorithm")
    add_trial(store, "strategy", 1, "customized")
    assert {t.trial_id: t.parameter_source for t in store.trials()} == {"tuned": "algorithm",
                                                                         "strategy": "customized"}
    changed = store.changes(None).trials
    assert {t.trial_id: t.parameter_source for t in changed} == {"tuned": "algorithm", "strategy": "customized"}
    store.close()


def test_a_schema_5_store_reads_its_facts_from_its_config_and_is_migrated_with_them(tmp_path: Path):
    path = tmp_path / "experiment.sqlite"
    store = create(path, RAY_MINIMIZING, platform="ray", minimizes=True)
    add_trial(store, "t1", 0, "customized")
    store.close()
    as_version_5(path)

    with ExperimentStore.open(path, readonly=True) as old:
        assert (old.profile().platform, old.profile().minimizes) == ("ray", True)
        assert [t.parameter_source for t in old.trials()] == ["algorithm"], "what version 5 showed"
    assert version_of(path) == 5, "read-only opening changes nothing"

    with ExperimentStore.open(path) as migrated:
        assert (migrated.profile().platform, migrated.profile().minimizes) == ("ray", True)
        assert [t.parameter_source for t in migrated.trials()] == ["algorithm"]
    assert version_of(path) == SCHEMA_VERSION
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT platform, minimizes FROM experiment").fetchone() == ("ray", 1)
    finally:
        conn.close()


def test_the_registry_keeps_each_experiments_platform_and_an_older_registry_gains_the_column(tmp_path: Path):
    path = tmp_path / "registry.sqlite"
    conn = sqlite3.connect(path)   # the registry as expmgr wrote it before it kept the platform
    conn.executescript("CREATE TABLE experiments (id TEXT PRIMARY KEY, name TEXT, dir TEXT NOT NULL, port INTEGER, "
                       "pid INTEGER, status TEXT NOT NULL, start_time REAL NOT NULL, end_time REAL);"
                       "INSERT INTO experiments VALUES ('old00001', 'old', '/x/old00001', NULL, NULL, 'DONE', 1.0, 2.0);")
    conn.close()
    registry = Registry(tmp_path)
    registry.add(RegistryEntry(id="new00001", name="new", dir="/x/new00001", port=None, pid=None,
                               status=ExperimentState.RUNNING, start_time=3.0, platform="ray"))
    assert {entry.id: entry.platform for entry in registry.entries()} == {"old00001": None, "new00001": "ray"}
