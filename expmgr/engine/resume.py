"""The resume plan: what a resumed experiment's store says must happen before its runner
goes on. ``plan_resume`` reads the store once and returns a ``ResumePlan``: the run whose
manager died and when it was last known alive, the trials to run again (first the
preempted ones) with the attempt their dead manager left open, the count of ended trials
and their results for the progress line, and the history the fresh tuner is replayed.
The runner applies it (it alone writes the store and ends processes)::

    plan = plan_resume(store, dead_run=store.open_run(), now=time.time(),
                       last_output_time=service.files.last_output_time)
    for trial in plan.requeued: ...           # end trial.open_attempt CRASHED at plan.died, requeue
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from expmgr.metrics import metric_number
from expmgr.states import TrialState
from expmgr.store import AttemptRecord, Store, TrialRecord

REQUEUED_ON_RESUME = frozenset({TrialState.WAITING, TrialState.RUNNING, TrialState.USER_CANCELED,
                                TrialState.SYS_CANCELED, TrialState.PREEMPTED})
"""Trials a resume runs again: those the previous run did not let finish, whether it was
stopped or ended by a failure (a dispatcher crash cancels its trials SYS_CANCELED), but
not those the user killed one by one."""


@dataclass(frozen=True)
class RequeuedTrial:
    """A trial a resume runs again, with its parameters, as its next attempt."""

    record: TrialRecord
    open_attempt: AttemptRecord | None
    """The attempt its manager died under (no end recorded): its reports are picked up, its
    leftover process ended, and it ends CRASHED when the dead run ended. None: the trial
    only goes back to WAITING."""
    first: bool
    """PREEMPTED: run before the others."""

    @property
    def next_attempt(self) -> int:
        return self.record.attempts + 1


@dataclass
class ResumePlan:
    dead_run: int | None
    """The run whose manager died (it has no end), to be ended at ``died``; None if none."""
    died: float
    """When that manager was last known alive (now, without a dead run)."""
    trial_ids: set[str] = field(default_factory=set)
    """Every trial id the experiment has (a new trial gets another)."""
    requeued: list[RequeuedTrial] = field(default_factory=list)
    """In the order stored; a preempted one is put first in line as it is applied."""
    ended: dict[TrialState, int] = field(default_factory=dict)
    """How many trials ended how, for the progress line."""
    results: list[tuple[str, Any]] = field(default_factory=list)
    """(trial id, final value) of each ended trial that has one, for the best result so far."""
    history: list[dict[str, Any]] = field(default_factory=list)
    """Every trial's parameters and usable final value (None if none, or not a finite
    number: never NaN to a tuner), to replay to the fresh tuner."""
    kept_until: dict[str, float] = field(default_factory=dict)
    """Trials kept running after their manager went (reattachWindow): their last output, which
    is when the watchdog ended them if no resume took them over."""

    def open_attempt_ends(self, attempt: AttemptRecord) -> float:
        """When an attempt the dead manager left open ends: not before it started, and not
        before the watchdog ended it if it was kept."""
        return max(attempt.start_time, self.died, self.kept_until.get(attempt.trial_id, self.died))


def plan_resume(store: Store, *, dead_run: tuple[int, float] | None, now: float,
                last_output_time: Callable[[str], float], manager_gone_at: float | None = None) -> ResumePlan:
    """Read ``store`` and say what the resume does. ``dead_run``: the run with no end
    (``store.open_run()``, read before this run began) and its last recorded event; the
    manager is last known alive at that event or the last output of a trial it ran
    (``last_output_time``: the watchdog notes each trial's kill in its stderr as the
    manager dies), so the time no manager ran counts neither as the experiment's nor a trial's.
    ``manager_gone_at``: when the watchdog that kept the dead run's trials for a resume saw
    the manager end (their output went on): the manager is last known alive then."""
    finals = store.final_metrics()
    open_attempts = {a.trial_id: a for a in store.attempts() if a.end_time is None}
    if dead_run is None:
        plan = ResumePlan(dead_run=None, died=now)
    else:
        run_id, last_event = dead_run
        if manager_gone_at is not None:
            plan = ResumePlan(dead_run=run_id, died=min(now, max(last_event, manager_gone_at)))
        else:
            outputs = [last_output_time(trial_id) for trial_id in open_attempts]
            plan = ResumePlan(dead_run=run_id, died=min(now, max([last_event, *outputs])))
    if manager_gone_at is not None:   # kept, as after a crash or a stop that left them running
        plan.kept_until = {trial_id: min(now, last_output_time(trial_id)) for trial_id in open_attempts}
    killed = store.killed_trials()
    for record in store.trials():
        plan.trial_ids.add(record.trial_id)
        final = finals.get(record.trial_id)
        if record.status in REQUEUED_ON_RESUME and record.trial_id not in killed:
            plan.requeued.append(RequeuedTrial(record, open_attempts.get(record.trial_id),
                                               first=record.status == TrialState.PREEMPTED))
        elif record.status.is_finished():   # the progress line goes on from the earlier runs' count
            plan.ended[record.status] = plan.ended.get(record.status, 0) + 1
            if final is not None:
                plan.results.append((record.trial_id, final.value))
        usable = final is not None and metric_number(final.value) is not None
        plan.history.append({"parameter": record.parameters,
                             "value": final.value if final is not None and usable else None})
    return plan
