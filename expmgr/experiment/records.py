"""What the Experiment API returns about trials, in NNI's shapes (camelCase
attribute names kept so NNI users' code reads them unchanged)."""
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
class TrialJob:
    """One trial, as ``Experiment.list_trial_jobs()`` gives it."""

    trialJobId: str  # noqa: N815
    sequenceId: int  # noqa: N815
    status: str
    parameters: dict[str, Any]
    startTime: int | None = None  # noqa: N815 - milliseconds since the epoch, as NNI
    endTime: int | None = None  # noqa: N815
    finalMetric: Any = None  # noqa: N815
    attempts: int = 0
    logPath: str = ""  # noqa: N815
    hyperParameters: list[str] = field(default_factory=list)  # noqa: N815

    @classmethod
    def from_view(cls, view: dict[str, Any]) -> "TrialJob":
        final = view.get("finalMetricData")
        return cls(
            trialJobId=view["trialJobId"], sequenceId=view["sequenceId"], status=view["status"],
            parameters=json.loads(view["hyperParameters"][0])["parameters"],
            startTime=view.get("startTime"), endTime=view.get("endTime"),
            finalMetric=json.loads(json.loads(final[0]["data"])) if final else None,
            attempts=view["attempts"], logPath=view["logPath"], hyperParameters=view["hyperParameters"],
        )
