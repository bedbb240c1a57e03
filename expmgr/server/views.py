"""The store's records in NNI's REST shapes, shared by the REST server and the Experiment API.
A trial has two views: NNI's (``nni_trial_jobs_view``: NNI's keys alone, for NNI's routes and
clients) and expmgr's (``trial_jobs_view``: with what the web UI shows, for the changes).

NNI's quirks are kept on purpose so its clients work unchanged: times are
milliseconds since the epoch, ``hyperParameters`` items are JSON strings, and
a metric's ``data`` is a JSON string of a JSON string. A non-finite number a trial
reported (NaN, infinities), which JSON cannot carry, is shown as the string ``"NaN"``,
``"Infinity"`` or ``"-Infinity"`` (docs/architecture.md, "Non-finite results").
"""
from __future__ import annotations

import json
import math
import time
from typing import TYPE_CHECKING, Any, Callable

from expmgr.config import updatable_now
from expmgr.metrics import best_result, metric_number
from expmgr.server.results import final_numbers_by_key, stored_result_keys
from expmgr.states import ExperimentState, TrialState
from expmgr.store import AttemptRecord, Changes, MetricRecord, Store, TrialRecord
from expmgr.training import TrialFiles

if TYPE_CHECKING:
    from expmgr.server.facts import ExperimentFacts


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1000)


_NON_FINITE_NAMES = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def json_safe(value: Any) -> Any:
    """``value`` with each non-finite float replaced by its name as a string (``"NaN"``,
    ``"Infinity"``, ``"-Infinity"``), so that it is valid JSON; finite values unchanged."""
    if isinstance(value, float) and not math.isfinite(value):
        return _NON_FINITE_NAMES[str(value)]
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_safe(item) for item in value]
    return value


def metric_view(metric: MetricRecord, parameter_id: int) -> dict[str, Any]:
    return {
        "timestamp": _ms(metric.time),
        "trialJobId": metric.trial_id,
        "parameterId": str(parameter_id),
        "type": metric.type,
        "sequence": metric.sequence,
        "data": json.dumps(json.dumps(json_safe(metric.value), allow_nan=False)),
    }


def trial_job_view(trial: TrialRecord, files: TrialFiles, final: MetricRecord | None) -> dict[str, Any]:
    """expmgr's view of a trial (see ``trial_jobs_view``); ``files``: its experiment's trial files."""
    return _trial_job_view(trial, files, final)


def _nni_keys(trial: TrialRecord, files: TrialFiles, final: MetricRecord | None) -> dict[str, Any]:
    """The keys of NNI's TrialJobInfo both views share (not ``startTime``: see the two views)."""
    hyper_parameters = json.dumps({"parameter_id": trial.sequence_id, "parameter_source": trial.parameter_source,
                                   "parameters": trial.parameters, "parameter_index": 0})
    view: dict[str, Any] = {
        "trialJobId": trial.trial_id,
        "sequenceId": trial.sequence_id,
        "status": trial.status.value,
        "hyperParameters": [hyper_parameters],
        "logPath": files.url(trial.trial_id),
        "stderrPath": files.url(trial.trial_id, "stderr"),
    }
    if trial.end_time is not None:
        view["endTime"] = _ms(trial.end_time)
    if final is not None:
        view["finalMetricData"] = [metric_view(final, trial.sequence_id)]
    return view


def _trial_job_view(trial: TrialRecord, files: TrialFiles, final: MetricRecord | None) -> dict[str, Any]:
    view = _nni_keys(trial, files, final)
    view["submitTime"] = _ms(trial.submit_time)
    view["attempts"] = trial.attempts
    # The runner kills only a trial whose process runs: not a WAITING or PAUSED one.
    view["canKill"] = trial.status == TrialState.RUNNING
    if trial.start_time is not None:
        view["startTime"] = _ms(trial.start_time)
    if trial.attempts:   # its duration (trial_seconds), in parts: a running one's grows, the UI adds the time since
        view["duration"] = trial.seconds_ended
        if trial.running_since is not None:
            view["runningSince"] = _ms(trial.running_since)
    if trial.host is not None:
        view["host"] = trial.host  # where its latest attempt ran
    if trial.waiting_reason is not None:
        view["waitingReason"] = trial.waiting_reason  # why it is not started yet (no free GPU)
    if final is not None:
        view["finalNumber"] = metric_number(final.value)  # the UI shows it, sorts and filters by it
        by_key = final_numbers_by_key(final.value)
        if by_key is not None:
            view["finalNumbers"] = by_key  # each key's number: the UI's key chooser shows one
    return view


