"""A Ray trial that spans nodes (``trainingService.trialPlacement``): how many workers (ranks),
what each asks for, and how Ray's placement group places them, named as Ray Train's
``ScalingConfig`` names them (``num_workers``, ``resources_per_worker``, ``placement_strategy``)::

    trialPlacement: {workers: 2, resourcesPerWorker: {cpu: 1, gpu: 1}, strategy: STRICT_SPREAD}

``check_trial_placement`` is called by ``_validate._Canonicalizer._ray_service``; the
training service reads ``_platforms.ResolvedTrialPlacement`` (docs/ray.md, "Multi-node trials").
"""
from __future__ import annotations

from typing import Any, Callable

from ._errors import Key, PathSegment, Problem
from ._keys import match_keys
from ._values import positive_int, shown_value

FieldPath = tuple[PathSegment, ...]

STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
"""Ray's placement-group strategies: PACK (as few nodes as can, Ray Train's default), SPREAD
(as many as can), STRICT_PACK (one node) and STRICT_SPREAD (one node per worker)."""
MAX_WORKERS = 1024
"""A trial's ranks, at most: more is almost surely a typo."""
_FIELDS = ("workers", "resources_per_worker", "strategy")


def check_trial_placement(value: Any, path: FieldPath, style: str,
                          resources: Callable[[Any, FieldPath], dict[str, Any]]) -> dict[str, Any]:
    """The canonical ``trialPlacement``: ``{workers, resources_per_worker, strategy}``, the
    resources checked by ``resources`` (the validator's ``trialResources`` rule); Problem if not."""
    if not isinstance(value, dict):
        raise Problem(path, f"expected a mapping such as {{workers: 2, resourcesPerWorker: {{cpu: 1}}, "
                            f"strategy: PACK}}, got {shown_value(value)}")
    given = match_keys(value, _FIELDS, path, style)
    if given.get("workers") is None:
        raise Problem(path + (Key("workers"),), "required: the trial's number of workers (ranks), e.g. workers: 2")
    workers = positive_int(given["workers"], path + (Key("workers"),), MAX_WORKERS)
    strategy = given.get("strategy")
    if strategy is None:
        strategy = "PACK"
    elif not isinstance(strategy, str) or strategy.upper() not in STRATEGIES:
        raise Problem(path + (Key("strategy"),), f"expected one of {', '.join(STRATEGIES)}, got {shown_value(strategy)}")
    resources_path = path + (Key("resources_per_worker"),)
    each = resources(given.get("resources_per_worker"), resources_path)
    if not any(amount for amount in each.values()):
        raise Problem(resources_path, "a Ray placement group needs each worker to ask for some resource, "
                                      "e.g. {cpu: 1}")
    return {"workers": workers, "resources_per_worker": each, "strategy": strategy.upper()}

