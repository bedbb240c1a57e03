"""expctl with an empty id, and with a damaged database or registry: a clear message
naming the argument or the file, a non-zero exit, nothing deleted, no traceback.
Real expctl processes on finished experiments written as the runner writes them."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from expmgr.layout import ExperimentPaths
from expmgr.store.registry import Registry
from tests.helpers.common import REPO
from tests.helpers.fill import fill_experiment


def expctl(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "EXPMGR_HOME": str(home), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "expmgr.cli", *args], cwd=home.parent, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def finished(tmp_path: Path) -> tuple[Path, str]:
    """A home holding one finished experiment of 3 trials: its home and id."""
    home = tmp_path / "home"
    return home, fill_experiment(home, trials=3, metrics_per_trial=2, exp_id="done0001")


def _commands_taking_an_id(bad: str, exp_id: str, results: Path) -> list[tuple[str, tuple[str, ...]]]:
    """Every command that names an experiment (ID) or a trial (TRIAL), with ``bad`` as that name."""
    experiment_commands = [("experiment", "delete", bad, "--yes"), ("stop", bad), ("resume", bad, "--port", "0"),
                           ("view", bad, "--port", "0"), ("experiment", "show", bad), ("experiment", "status", bad),
                           ("experiment", "export", bad), ("experiment", "import", bad, str(results)),
                           ("trial", "ls", bad), ("trial", "kill", bad, "f0001"), ("log", "experiment", bad),
                           ("log", "stdout", bad, "f0001"), ("update", bad, "concurrency", "2"),
                           ("top", bad, "--once"), ("webui", "url", bad)]
    trial_commands = [("trial", "kill", exp_id, bad), ("log", "stdout", exp_id, bad)]
    return [("ID", command) for command in experiment_commands] + [("TRIAL", command) for command in trial_commands]


@pytest.mark.parametrize("bad", ["", "  "], ids=["empty", "blank"])
def test_an_empty_or_blank_id_is_refused_by_every_command_and_deletes_nothing(finished, bad: str):
    home, exp_id = finished
    results = home.parent / "results.json"
    results.write_text("[]")
    for argument, command in _commands_taking_an_id(bad, exp_id, results):
        result = expctl(home, *command)
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert f"{argument}: expected an id or a unique prefix of one, got {bad!r}" in result.stderr, (
            command, result.stderr)
        assert "Traceback" not in result.stderr
    assert [entry.id for entry in Registry(home).entries()] == [exp_id]
    assert ExperimentPaths(home / exp_id).database.is_file()


def test_stop_with_an_empty_id_is_not_taken_for_no_id(finished):
    home, _ = finished
    result = expctl(home, "stop", "", "--all")
    assert result.returncode == 2 and "give one of an experiment id, --all or --port" in result.stderr


def _damage(path: Path, how: str) -> None:
    if how == "garbage":
        path.write_bytes(os.urandom(1000) * 20)
    elif how == "empty":
        path.write_bytes(b"")
    else:  # truncated: the first pages (header and schema) stay, the tables' pages are gone
        data = path.read_bytes()
        path.write_bytes(data[:2 * 4096])
    for suffix in ("-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)


@pytest.mark.parametrize("how", ["garbage", "empty", "truncated"])
def test_a_damaged_experiment_database_is_one_clear_message_naming_the_file(tmp_path: Path, how: str):
    home = tmp_path / "home"
    good = fill_experiment(home, trials=3, metrics_per_trial=2, exp_id="good0001")
    bad = fill_experiment(home, trials=400, metrics_per_trial=20, exp_id="bad00001")
    database = ExperimentPaths(home / bad).database
    _damage(database, how)
    for command in (("experiment", "show", bad), ("experiment", "status", bad), ("experiment", "export", bad),
                    ("trial", "ls", bad), ("log", "stdout", bad, "f0001"), ("resume", bad, "--foreground",
                                                                            "--port", "0"),
                    ("view", bad, "--port", "0")):
        result = expctl(home, *command)
        assert result.returncode == 1, (command, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr, (command, result.stderr)
        assert f"{database}: not a valid expmgr database (" in result.stderr, (command, result.stderr)
        assert "expctl experiment delete" in result.stderr
    top = expctl(home, "top", bad, "--once")
    assert top.returncode == 0 and f"{bad}: " in top.stdout and str(database) in top.stdout, top.stdout
    listed = expctl(home, "experiment", "list", "--all", "--json")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    rows = {row["id"]: row for row in json.loads(listed.stdout)}
    assert rows[good]["status"] == "DONE" and "error" not in rows[good]
    assert rows[bad]["status"] == "UNREADABLE" and str(database) in rows[bad]["error"]
    assert str(database) in listed.stderr
    assert expctl(home, "trial", "ls", good).returncode == 0, "the good experiment still reads"
    deleted = expctl(home, "experiment", "delete", bad, "--yes")
    assert deleted.returncode == 0 and not (home / bad).exists(), "a damaged experiment can be deleted"


def test_a_damaged_registry_is_one_clear_message_naming_the_file(finished):
    home, exp_id = finished
    registry = home / "registry.sqlite"
    _damage(registry, "garbage")
    (home.parent / "config.yml").write_text("searchSpace: {x: {_type: choice, _value: [1]}}\n"
                                            "trialCommand: 'true'\ntrialConcurrency: 1\nmaxTrialNumber: 1\n"
                                            "tuner: {name: Random}\n")
    for command in (("experiment", "list", "--all"), ("trial", "ls", exp_id), ("stop", "--all"),
                    ("experiment", "delete", exp_id, "--yes"), ("top", "--once"),
                    ("create", "--config", "config.yml", "--port", "0", "--foreground")):
        result = expctl(home, *command)
        assert result.returncode == 1, (command, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr, (command, result.stderr)
        assert f"{registry}: not a valid expmgr registry (file is not a database); move it aside" \
               in result.stderr, (command, result.stderr)
    assert sorted(path.name for path in home.iterdir()) == [exp_id, "registry.sqlite"], \
        "nothing deleted, no experiment created"
