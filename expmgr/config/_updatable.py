"""The config fields that may change while an experiment runs: the one table the runner,
the REST server (NNI's ``PUT experiment?update_type=...``), ``expctl update``, the
``Experiment`` API and, through the server's experiment view, the web UI all read."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UpdatableField:
    """One field that may change while running, by each of its names."""

    field: str
    """The config field, camelCase (``trialConcurrency``): the key of the REST body's ``params``."""
    update_type: str
    """NNI's ``update_type`` query argument (``TRIAL_CONCURRENCY``)."""
    attribute: str
    """The ``ExperimentConfig`` attribute and ``ResolvedConfig`` field (``trial_concurrency``)."""
    cli_word: str
    """``expctl update <id> <word> <value>`` (``concurrency``)."""


UPDATABLE_FIELDS: tuple[UpdatableField, ...] = (
    UpdatableField("trialConcurrency", "TRIAL_CONCURRENCY", "trial_concurrency", "concurrency"),
    UpdatableField("maxTrialNumber", "MAX_TRIAL_NUM", "max_trial_number", "trialnum"),
    UpdatableField("maxExperimentDuration", "MAX_EXEC_DURATION", "max_experiment_duration", "duration"),
    UpdatableField("searchSpace", "SEARCH_SPACE", "search_space", "searchspace"),
)