def nni_trial_job_view(trial: TrialRecord, files: TrialFiles, final: MetricRecord | None) -> dict[str, Any]:
    """NNI's view of a trial (see ``nni_trial_jobs_view``); ``files``: its experiment's trial files."""
    return _nni_trial_job_view(trial, files, final)


def _nni_trial_job_view(trial: TrialRecord, files: TrialFiles, final: MetricRecord | None) -> dict[str, Any]:
    view = _nni_keys(trial, files, final)
    # NNI's startTime is the start of the trial's first event: a trial that has not run
    # yet has its submission time (nni.experiment's TrialJob requires one).
    view["startTime"] = _ms(trial.start_time if trial.start_time is not None else trial.submit_time)
    return view


def attempt_views(attempts: list[AttemptRecord]) -> list[dict[str, Any]]:
    """A trial's attempts (the single-trial route lists them; the bulk views only count them)."""
    return [{"attempt": a.attempt, "status": a.status.value, "startTime": _ms(a.start_time),
             "endTime": _ms(a.end_time), "exitCode": a.exit_code, "signal": a.signal, "host": a.host}
            for a in attempts]


def trial_jobs_view(store: Store, files: TrialFiles, offset: int = 0,
                    limit: int | None = None) -> list[dict[str, Any]]:
    """expmgr's views of the trials in sequence order (``offset`` and ``limit`` select a
    page), as the changes and the Experiment API give them: NNI's keys, ``startTime`` only
    once a trial started, and what the web UI shows rather than derives: ``submitTime``,
    ``attempts`` (a count), ``canKill``, ``finalNumber`` (the final result's number,
    None when not finite), ``host`` (where its latest attempt ran, once known) and
    ``waitingReason`` (why a WAITING trial is not started yet: no free GPU)."""
    return _page(store, files, offset, limit, _trial_job_view)


def nni_trial_jobs_view(store: Store, files: TrialFiles, offset: int = 0,
                        limit: int | None = None) -> list[dict[str, Any]]:
    """NNI's ``trial-jobs``: the keys of NNI's TrialJobInfo and no other (nni.experiment's
    TrialJob takes them), ``startTime`` always (NNI's: a trial not started yet has the time
    it was submitted)."""
    return _page(store, files, offset, limit, _nni_trial_job_view)


def _page(store: Store, files: TrialFiles, offset: int, limit: int | None,
          view: Callable[[TrialRecord, TrialFiles, MetricRecord | None], dict[str, Any]]) -> list[dict[str, Any]]:
    trials = store.trials(offset, limit)
    finals = store.final_metrics(None if offset == 0 and limit is None else [t.trial_id for t in trials])
    return [view(trial, files, finals.get(trial.trial_id)) for trial in trials]


def metrics_view(store: Store, trial_id: str | None = None) -> list[dict[str, Any]]:
    return _metric_views(store, store.metrics(trial_id))


def latest_metrics_view(store: Store) -> list[dict[str, Any]]:
    """NNI's metric-data-latest: each trial's latest intermediate result and its final one."""
    return _metric_views(store, store.latest_metrics())


def metrics_range_view(store: Store, first: int, last: int) -> list[dict[str, Any]]:
    """NNI's metric-data-range: the metrics of trials with a sequence id in [first, last]."""
    return _metric_views(store, store.metrics_of_sequence_range(first, last))


