"""What the Experiment API returns about trials, in the shapes of NNI's ``nni.experiment``
(``TrialJob``, ``TrialResult``, ``TrialMetricData``, ``TrialHyperParameters``), camelCase
attribute names kept so NNI users' code reads them unchanged; built from the server's
views (``expmgr.server.views``), as NNI's are from its REST answers."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TrialResult:
    """One trial's final result, as ``Experiment.export_data()`` gives it."""

    parameter: dict[str, Any]
    value: Any
    trialJobId: str  # noqa: N815 - NNI's name

    @classmethod
    def from_view(cls, view: dict[str, Any]) -> "TrialResult":
        return cls(parameter=view["parameter"], value=json.loads(view["value"]), trialJobId=view["trialJobId"])


@dataclass
class TrialMetricData:
    """One reported result (``type`` PERIODICAL: intermediate, FINAL: final), as
    ``Experiment.get_job_metrics()`` and ``TrialJob.finalMetricData`` give it; ``data`` is
    the value as reported (a number, or a dict with ``default``)."""

    timestamp: int | None
    """Milliseconds since the epoch."""
    trialJobId: str  # noqa: N815
    parameterId: str  # noqa: N815 - as NNI's manager answers it: the trial's sequence id, a string
    type: str
    sequence: int
    data: Any

    @classmethod
    def from_view(cls, view: dict[str, Any]) -> "TrialMetricData":
        return cls(timestamp=view["timestamp"], trialJobId=view["trialJobId"], parameterId=view["parameterId"],
                   type=view["type"], sequence=view["sequence"], data=json.loads(json.loads(view["data"])))


@dataclass
class TrialHyperParameters:
    """The parameters a trial was given, as NNI's ``TrialJob.hyperParameters`` lists them."""

    parameter_id: int
    parameter_source: str
    parameters: dict[str, Any]
    parameter_index: int
    placement_constraint: dict[str, Any] | None = None
    version_info: dict[str, Any] | None = None


@dataclass
class TrialJob:
    """One trial, as ``Experiment.list_trial_jobs()`` and ``get_trial_job()`` give it: NNI's
    attributes, and expmgr's ``parameters``, ``finalMetric`` (the final result's value)
    and ``attempts``."""

    trialJobId: str  # noqa: N815
    sequenceId: int  # noqa: N815
    status: str
    parameters: dict[str, Any]
    startTime: int | None = None  # noqa: N815 - milliseconds since the epoch, as NNI
    endTime: int | None = None  # noqa: N815
    finalMetric: Any = None  # noqa: N815
    attempts: int = 0
    logPath: str = ""  # noqa: N815
    hyperParameters: list[TrialHyperParameters] = field(default_factory=list)  # noqa: N815
    finalMetricData: list[TrialMetricData] = field(default_factory=list)  # noqa: N815
    stderrPath: str = ""  # noqa: N815
    message: str = "--"
    """NNI's placeholder (its remote platforms put the machine there)."""

    @classmethod
    def from_view(cls, view: dict[str, Any]) -> "TrialJob":
        final = [TrialMetricData.from_view(metric) for metric in view.get("finalMetricData", [])]
        hyper_parameters = [TrialHyperParameters(**json.loads(item)) for item in view["hyperParameters"]]
        return cls(
            trialJobId=view["trialJobId"], sequenceId=view["sequenceId"], status=view["status"],
            parameters=hyper_parameters[0].parameters,
            startTime=view.get("startTime"), endTime=view.get("endTime"),
            finalMetric=final[0].data if final else None,
            attempts=view["attempts"], logPath=view["logPath"], hyperParameters=hyper_parameters,
            finalMetricData=final, stderrPath=view.get("stderrPath", ""),
        )
