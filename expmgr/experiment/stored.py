"""The experiments of a home as the Experiment API finds them: a new one's id, and a stored
one's registry entry and config (to resume, view or connect to it)::

    entry, config = stored_experiment("k3x9a1b2", home=None)   # the default home
"""
from __future__ import annotations

import secrets
import string
from pathlib import Path

from expmgr.config import ExperimentConfig
from expmgr.experiment.errors import ExperimentError
from expmgr.layout import ExperimentPaths, default_home
from expmgr.store import StoreError, open_store
from expmgr.store.registry import Registry, RegistryEntry

_ID_ALPHABET = string.ascii_lowercase + string.digits


def new_experiment_id() -> str:
    """A fresh experiment id: 8 characters of [a-z0-9]."""
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(8))


def stored_experiment(exp_id: str, home: Path | None) -> tuple[RegistryEntry, ExperimentConfig]:
    """The registry entry and stored config of experiment ``exp_id``; ExperimentError if unknown."""
    registry = Registry(home or default_home())
    entry = registry.get(exp_id)
    if entry is None:
        raise ExperimentError(f"no experiment {exp_id!r} in {registry.path}")
    paths = ExperimentPaths(Path(entry.dir))
    try:
        with open_store(paths, readonly=True) as store:   # damaged beyond its first page: at profile()
            return entry, ExperimentConfig.from_dict(store.profile().config)
    except StoreError as error:
        raise ExperimentError(f"cannot open experiment {exp_id}: {error}") from None
