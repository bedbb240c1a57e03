"""What an experiment keeps: its store (trials, attempts, metrics, events) and the registry of experiments.

The trial runner writes the store and the server and the Experiment API read it.
``open_store(paths)`` and ``create_store(paths, profile)`` are the one way to get one;
``records.py`` has what it holds and answers, ``sqlite.py`` today's implementation (one
SQLite database per experiment): another backend is one module and a line here.
``registry.py`` lists a home's experiments and their processes::

    with open_store(paths, readonly=True) as store:   # closed after the block
        profile = store.profile()

May import: ``expmgr.config``, ``expmgr.algorithms`` and the bottom modules (layout,
log, states, metrics, trial); today it needs layout, states and metrics. Nothing from training,
dispatcher, engine, server, experiment or cli.
"""
from __future__ import annotations

from expmgr.layout import ExperimentPaths
from expmgr.store.records import (AttemptRecord, Changes, ExperimentProfile, MetricRecord, StoreError, StoreUnreadable,
                                  TrialRecord)
from expmgr.store.sqlite import SCHEMA_VERSION, ExperimentStore, metric_number, unreadable_store

__all__ = ["SCHEMA_VERSION", "AttemptRecord", "Changes", "ExperimentProfile", "ExperimentStore", "MetricRecord",
           "StoreError", "StoreUnreadable", "TrialRecord", "create_store", "metric_number", "open_store",
           "unreadable_store"]


def open_store(paths: ExperimentPaths, readonly: bool = False) -> ExperimentStore:
    """The store of the experiment at ``paths``, open; StoreError if there is none or it
    cannot be read. Use it as a context manager (``with open_store(paths) as store:``) to
    close it after the block, or call ``close()`` on a store kept open longer."""
    return ExperimentStore.open(paths.database, readonly=readonly)


def create_store(paths: ExperimentPaths, profile: ExperimentProfile) -> ExperimentStore:
    """A new, empty store for the experiment at ``paths``, holding ``profile``."""
    return ExperimentStore.create(paths.database, profile)
