"""The store's records in NNI's REST shapes, shared by the REST server and the Experiment API.

NNI's quirks are kept on purpose so its clients work unchanged: times are
milliseconds since the epoch, ``hyperParameters`` items are JSON strings, and
a metric's ``data`` is a JSON string of a JSON string.
"""
from __future__ import annotations

import json
import time
from typing import Any

from expmgr.layout import ExperimentPaths
from expmgr.manager.store import ExperimentStore, MetricRecord, TrialRecord


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1000)


def metric_view(metric: MetricRecord, parameter_id: int) -> dict[str, Any]:
    return {
        "timestamp": _ms(metric.time),
        "trialJobId": metric.trial_id,
        "parameterId": str(parameter_id),
        "type": metric.type,
        "sequence": metric.sequence,
        "data": json.dumps(json.dumps(metric.value)),
    }


def trial_job_view(trial: TrialRecord, paths: ExperimentPaths, final: MetricRecord | None) -> dict[str, Any]:
    hyper_parameters = json.dumps({"parameter_id": trial.sequence_id, "parameter_source": "algorithm",
                                   "parameters": trial.parameters, "parameter_index": 0})
    trial_dir = paths.trial_dir(trial.trial_id)
    view: dict[str, Any] = {
        "trialJobId": trial.trial_id,
        "sequenceId": trial.sequence_id,
        "status": trial.status.value,
        "hyperParameters": [hyper_parameters],
        "logPath": f"file://localhost:{trial_dir}",
        "stderrPath": f"file://localhost:{trial_dir / 'stderr'}",
        "submitTime": _ms(trial.submit_time),
        "attempts": trial.attempts,
    }
    if trial.start_time is not None:
        view["startTime"] = _ms(trial.start_time)
    if trial.end_time is not None:
        view["endTime"] = _ms(trial.end_time)
    if final is not None:
        view["finalMetricData"] = [metric_view(final, trial.sequence_id)]
    return view


def trial_jobs_view(store: ExperimentStore, paths: ExperimentPaths) -> list[dict[str, Any]]:
    finals = store.final_metrics()
    return [trial_job_view(trial, paths, finals.get(trial.trial_id)) for trial in store.trials()]


def metrics_view(store: ExperimentStore, trial_id: str | None = None) -> list[dict[str, Any]]:
    sequence_ids = {trial.trial_id: trial.sequence_id for trial in store.trials()}
    return [metric_view(m, sequence_ids.get(m.trial_id, -1)) for m in store.metrics(trial_id)]


def job_statistics_view(store: ExperimentStore) -> list[dict[str, Any]]:
    return [{"trialJobStatus": status.value, "trialJobNumber": count}
            for status, count in sorted(store.status_counts().items(), key=lambda item: item[0].value)]


def export_data_view(store: ExperimentStore) -> list[dict[str, Any]]:
    """NNI's export: one entry per trial with a final result, ``value`` as a JSON string."""
    finals = store.final_metrics()
    return [{"parameter": trial.parameters, "value": json.dumps(finals[trial.trial_id].value),
             "trialJobId": trial.trial_id}
            for trial in store.trials() if trial.trial_id in finals]


def experiment_view(store: ExperimentStore) -> dict[str, Any]:
    profile = store.profile()
    end = profile.end_time if profile.end_time is not None else time.time()
    view: dict[str, Any] = {
        "id": profile.id,
        "revision": 0,
        "execDuration": int(end - profile.start_time),
        "logDir": profile.log_dir,
        "nextSequenceId": store.next_sequence_id(),
        "params": profile.config,
        "startTime": _ms(profile.start_time),
        "status": profile.status.value,
        "preempted": store.was_preempted(),
    }
    if profile.end_time is not None:
        view["endTime"] = _ms(profile.end_time)
    return view


def check_status_view(store: ExperimentStore) -> dict[str, Any]:
    profile = store.profile()
    return {"status": profile.status.value, "errors": [profile.error] if profile.error else []}


