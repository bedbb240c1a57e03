"""expmgr.metrics: the number a metric stands for and the best result, decided once;
and the one table of fields that may change while running, as every layer reads it."""
from __future__ import annotations

import math

import pytest

from expmgr.config import UPDATABLE_FIELDS, ExperimentConfig
from expmgr.metrics import best_result, is_better, metric_number, ranked, reported_number


@pytest.mark.parametrize("value, number", [
    (0.5, 0.5), (3, 3), ({"default": 0.25, "loss": 1}, 0.25), ({"default": -2}, -2),
    (math.nan, None), (math.inf, None), ({"default": -math.inf}, None), (10**400, None),
    (True, None), ("0.5", None), ({"loss": 1}, None), (None, None), ([1], None),
])
def test_metric_number(value: object, number: float | None) -> None:
    assert metric_number(value) == number
    assert reported_number({"default": value}) is value


def test_best_result_follows_the_direction_and_never_picks_a_non_finite_one() -> None:
    results = [("a", 0.5), ("b", {"default": 0.9}), ("c", math.nan), ("d", 0.1), ("e", math.inf),
               ("f", -math.inf), ("g", 10**400), ("h", 0.9)]
    assert best_result(results, minimize=False) == ("b", 0.9)   # the first of equals
    assert best_result(results, minimize=True) == ("d", 0.1)
    assert best_result([("x", math.nan)], minimize=True) is None
    assert best_result([], minimize=False) is None


def test_ranked_puts_the_best_first_and_the_rest_last_in_order() -> None:
    results = [("a", 0.5), ("b", None), ("c", 0.9), ("d", math.nan), ("e", 0.5), ("f", 0.1)]
    assert ranked(results, minimize=False) == (["c", "a", "e", "f"], ["b", "d"])
    assert ranked(results, minimize=True) == (["f", "a", "e", "c"], ["b", "d"])


def test_is_better() -> None:
    assert is_better(1.0, None, minimize=True) and is_better(1.0, None, minimize=False)
    assert is_better(1.0, 2.0, minimize=True) and not is_better(1.0, 2.0, minimize=False)
    assert not is_better(1.0, 1.0, minimize=True) and not is_better(1.0, 1.0, minimize=False)


@pytest.mark.parametrize("tuner, minimizes", [
    ({"name": "TPE"}, True), ({"name": "Anneal"}, True), ({"name": "Evolution"}, False),
    ({"name": "TPE", "classArgs": {"optimize_mode": "maximize"}}, False),
    ({"name": "Random", "classArgs": {"optimize_mode": "minimize"}}, True), (None, False),
])
def test_the_direction_is_the_tuners_default_when_not_given(tuner: dict | None, minimizes: bool) -> None:
    assert ExperimentConfig.from_dict({"tuner": tuner} if tuner else {}).minimizes is minimizes


def test_every_layer_reads_the_one_table_of_updatable_fields() -> None:
    from expmgr.cli import update
    from expmgr.manager import rest, runner, views
    fields = [entry.field for entry in UPDATABLE_FIELDS]
    assert list(runner.UPDATABLE_FIELDS) == fields
    assert {attribute for attribute in runner.UPDATABLE_FIELDS.values()} <= set(ExperimentConfig.__dataclass_fields__)
    assert list(rest.UPDATE_TYPES.values()) == fields
    assert [entry.field for entry in update._UPDATES.values()] == fields
    assert [item["field"] for item in views._UPDATABLE_VIEW] == fields
    assert [item["updateType"] for item in views._UPDATABLE_VIEW] == list(rest.UPDATE_TYPES)
