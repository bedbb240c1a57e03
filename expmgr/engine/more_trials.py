"""More trials for a finished experiment: raising ``maxTrialNumber`` or
``maxExperimentDuration`` of an experiment that ended DONE, while its server still
answers, sends it back to RUNNING (NNI's manager does so). This decides whether a raise
may do that and gives the config to run with; the manager then starts a new runner as a
resume does (the tuner is given every stored result)::

    config = config_for_more_trials(exp_id, config, store, "maxTrialNumber", 50)   # UpdateRefused
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from expmgr.config import BUDGET_FIELDS, ConfigError
from expmgr.engine.errors import RefusalKind, UpdateRefused
from expmgr.states import ExperimentState
from expmgr.store import Store

if TYPE_CHECKING:
    from expmgr.config import ResolvedConfig

_BUDGET = {entry.field for entry in BUDGET_FIELDS}


def refuse_ended(exp_id: str, state: ExperimentState | None) -> UpdateRefused:
    """Why an experiment that ended otherwise than DONE takes no change (its server answers
    only after ERROR; a stopped one closed its server)."""
    shown = state.value if state is not None else "ended"
    how = ("it failed (its error says why); stop its server and resume it to go on: "
           f"expctl stop {exp_id}; expctl resume {exp_id}") if state == ExperimentState.ERROR else \
          f"resume it to go on: expctl resume {exp_id}"
    return UpdateRefused(RefusalKind.CONFLICT, f"experiment {exp_id} is {shown}: only a DONE experiment can be "
                                               f"given more trials here; {how}")


def config_for_more_trials(exp_id: str, config: "ResolvedConfig", store: Store, field: str,
                           value: Any) -> "ResolvedConfig":
    """The config with ``field`` raised to ``value``, for experiment ``exp_id`` that ended DONE
    (``store`` is its store). Refused (UpdateRefused): INVALID for another field, a value the
    config rules refuse, or one not above what the experiment used already; CONFLICT when it
    could still not run a trial (its other limit is used up, it has no tuner)."""
    if field not in _BUDGET:
        raise UpdateRefused(RefusalKind.INVALID,
                            f"{field}: cannot be changed: experiment {exp_id} is DONE; raise "
                            f"{' or '.join(sorted(_BUDGET))} to run more trials")
    try:
        updated = config.with_update(field, value)
    except ConfigError as error:
        raise UpdateRefused(RefusalKind.INVALID, str(error)) from None
    trials = store.next_sequence_id()
    seconds = store.seconds_run()
    limit, duration = updated.max_trial_number, updated.max_experiment_duration
    if field == "maxTrialNumber" and limit is not None and limit <= trials:
        raise UpdateRefused(RefusalKind.INVALID,
                            f"maxTrialNumber: {limit} is not above the {trials} trials experiment {exp_id} "
                            f"ran already; give more than {trials} to run more trials")
    if field == "maxExperimentDuration" and duration is not None and duration <= seconds:
        raise UpdateRefused(RefusalKind.INVALID,
                            f"maxExperimentDuration: {duration:g}s is not above the {seconds:.0f}s experiment "
                            f"{exp_id} ran already; give more to run more trials")
    if limit is not None and limit <= trials:
        raise UpdateRefused(RefusalKind.CONFLICT,
                            f"maxTrialNumber ({limit}) is used up too ({trials} trials ran): raise it as well "
                            f"to run more trials")
    if duration is not None and duration <= seconds:
        raise UpdateRefused(RefusalKind.CONFLICT,
                            f"maxExperimentDuration ({duration:g}s) is used up too ({seconds:.0f}s ran): raise it "
                            f"as well to run more trials")
    if updated.tuner is None:
        raise UpdateRefused(RefusalKind.CONFLICT, f"experiment {exp_id} has no tuner to propose more trials "
                                                  "(its trials came from its strategy)")
    return updated