def _metric_views(store: Store, metrics: list[MetricRecord]) -> list[dict[str, Any]]:
    sequence_ids = store.sequence_ids()
    return [metric_view(m, sequence_ids.get(m.trial_id, -1)) for m in metrics]


def job_statistics_view(store: Store, facts: ExperimentFacts | None = None) -> list[dict[str, Any]]:
    """NNI's job-statistics; from ``facts`` (kept up to date) when given, else read afresh."""
    counts = store.status_counts() if facts is None else facts.status_counts
    return [{"trialJobStatus": status.value, "trialJobNumber": count}
            for status, count in sorted(counts.items(), key=lambda item: item[0].value)]


def export_data_view(store: Store) -> list[dict[str, Any]]:
    """NNI's export: one entry per trial with a final result, ``value`` as a JSON string
    (a non-finite number in it as ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``)."""
    finals = store.final_metrics()
    return [{"parameter": json_safe(trial.parameters),
             "value": json.dumps(json_safe(finals[trial.trial_id].value), allow_nan=False),
             "trialJobId": trial.trial_id}
            for trial in store.trials() if trial.trial_id in finals]


def runs_on_several_hosts(store: Store) -> bool:
    """Whether the experiment's trials ran on more than one host (of those known). Only then
    is a trial's host worth a column: the web UI's trials table (``multiHost`` in the
    experiment view) and ``expctl trial ls`` show it; on one machine it would say the same
    on every row."""
    return len(store.hosts()) > 1




AWAY_OVER_SECONDS = 1.0
"""A gap between two runs counts as time away only when longer than this: a resume that
follows its run at once (the next run's start rounds to its end) is no absence."""


def times_away(store: Store) -> list[tuple[float, float]]:
    """When no manager ran the experiment: (from, to), epoch seconds, of each gap longer
    than AWAY_OVER_SECONDS between one run's end and the next run's start, in order: a stop
    or a death, then ``expctl resume`` (not the wait of a DONE experiment before its manager,
    which served it all along, was given more trials: ``same_manager``). A run without an end
    is followed by no gap yet: the last one runs, or its manager died and nobody resumed it
    so far; an earlier one is ended, where its manager was last known alive, by the resume
    after it once that takes over (``TrialRunner._restore``). ``manager_away_view`` is what
    the web UI and ``expctl experiment status`` are sent."""
    runs = store.runs()
    return [(ended, started) for (_, ended, _), (started, _, same_manager) in zip(runs, runs[1:])
            if ended is not None and not same_manager and started - ended > AWAY_OVER_SECONDS]


def manager_away_view(store: Store) -> dict[str, Any]:
    """The experiment view's ``managerAway``, the gaps of ``times_away`` as ``{"from": s,
    "to": s}`` (epoch seconds; empty when no manager was ever away), and their total
    ``managerAwaySeconds``: what the web UI's overview and ``expctl experiment status`` show."""
    away = times_away(store)
    return {"managerAway": [{"from": begun, "to": ended} for begun, ended in away],
            "managerAwaySeconds": sum((ended - begun for begun, ended in away), 0.0)}


def trial_seconds(trial: TrialRecord, until: float | None) -> float | None:
    """A trial's duration, the one meaning every view shows (web UI, ``expctl trial ls``,
    ``expctl top``): how long its attempts' processes ran, all together; so neither the
    wait before a retry or a resume, nor the time no manager ran (a dead manager's attempts
    end when it was last known alive, see ``TrialRunner._restore``). An attempt still open
    counts until ``until`` (now, while its experiment runs); None when there is none to
    count until (its experiment died under it, so how long it ran is not known), or when
    it never started."""
    if trial.attempts == 0 and trial.running_since is None:
        return None
    if trial.running_since is None:
        return trial.seconds_ended
    if until is None:
        return None
    return trial.seconds_ended + max(0.0, until - trial.running_since)


