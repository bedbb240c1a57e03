"""What an experiment keeps: its store (trials, attempts, metrics, events) and the registry of experiments.

The trial runner writes the store and the server and the Experiment API read it.
``open_store(paths, readonly=...)`` and ``create_store(paths, profile)`` are the one way to
get one; ``base.py`` has the interface they answer (``Store`` what is read,
``WritableStore`` what the runner writes), ``records.py`` what it holds, ``sqlite.py``
today's implementation (one SQLite database per experiment): another backend is one
module and the ``BACKEND`` line here. ``errors.py`` has the errors every backend raises
(``StoreError`` and its kinds: busy, unwritable, unreadable, too new); SQLite's own stay
inside this package. ``registry.py`` lists a home's experiments and their processes::

    with open_store(paths, readonly=True) as store:   # closed after the block
        profile = store.profile()

May import: ``expmgr.config``, ``expmgr.algorithms`` and the bottom modules (layout,
log, states, metrics, trial); today it needs layout, states and metrics. Nothing from training,
dispatcher, engine, server, experiment or cli.
"""
from __future__ import annotations

from typing import Literal, overload

from expmgr.layout import ExperimentPaths
from expmgr.store.base import Store, StoreBackend, WritableStore
from expmgr.store.errors import (StoreBusy, StoreError, StoreTooNew, StoreUnavailable, StoreUnreadable,
                                 StoreUnwritable)
from expmgr.store.records import AttemptRecord, Changes, ExperimentProfile, MetricRecord, TrialRecord
from expmgr.store.sqlite import ExperimentStore, SqliteBackend, metric_number
from expmgr.store.sqlite_schema import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "AttemptRecord", "BACKEND", "Changes", "ExperimentProfile", "ExperimentStore",
           "MetricRecord", "Store", "StoreBackend", "StoreBusy", "StoreError", "StoreTooNew", "StoreUnavailable",
           "StoreUnreadable", "StoreUnwritable", "TrialRecord", "WritableStore", "create_store", "metric_number",
           "open_store"]

BACKEND: StoreBackend = SqliteBackend()
"""What keeps experiments' stores: the one line to change for another backend."""


@overload
def open_store(paths: ExperimentPaths, readonly: Literal[False] = False) -> WritableStore: ...


@overload
def open_store(paths: ExperimentPaths, readonly: bool) -> Store: ...


def open_store(paths: ExperimentPaths, readonly: bool = False) -> Store:
    """The store of the experiment at ``paths``, open; StoreError if there is none or it
    cannot be read. Use it as a context manager (``with open_store(paths) as store:``) to
    close it after the block, or call ``close()`` on a store kept open longer."""
    return BACKEND.open(paths, readonly)


def create_store(paths: ExperimentPaths, profile: ExperimentProfile) -> WritableStore:
    """A new, empty store for the experiment at ``paths``, holding ``profile``."""
    return BACKEND.create(paths, profile)
