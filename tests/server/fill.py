"""Large stores, fast: an experiment with thousands of finished trials written in one
transaction, as the runner would have written them one by one (trial, attempt, events,
metrics). For scale tests and benchmarks::

    exp_id = fill_experiment(home, trials=10_000, metrics_per_trial=20)   # then Experiment.view(exp_id)
"""
from __future__ import annotations

import json
import random
import time
from pathlib import Path

from expmgr.config import ExperimentConfig
from expmgr.layout import ExperimentPaths
from expmgr.store.registry import Registry, RegistryEntry
from expmgr.store import ExperimentProfile, ExperimentStore, metric_number
from expmgr.states import ExperimentState

SEARCH_SPACE = {"lr": {"_type": "loguniform", "_value": [1e-5, 1e-1]},
                "units": {"_type": "choice", "_value": [16, 32, 64, 128]},
                "optimizer": {"_type": "choice", "_value": ["sgd", "adam"]}}


def fill_store(store: ExperimentStore, trials: int, metrics_per_trial: int, *, seed: int = 0,
               start: float | None = None) -> None:
    """Add ``trials`` SUCCEEDED trials, each with ``metrics_per_trial`` PERIODICAL metrics
    and a FINAL one, after the store's existing trials."""
    rng = random.Random(seed)
    conn = store._conn  # one transaction for all: the store's methods commit each row
    first = store.next_sequence_id()
    now = start if start is not None else time.time() - trials
    conn.execute("BEGIN IMMEDIATE")
    for sequence_id in range(first, first + trials):
        trial_id = f"f{sequence_id:04d}"
        began, ended = now + sequence_id, now + sequence_id + 0.9
        parameters = {"lr": 10 ** rng.uniform(-5, -1), "units": rng.choice([16, 32, 64, 128]),
                      "optimizer": rng.choice(["sgd", "adam"])}
        conn.execute("INSERT INTO trials VALUES (?,?,?,?,?,?,?,?)",
                     (trial_id, sequence_id, json.dumps(parameters), "SUCCEEDED", began, began, ended, 1))
        conn.execute("INSERT INTO attempts (trial_id, attempt, status, start_time, end_time, exit_code) "
                     "VALUES (?,1,'SUCCEEDED',?,?,0)", (trial_id, began, ended))
        conn.executemany("INSERT INTO events (time, trial_id, kind, detail_json) VALUES (?,?,'trial_status',?)",
                         [(began, trial_id, json.dumps({"status": status}))
                          for status in ("WAITING", "RUNNING", "SUCCEEDED")])
        ceiling = rng.uniform(0.5, 0.99)
        values: list[object] = [ceiling * (1 - 0.8 ** (step + 1)) for step in range(metrics_per_trial)]
        values.append({"default": values[-1] if values else ceiling, "loss": rng.random()})
        conn.executemany(
            "INSERT INTO metrics (trial_id, attempt, sequence, type, value_json, time, value) VALUES (?,1,?,?,?,?,?)",
            [(trial_id, step, "PERIODICAL" if step < metrics_per_trial else "FINAL", json.dumps(value),
              began + 0.8 * (step + 1) / (metrics_per_trial + 1), metric_number(value))
             for step, value in enumerate(values)])
    conn.execute("COMMIT")


def fill_experiment(home: Path, trials: int, metrics_per_trial: int, *, exp_id: str = "fill0000",
                    seed: int = 0) -> str:
    """A finished (DONE) experiment in ``home`` and its registry, filled by ``fill_store``;
    ``Experiment.view(exp_id, home=home)`` and ``expctl view`` serve it."""
    paths = ExperimentPaths(home / exp_id)
    paths.create()
    config = ExperimentConfig(experiment_name=f"{trials} trials", search_space=SEARCH_SPACE,
                              trial_command="python3 trial.py", trial_code_directory=home,
                              trial_concurrency=8, max_trial_number=trials, tuner={"name": "Random"},
                              experiment_working_directory=home).canonical()
    paths.config_file.write_text(config.to_yaml(), encoding="utf-8")
    start = time.time() - trials - 10
    store = ExperimentStore.create(paths.database, ExperimentProfile(
        id=exp_id, name=config.experiment_name, config=config.to_dict(), status=ExperimentState.DONE,
        error=None, start_time=start, end_time=start + trials + 5, port=None, log_dir=str(paths.root)))
    try:
        fill_store(store, trials, metrics_per_trial, seed=seed, start=start)
    finally:
        store.close()
    Registry(home).add(RegistryEntry(id=exp_id, name=config.experiment_name, dir=str(paths.root), port=None,
                                     pid=None, status=ExperimentState.DONE, start_time=start,
                                     end_time=start + trials + 5))
    return exp_id