def experiment_view(store: Store, read_only: bool | None = None,
                    running: bool | None = None, facts: ExperimentFacts | None = None,
                    more_trials: bool = False) -> dict[str, Any]:
    """NNI's profile; with ``error`` (the traceback) when the experiment is in ERROR, and
    ``readOnly`` when ``read_only`` is given (the REST server says whether it is a view).

    ``startTime`` is the first start (a resume does not move it) and ``execDuration``
    the seconds managers ran it (``seconds_run``: not the time between a stop and a
    resume); while it is ``running`` (default: served by its manager, ``read_only``
    False; without ``read_only``, not ended) its current run counts until now.

    Also the facts the web UI shows rather than derives: ``optimizeMode`` (``minimize`` or
    ``maximize``, the tuner's default when the config names none), ``bestTrialId`` (None
    until a trial has a finite final result), ``updatableFields`` (each with its NNI
    ``updateType``: the fields a change of is taken now, ``config.updatable_now``: every one
    while it runs, after DONE the budget fields when ``more_trials`` says its manager still
    serves it, else none) and ``multiHost`` (``runs_on_several_hosts``: the trials table shows
    each trial's host), ``resultKeys`` (the keys of final results, ``default`` first: the
    UI's key chooser offers them; results.py), ``managerAway`` and ``managerAwaySeconds``
    (``manager_away_view``: when no manager ran it between runs, and how long in all). The best trial, ``multiHost`` and ``preempted`` come from ``facts``
    (kept up to date, refreshed in this snapshot) when given, else are read afresh."""
    profile = store.profile()
    if running is None:  # served by its manager, or (nothing said) not ended
        running = read_only is False if read_only is not None else not profile.status.is_finished()
    minimize = profile.minimizes
    best = best_result(store.final_numbers().items(), minimize) if facts is None else facts.best
    view: dict[str, Any] = {
        "id": profile.id,
        "revision": 0,
        "execDuration": int(store.seconds_run(until=time.time() if running else None)),
        "logDir": profile.log_dir,
        "nextSequenceId": store.next_sequence_id(),
        "params": profile.config,
        "startTime": _ms(profile.start_time),
        "status": profile.status.value,
        "preempted": store.was_preempted() if facts is None else facts.was_preempted(store),
        "optimizeMode": "minimize" if minimize else "maximize",
        "bestTrialId": None if best is None else best[0],
        "updatableFields": [{"field": entry.field, "updateType": entry.update_type}
                            for entry in updatable_now(running=running, more_trials=more_trials)],
        "multiHost": runs_on_several_hosts(store) if facts is None else facts.multi_host,
        "resultKeys": stored_result_keys(store) if facts is None else facts.result_keys,
    }
    view.update(manager_away_view(store))
    if profile.end_time is not None:
        view["endTime"] = _ms(profile.end_time)
    if profile.status == ExperimentState.ERROR and profile.error:
        view["error"] = profile.error
    if read_only is not None:
        view["readOnly"] = read_only
    return view


def changes_json(store: Store, files: TrialFiles, changes: Changes, read_only: bool,
                 head: dict[str, Any] | None = None, facts: ExperimentFacts | None = None,
                 more_trials: bool = False) -> str:
    """The answer of ``GET /api/v1/expmgr/changes`` as JSON text, the fields of ``head``
    first (the websocket's ``{"type": "changes"}``). Call it in the snapshot that read
    ``changes`` (and refreshed ``facts``, when given): the experiment and the statistics
    are read here."""
    answer = dict(head or {})
    answer.update(cursor=changes.cursor, full=changes.full, more=changes.more,
                  experiment=experiment_view(store, read_only, facts=facts, more_trials=more_trials),
                  statistics=job_statistics_view(store, facts))
    answer["trials"] = [_trial_job_view(trial, files, changes.finals.get(trial.trial_id))
                        for trial in changes.trials]
    # The metrics come as JSON text from the store: spliced in, not parsed and encoded again.
    return f'{json.dumps(answer)[:-1]}, "metrics": {changes.metrics_json}}}'


def check_status_view(store: Store) -> dict[str, Any]:
    profile = store.profile()
    return {"status": profile.status.value, "errors": [profile.error] if profile.error else []}


