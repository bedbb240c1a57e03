"""What the web UI's download links and ``expctl experiment export`` save: an experiment's
results (NNI's export: one record per trial with a final result) as JSON or CSV, and its
config as YAML (``yml``) or JSON; the file name each is saved under. One home for the export's rule,
so that the CLI and the REST route write the same bytes::

    records = export_records(store)                    # [{"parameter", "value": "<JSON>", "trialJobId"}, ...]
    text = results_text(records, "csv")                # header: trialJobId, parameters, reward or result keys
    filename = download_name(exp_id, "results", "csv")  # "<id>-results.csv"
"""
from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

from expmgr.config._yaml_text import yaml_text
from expmgr.server import views
from expmgr.store import Store

RESULT_FORMATS = ("csv", "json")
CONFIG_FORMATS = ("yml", "json")
_UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def export_records(store: Store, intermediate: bool = False) -> list[dict[str, Any]]:
    """NNI's export (``GET export-data``'s records): one record per trial with a final result,
    ``value`` a JSON string as NNI keeps it (``json.loads(record["value"])`` gives the number
    or dict, each float exactly as reported; a non-finite number as ``"NaN"``,
    ``"Infinity"`` or ``"-Infinity"``). With ``intermediate``, as nnictl's ``export -i``:
    the trial's intermediate results under ``intermediate``, each a JSON string, in the order
    reported, and under ``intermediateAttempts`` the attempt each of them came from (1, 2,
    ...: a retried or requeued trial reports its results again from its start)."""
    records = views.export_data_view(store)
    if intermediate:
        periodical: dict[str, tuple[list[str], list[int]]] = {}
        for metric in store.metrics():
            if metric.type == "PERIODICAL":
                values, attempts = periodical.setdefault(metric.trial_id, ([], []))
                values.append(json.dumps(views.json_safe(metric.value), allow_nan=False))
                attempts.append(metric.attempt)
        for record in records:
            values, attempts = periodical.get(record["trialJobId"], ([], []))
            record["intermediate"], record["intermediateAttempts"] = values, attempts
    return records


def results_text(records: list[dict[str, Any]], fmt: str) -> str:
    """The records as ``fmt``, as nnictl's ``experiment export`` writes its file: JSON on one
    line (no newline after it), or CSV with a column per parameter and per result key
    (``reward`` for a plain number)."""
    return json.dumps(records, allow_nan=False) if fmt == "json" else _as_csv(records)


def _as_csv(records: list[dict]) -> str:
    """nnictl's columns (its order is a set's, so any order reads the same; ours is fixed):
    the trial, its parameters, its result (a plain number under ``reward``, a dict's keys
    each in its own column), then the intermediate results as ``[a,b,...]`` and, ours, the
    attempt of each."""
    values = [json.loads(record["value"]) for record in records]
    parameter_keys = sorted({key for record in records for key in record["parameter"]})
    value_keys = sorted({key for value in values for key in (value if isinstance(value, dict) else {"reward": 0})})
    value_keys += ["intermediate", "intermediateAttempts"] if any("intermediate" in r for r in records) else []
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["trialJobId", *parameter_keys, *value_keys])
    for record, value in zip(records, values):
        cells = dict(value) if isinstance(value, dict) else {"reward": value}
        if "intermediate" in record:
            cells["intermediate"] = "[" + ",".join(record["intermediate"]) + "]"  # nnictl's: the JSON texts joined
            cells["intermediateAttempts"] = "[" + ",".join(map(str, record["intermediateAttempts"])) + "]"
        writer.writerow([record["trialJobId"], *(_cell(record["parameter"].get(k)) for k in parameter_keys),
                         *(_cell(cells.get(k)) for k in value_keys)])
    return out.getvalue()


def _cell(value: object) -> object:
    """A CSV cell: a float as ``repr`` writes it (it reads back exactly), a dict or list as JSON."""
    return json.dumps(value) if isinstance(value, (dict, list)) else ("" if value is None else value)


def config_text(config: dict[str, Any], fmt: str) -> str:
    """The experiment's config (as stored, updates included) as YAML laid out as config.yml, or JSON."""
    return yaml_text(config) if fmt == "yml" else json.dumps(config, indent=2) + "\n"


def download_name(*parts: str) -> str:
    """``<part>-<part>....<extension>`` (the last part), with anything but letters, digits,
    ``.``, ``_`` and ``-`` replaced: a file name safe in a Content-Disposition header."""
    *stem, extension = parts
    return _UNSAFE_IN_NAME.sub("_", "-".join(stem)) + "." + _UNSAFE_IN_NAME.sub("_", extension)
