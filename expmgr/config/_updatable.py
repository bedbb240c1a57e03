"""The config fields that may change while an experiment runs: the one table the runner,
the REST server (NNI's ``PUT experiment?update_type=...``), ``expctl update``, the
``Experiment`` API and, through the server's experiment view, the web UI all read.

Two of them are the experiment's budget: raised after the experiment ended DONE (its
server still answering), they send it back to RUNNING to run more trials, as NNI's
manager does (``updatable_now`` says which fields a server takes in each case)."""
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
    budget: bool = False
    """A limit of the search (maxTrialNumber, maxExperimentDuration): raising it after the
    experiment ended DONE, while its server still answers, runs it again for more trials."""


UPDATABLE_FIELDS: tuple[UpdatableField, ...] = (
    UpdatableField("trialConcurrency", "TRIAL_CONCURRENCY", "trial_concurrency", "concurrency"),
    UpdatableField("maxTrialNumber", "MAX_TRIAL_NUM", "max_trial_number", "trialnum", budget=True),
    UpdatableField("maxExperimentDuration", "MAX_EXEC_DURATION", "max_experiment_duration", "duration",
                   budget=True),
    UpdatableField("searchSpace", "SEARCH_SPACE", "search_space", "searchspace"),
)

BUDGET_FIELDS: tuple[UpdatableField, ...] = tuple(entry for entry in UPDATABLE_FIELDS if entry.budget)
"""The fields that, raised, give a DONE experiment more trials."""


def updatable_now(*, running: bool, more_trials: bool) -> tuple[UpdatableField, ...]:
    """The fields a server takes a change of now: every one while the search runs; the
    budget fields once it ended DONE and its manager still serves it (``more_trials``);
    none otherwise (ERROR, STOPPED, or ``expctl view``)."""
    if running:
        return UPDATABLE_FIELDS
    return BUDGET_FIELDS if more_trials else ()
