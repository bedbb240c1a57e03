"""What the web UI's download links and ``expctl experiment export`` save: an experiment's
results (NNI's export: one record per trial with a final result) as JSON or CSV, and its
config as YAML (``yml``) or JSON; the file name each is saved under. One home for the export's rule,
so that the CLI and the REST route write the same bytes::

    records = export_records(store)                    # [{"trialJobId", "parameter", "value"}, ...]
    text = results_text(records, "csv")                # header: trialJobId, parameters, result keys
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
    """NNI's export: one record per trial with a final result (its value decoded; a
    non-finite number as the string "NaN", "Infinity" or "-Infinity", so the JSON is valid);
    with ``intermediate``, its intermediate results in order under ``intermediate``."""
    records = [{"trialJobId": view["trialJobId"], "parameter": view["parameter"],
                "value": json.loads(view["value"])} for view in views.export_data_view(store)]
    if intermediate:
        periodical: dict[str, list] = {}
        for metric in store.metrics():
            if metric.type == "PERIODICAL":
                periodical.setdefault(metric.trial_id, []).append(views.json_safe(metric.value))
        for record in records:
            record["intermediate"] = periodical.get(record["trialJobId"], [])
    return records


def results_text(records: list[dict[str, Any]], fmt: str) -> str:
    """The records as ``fmt``: indented JSON, or CSV with one column per parameter and per
    result key (``default`` for a plain number)."""
    return json.dumps(records, indent=2, allow_nan=False) + "\n" if fmt == "json" else _as_csv(records)


def _as_csv(records: list[dict]) -> str:
    parameter_keys = sorted({key for record in records for key in record["parameter"]})
    value_keys = sorted({key for record in records
                         for key in (record["value"] if isinstance(record["value"], dict) else {"default": 0})})
    value_keys += ["intermediate"] if any("intermediate" in record for record in records) else []
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["trialJobId", *parameter_keys, *value_keys])
    for record in records:
        value = record["value"] if isinstance(record["value"], dict) else {"default": record["value"]}
        value = {**value, "intermediate": record["intermediate"]} if "intermediate" in record else value
        writer.writerow([record["trialJobId"], *(_cell(record["parameter"].get(k)) for k in parameter_keys),
                         *(_cell(value.get(k)) for k in value_keys)])
    return out.getvalue()


def _cell(value: object) -> object:
    return json.dumps(value) if isinstance(value, (dict, list)) else ("" if value is None else value)


def config_text(config: dict[str, Any], fmt: str) -> str:
    """The experiment's config (as stored, updates included) as YAML laid out as config.yml, or JSON."""
    return yaml_text(config) if fmt == "yml" else json.dumps(config, indent=2) + "\n"


def download_name(*parts: str) -> str:
    """``<part>-<part>....<extension>`` (the last part), with anything but letters, digits,
    ``.``, ``_`` and ``-`` replaced: a file name safe in a Content-Disposition header."""
    *stem, extension = parts
    return _UNSAFE_IN_NAME.sub("_", "-".join(stem)) + "." + _UNSAFE_IN_NAME.sub("_", extension)
