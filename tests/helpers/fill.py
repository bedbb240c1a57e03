"""Large stores, fast: an experiment with thousands of finished trials written in one
transaction, as the runner would have written them one by one (trial, attempt, events,
metrics). For scale tests and benchmarks::

    exp_id = fill_experiment(home, trials=10_000, metrics_per_trial=20)   # then Experiment.view(exp_id)
    exp_id = experiment_on_hosts(home, [["node-a"], ["node-b", "node-c"]])   # trials' attempts on hosts
    exp_id, start = experiment_with_runs(home, [(0, 10), (70, 90)])   # a manager away from 10 s to 70 s
"""
from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any, Callable

from expmgr.config import ExperimentConfig
from expmgr.layout import ExperimentPaths
from expmgr.store.registry import Registry, RegistryEntry
from expmgr.store import ExperimentProfile, ExperimentStore, MetricRecord, TrialRecord, metric_number
from expmgr.states import ExperimentState, TrialState

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
        conn.execute("INSERT INTO trials (trial_id, sequence_id, parameters_json, status, submit_time, "
                     "start_time, end_time, attempts) VALUES (?,?,?,?,?,?,?,?)",
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
    return _finished_experiment(home, exp_id, trials, trials,
                                lambda store, start: fill_store(store, trials, metrics_per_trial, seed=seed,
                                                                start=start))


def experiment_on_hosts(home: Path, hosts: list[list[str | None]], *, exp_id: str = "host0000") -> str:
    """A finished (DONE) experiment in ``home`` and its registry, written through the store's
    API as the runner writes it: trial ``i`` (id ``h<i>``, parameter ``lr``) ran one attempt on
    each host of ``hosts[i]`` in turn (None: a service that named none), each but the last
    FAILED, the last SUCCEEDED with the final result ``i / 10``."""
    def fill(store: ExperimentStore, start: float) -> None:
        for sequence_id, trial_hosts in enumerate(hosts):
            trial_id, began = f"h{sequence_id}", start + 10 * sequence_id
            store.add_trial(TrialRecord(trial_id, sequence_id, {"lr": 0.01 * (sequence_id + 1)},
                                        TrialState.WAITING, began))
            for attempt, host in enumerate(trial_hosts, start=1):
                last = attempt == len(trial_hosts)
                store.start_attempt(trial_id, attempt, began + attempt, pid=None, host=host)
                if last:
                    store.add_metric(MetricRecord(trial_id, attempt, 0, "FINAL", sequence_id / 10,
                                                  time=began + attempt + 0.5))
                store.end_attempt(trial_id, attempt, TrialState.SUCCEEDED if last else TrialState.FAILED,
                                  began + attempt + 0.9, 0 if last else 1, None,
                                  trial_status=None if last else TrialState.WAITING)
    return _finished_experiment(home, exp_id, len(hosts), 10 * len(hosts), fill)


def experiment_with_attempts(home: Path, attempts: list[tuple[float, float]], *, exp_id: str = "att00000") -> str:
    """A finished (DONE) experiment in ``home`` and its registry, written through the store's
    API: one trial ``a0`` whose attempts ran from and to the given seconds after its start
    (each but the last FAILED, the last SUCCEEDED with the final result 1)."""
    def fill(store: ExperimentStore, start: float) -> None:
        store.add_trial(TrialRecord("a0", 0, {"lr": 0.01}, TrialState.WAITING, start))
        for attempt, (began, ended) in enumerate(attempts, start=1):
            last = attempt == len(attempts)
            store.start_attempt("a0", attempt, start + began, pid=None)
            if last:
                store.add_metric(MetricRecord("a0", attempt, 0, "FINAL", 1, time=start + ended))
            store.end_attempt("a0", attempt, TrialState.SUCCEEDED if last else TrialState.FAILED, start + ended,
                              0 if last else 1, None, trial_status=None if last else TrialState.WAITING)
    return _finished_experiment(home, exp_id, 1, max(ended for _, ended in attempts), fill)


def experiment_with_runs(home: Path, runs: list[tuple[float, float | None]], *,
                         exp_id: str = "run00000", same_manager: frozenset[int] = frozenset()) -> tuple[str, float]:
    """A finished (DONE) experiment in ``home`` and its registry, written through the store's
    API, whose managers ran from and to the given seconds after its start (the first start,
    then each resume; an end None: a run whose manager died and no resume ended), with one
    trial ``a0`` that SUCCEEDED in the first run; its id and its start (epoch seconds). The runs
    whose index is in ``same_manager`` were begun by the manager of the run before (more trials)."""
    started: list[float] = []

    def fill(store: ExperimentStore, start: float) -> None:
        started.append(start)
        for index, (began, ended) in enumerate(runs):
            run_id = store.begin_run(start + began, same_manager=index in same_manager)
            if ended is not None:
                store.end_run(run_id, start + ended)
        first = runs[0][0]
        store.add_trial(TrialRecord("a0", 0, {"lr": 0.01}, TrialState.WAITING, start + first))
        store.start_attempt("a0", 1, start + first, pid=None)
        store.add_metric(MetricRecord("a0", 1, 0, "FINAL", 1, time=start + first + 0.5))
        store.end_attempt("a0", 1, TrialState.SUCCEEDED, start + first + 0.9, 0, None)
    last = max(max(began, ended or began) for began, ended in runs)
    return _finished_experiment(home, exp_id, 1, last, fill), started[0]


def experiment_of_results(home: Path, search_space: dict[str, Any], results: list[tuple[dict[str, Any], Any]],
                          *, tuner: dict[str, Any] | None = None, exp_id: str = "res00000") -> str:
    """A finished (DONE) experiment in ``home`` and its registry, written through the store's
    API: trial ``i`` (id ``r<i>``) ran with ``results[i][0]`` as its parameters and SUCCEEDED
    with the final result ``results[i][1]`` (a number or a dict)."""
    def fill(store: ExperimentStore, start: float) -> None:
        for sequence_id, (parameters, final) in enumerate(results):
            trial_id, began = f"r{sequence_id}", start + sequence_id
            store.add_trial(TrialRecord(trial_id, sequence_id, parameters, TrialState.WAITING, began))
            store.start_attempt(trial_id, 1, began + 0.1, pid=None, host=None)
            store.add_metric(MetricRecord(trial_id, 1, 0, "FINAL", final, time=began + 0.5))
            store.end_attempt(trial_id, 1, TrialState.SUCCEEDED, began + 0.9, 0, None)
    return _finished_experiment(home, exp_id, len(results), len(results), fill, search_space=search_space,
                                tuner=tuner)


def _finished_experiment(home: Path, exp_id: str, trials: int, seconds: float,
                         fill: Callable[[ExperimentStore, float], None], *,
                         search_space: dict[str, Any] | None = None, tuner: dict[str, Any] | None = None) -> str:
    """A DONE experiment ``exp_id`` of ``trials`` trials in ``home`` and its registry, which ran
    ``seconds`` until a little while ago, its store written by ``fill(store, start)`` (the
    search space and tuner: fill's own, or those given)."""
    paths = ExperimentPaths(home / exp_id)
    paths.create()
    config = ExperimentConfig(experiment_name=f"{trials} trials", search_space=search_space or SEARCH_SPACE,
                              trial_command="python3 trial.py", trial_code_directory=home,
                              trial_concurrency=8, max_trial_number=trials, tuner=tuner or {"name": "Random"},
                              experiment_working_directory=home).canonical()
    paths.config_file.write_text(config.to_yaml(), encoding="utf-8")
    start = time.time() - seconds - 10
    store = ExperimentStore.create(paths.database, ExperimentProfile(
        id=exp_id, name=config.experiment_name, config=config.to_dict(), status=ExperimentState.DONE,
        error=None, start_time=start, end_time=start + seconds + 5, port=None, log_dir=str(paths.root),
        platform=config.training_service.platform, minimizes=config.minimizes))
    try:
        fill(store, start)
    finally:
        store.close()
    Registry(home).add(RegistryEntry(id=exp_id, name=config.experiment_name, dir=str(paths.root), port=None,
                                     pid=None, status=ExperimentState.DONE, start_time=start,
                                     end_time=start + seconds + 5))
    return exp_id
