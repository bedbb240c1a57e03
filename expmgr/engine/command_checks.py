"""The checks of users' commands to a running experiment (an update, a kill, an import, a
trial submitted by a strategy or added by a user): pure functions of what the runner knows,
each raising the refusal (``UpdateRefused``, ``SubmissionRefused``) that names what is
wrong, or giving what the command makes (the new resolved config). The runner acts on
what passes::

    config = updated_config(config, "trialConcurrency", 4, exp_id=exp_id, state=state, stopping=False)
    refuse_new_trial(exp_id, state, stopping=False, trials=3, max_trial_number=10)
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from expmgr.config import UPDATABLE_FIELDS as UPDATABLE_TABLE, ConfigError, check_parameters
from expmgr.engine.dispatching import DispatcherError
from expmgr.engine.errors import RefusalKind, SubmissionRefused, UpdateRefused
from expmgr.states import ExperimentState
from expmgr.store import TrialRecord

if TYPE_CHECKING:
    from expmgr.config import ResolvedConfig

UPDATABLE_FIELDS = {entry.field: entry.attribute for entry in UPDATABLE_TABLE}
"""Config fields that may change while the experiment runs (camelCase -> attribute)."""


def _ending(state: ExperimentState, stopping: bool) -> bool:
    """The experiment takes no change: a stop was asked for, it stops or it ended."""
    return stopping or state.is_finished() or state == ExperimentState.STOPPING


def refuse_unless_running(exp_id: str, state: ExperimentState, *, stopping: bool) -> None:
    """UpdateRefused (CONFLICT) once the experiment ends (``stopping``: a stop was asked for)."""
    if _ending(state, stopping):
        raise UpdateRefused(RefusalKind.CONFLICT, f"experiment {exp_id} is {state.value}; it cannot be changed")


def updated_config(config: "ResolvedConfig", field: str, value: Any, *, exp_id: str, state: ExperimentState,
                   stopping: bool) -> "ResolvedConfig":
    """``config`` with ``field`` (camelCase) set to ``value``, validated as in a config file;
    UpdateRefused: INVALID for a field that cannot change while running or a bad value,
    CONFLICT once the experiment ends."""
    if field not in UPDATABLE_FIELDS:
        raise UpdateRefused(RefusalKind.INVALID, f"{field}: cannot be changed while running; "
                                                 f"one of {', '.join(UPDATABLE_FIELDS)} can")
    refuse_unless_running(exp_id, state, stopping=stopping)
    try:
        return config.with_update(field, value)
    except ConfigError as error:
        raise UpdateRefused(RefusalKind.INVALID, str(error)) from None


def space_refused(error: DispatcherError) -> UpdateRefused:
    """Why a new search space the tuner did not take is refused: INVALID when the tuner refused
    it (it keeps the old one), CONFLICT when the tuner failed on it (``fatal``: it ended, and
    the experiment with it)."""
    if error.fatal:
        return UpdateRefused(RefusalKind.CONFLICT, f"searchSpace: the tuner failed on it: {error}")
    return UpdateRefused(RefusalKind.INVALID, f"searchSpace: {error}; the tuner keeps the old search space")


def refuse_import(exp_id: str, state: ExperimentState, *, stopping: bool, has_tuner: bool) -> None:
    """UpdateRefused (CONFLICT) when results cannot be imported: the experiment ends, or it
    has no tuner to take them."""
    refuse_unless_running(exp_id, state, stopping=stopping)
    if not has_tuner:
        raise UpdateRefused(RefusalKind.CONFLICT, f"experiment {exp_id} has no tuner to import results into")


def refuse_kill(exp_id: str, state: ExperimentState, trial_id: str, *, stopping: bool, running: bool,
                lookup: Callable[[str], TrialRecord | None]) -> None:
    """UpdateRefused when trial ``trial_id`` cannot be killed: the experiment ends (CONFLICT),
    or the trial is not ``running``: it is not known (``lookup``, the store's, asked only
    then: NOT_FOUND) or it ended or waits (CONFLICT)."""
    refuse_unless_running(exp_id, state, stopping=stopping)
    if running:
        return
    known = lookup(trial_id)
    if known is None:
        raise UpdateRefused(RefusalKind.NOT_FOUND, f"no trial {trial_id!r}")
    raise UpdateRefused(RefusalKind.CONFLICT, f"trial {trial_id} is not running ({known.status.value})")


def refuse_new_trial(exp_id: str, state: ExperimentState, *, stopping: bool, trials: int | None = None,
                     max_trial_number: int | None = None) -> None:
    """SubmissionRefused (CONFLICT) when the experiment takes no new trial: it is ending, or
    ``trials`` (the number submitted, when given) reached ``max_trial_number``."""
    if _ending(state, stopping):
        raise SubmissionRefused(RefusalKind.CONFLICT, f"experiment {exp_id} is {state.value}; it takes no new trials")
    if trials is not None and max_trial_number is not None and trials >= max_trial_number:
        raise SubmissionRefused(RefusalKind.CONFLICT,
                                f"maxTrialNumber ({max_trial_number}) trials were submitted already; "
                                "raise maxTrialNumber to add one")


def check_submitted_parameters(parameters: Any) -> None:
    """SubmissionRefused (INVALID) unless a strategy's ``parameters`` are a JSON-serialisable dict."""
    if not isinstance(parameters, dict):
        raise SubmissionRefused(RefusalKind.INVALID, f"parameters: expected a dict, got {type(parameters).__name__}")
    try:
        json.dumps(parameters)
    except (TypeError, ValueError) as error:
        raise SubmissionRefused(RefusalKind.INVALID, f"parameters: not JSON-serialisable ({error})") from None


def check_customized_parameters(parameters: Any, search_space: dict[str, Any] | None) -> None:
    """SubmissionRefused (INVALID) naming the parameter the search space refuses (a user's
    customized trial must lie in the space; without one anything goes)."""
    if search_space is not None:
        try:
            check_parameters(parameters, search_space)
        except ConfigError as error:
            raise SubmissionRefused(RefusalKind.INVALID, str(error)) from None
