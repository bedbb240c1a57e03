"""What an experiment keeps: its store (trials, attempts, metrics, events) and the registry of experiments.

The trial runner writes the store and the server and the Experiment API read it;
``sqlite.py`` is today's implementation (one SQLite database per experiment).
``registry.py`` lists a home's experiments and their processes.

May import: ``expmgr.config``, ``expmgr.algorithms`` and the bottom modules (layout,
log, states, trial); today it needs only layout and states. Nothing from training,
dispatcher, engine, server, experiment or cli.
"""
from __future__ import annotations

from expmgr.store.sqlite import (SCHEMA_VERSION, AttemptRecord, Changes, ExperimentProfile, ExperimentStore,
                                 MetricRecord, StoreError, StoreUnreadable, TrialRecord, metric_number,
                                 unreadable_store)

__all__ = ["SCHEMA_VERSION", "AttemptRecord", "Changes", "ExperimentProfile", "ExperimentStore", "MetricRecord",
           "StoreError", "StoreUnreadable", "TrialRecord", "metric_number", "unreadable_store"]
