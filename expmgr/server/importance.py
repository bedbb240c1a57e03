"""Hyperparameter importance by PED-ANOVA (Watanabe et al., IJCAI 2023; optuna-dashboard's
default): a parameter matters as much as its distribution among the best trials (the top
``GAMMA`` quantile of finite final results, in the experiment's optimize mode) differs from
its distribution among all of them, measured by the Pearson divergence of the two. Each
distribution is a 1-D Parzen estimator on a grid of at most ``GRID_STEPS`` points of the
parameter's domain (a log axis for loguniform and qloguniform), with Scott's bandwidth and a
uniform prior, as optuna's ``PedAnovaImportanceEvaluator`` builds them; a ``choice`` is
counted per value. The importances are normalized to sum to 1. Pure numpy: no fitted model,
so 10,000 trials take milliseconds::

    answer = importance_view(store, key="default")
    answer["parameters"]   # [{"name": "lr", "importance": 0.93}, ...], most important first
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from expmgr.server.results import checked_key, numbers_under_key, stored_result_keys
from expmgr.store import Store

GAMMA = 0.1
"""The quantile of the best trials compared with all (optuna's ``target_quantile``)."""
GRID_STEPS = 50
"""Grid points a numeric parameter's domain is cut into (optuna's ``n_steps``)."""
PRIOR_WEIGHT = 1.0
"""Weight of the uniform prior kernel in each estimator (optuna's ``prior_weight``)."""
MIN_TRIALS = 10
"""Fewer trials with a finite result than this answer a reason, not importances: the best
tenth of them would be a single trial."""
_SIGMA_MIN = 0.5 / 1.64
"""The narrowest kernel, in grid steps: 90% of it falls within its grid cell."""


class Unscorable(Exception):
    """A parameter importance cannot be computed for; the message says why."""


@dataclass(frozen=True)
class Domain:
    """Where a parameter's values lie, as the estimator sees it."""

    kind: str
    """``numeric`` or ``categorical``."""
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    step: float | None = None
    """The spacing of a quantized or integer parameter (None: continuous)."""
    choices: tuple[str, ...] = ()
    """A choice's values as ``choice_key`` gives them (so 1 and "1" differ, and lists compare)."""

    def single(self) -> bool:
        return len(self.choices) <= 1 if self.kind == "categorical" else self.low == self.high


_CONTINUOUS = {"uniform", "quniform", "loguniform", "qloguniform"}
_UNBOUNDED = {"normal", "qnormal", "lognormal", "qlognormal"}


def choice_key(value: Any) -> str:
    """A choice's value as a key: a string itself (most choices, and fast), else its JSON."""
    return value if type(value) is str else "\0" + json.dumps(value, sort_keys=True)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def domain_of(spec: Any, values: Sequence[Any]) -> Domain:
    """The domain of a search-space entry (NNI's ``{"_type": ..., "_value": ...}``); an
    unbounded one (normal, lognormal) takes the range of ``values`` seen. Unscorable when
    the entry is nested, unknown or malformed."""
    if not isinstance(spec, dict) or not isinstance(spec.get("_type"), str):
        raise Unscorable("not a search-space entry of the form {\"_type\": ..., \"_value\": ...}")
    kind, args = spec["_type"], spec.get("_value")
    if not isinstance(args, list):
        raise Unscorable(f"{kind}: _value is not a list")
    if kind == "choice":
        if any(isinstance(item, dict) for item in args):
            raise Unscorable("a nested search space (a choice of sub-spaces) is not scored")
        return Domain("categorical", choices=tuple(choice_key(item) for item in args))
    if kind in _CONTINUOUS or kind == "randint":
        if len(args) < 2 or not all(_number(item) for item in args[:2]) or args[0] > args[1]:
            raise Unscorable(f"{kind}: _value must start with two finite numbers, low <= high")
        low, high = float(args[0]), float(args[1])
        if kind == "randint":  # [lower, upper): integers
            return Domain("numeric", low, max(low, high - 1), step=1.0)
        log = kind.endswith("loguniform")
        if log and low <= 0:
            raise Unscorable(f"{kind}: low must be positive for a log axis")
        quantum = args[2] if kind.startswith("q") and len(args) > 2 and _number(args[2]) and args[2] > 0 else None
        return Domain("numeric", low, high, log=log, step=None if log or quantum is None else float(quantum))
    if kind in _UNBOUNDED:
        numbers = [float(v) for v in values if _number(v)]
        log = kind.endswith("lognormal")
        if log:
            numbers = [v for v in numbers if v > 0]
        if not numbers:
            raise Unscorable(f"{kind}: no trial has a usable value")
        return Domain("numeric", min(numbers), max(numbers), log=log)
    raise Unscorable(f"unknown _type {kind!r}")


def _phi(z: np.ndarray) -> np.ndarray:
    """The standard normal's distribution function (no scipy: erf through math)."""
    return np.asarray(0.5 * (1.0 + _erf(z / math.sqrt(2.0))), dtype=np.float64)


_erf = np.frompyfunc(math.erf, 1, 1)


def _grid_counts(domain: Domain, values: np.ndarray | list[int]) -> np.ndarray:
    """How many of ``values`` fall in each grid cell (each choice for a categorical)."""
    if domain.kind == "categorical":
        return np.bincount(np.asarray(values, dtype=np.int64), minlength=len(domain.choices))
    steps = GRID_STEPS
    if domain.step is not None:
        steps = min(round((domain.high - domain.low) / domain.step) + 1, steps)
    low, high = (math.log(domain.low), math.log(domain.high)) if domain.log else (domain.low, domain.high)
    points = np.log(values) if domain.log else np.asarray(values, dtype=np.float64)
    cell = (high - low) / (steps - 1)
    index = np.clip(np.ceil((points - low) / cell - 0.5).astype(np.int64), 0, steps - 1)  # ties: the lower cell
    return np.bincount(index, minlength=steps)


def _grid_pdf(counts: np.ndarray, categorical: bool) -> np.ndarray:
    """The Parzen estimate on the grid from the counts in its cells: one kernel per occupied
    cell (weighted by its count) and a uniform-ish prior kernel."""
    size = counts.size
    cells = np.flatnonzero(counts)
    weights = counts[cells].astype(np.float64)
    if cells.size == 0:
        return np.full(size, 1.0 / size)
    mixture = np.append(weights, PRIOR_WEIGHT)
    mixture /= mixture.sum()
    if categorical:
        kernels = np.full((cells.size + 1, size), PRIOR_WEIGHT / (cells.size + 1))
        kernels[np.arange(cells.size), cells] += 1.0
        kernels /= kernels.sum(axis=1, keepdims=True)
        return np.asarray(mixture @ kernels, dtype=np.float64)
    # Scott's rule on the grid indices, the smaller of the deviation and the IQR's estimate
    total = weights.sum()
    mean = (cells @ weights) / total
    deviation = math.sqrt(((cells - mean) ** 2 @ weights) / max(1.0, total - 1))
    cumulative = np.cumsum(weights)
    q1 = int(np.searchsorted(cumulative, total // 4, side="left"))
    q3 = int(np.searchsorted(cumulative, total * 3 // 4, side="right"))
    iqr = cells[min(cells.size - 1, q3)] - cells[q1]
    sigma = max(1.059 * min(iqr / 1.34, deviation) * total ** -0.2, _SIGMA_MIN)
    mus = np.append(cells.astype(np.float64), (size - 1) / 2.0)
    sigmas = np.append(np.full(cells.size, sigma), float(size))
    grid = np.arange(size, dtype=np.float64)
    # each kernel: a normal's mass on each cell [x - 0.5, x + 0.5], truncated to the grid
    upper = _phi((grid[:, None] + 0.5 - mus) / sigmas)
    lower = _phi((grid[:, None] - 0.5 - mus) / sigmas)
    inside = _phi((size - 0.5 - mus) / sigmas) - _phi((-0.5 - mus) / sigmas)
    return np.asarray(((upper - lower) / inside) @ mixture, dtype=np.float64)


def pearson_divergence(domain: Domain, top: np.ndarray | list[int], everyone: np.ndarray | list[int]) -> float:
    """The Pearson divergence of the estimate from the top trials' values against the
    estimate from all values: 0 when they agree."""
    categorical = domain.kind == "categorical"
    pdf_top = _grid_pdf(_grid_counts(domain, top), categorical) + 1e-12
    pdf_all = _grid_pdf(_grid_counts(domain, everyone), categorical) + 1e-12
    return float(pdf_all @ ((pdf_top / pdf_all - 1.0) ** 2))


def top_quantile(numbers: np.ndarray, minimize: bool, gamma: float = GAMMA) -> np.ndarray:
    """Which of ``numbers`` are in the best ``gamma`` quantile (ties with the cut included)."""
    loss = numbers if minimize else -numbers
    cut = int(math.ceil(gamma * loss.size)) - 1
    return loss <= np.partition(loss, cut)[cut]


def _values(domain: Domain, raw: list[Any]) -> np.ndarray | list[int]:
    """Trials' values as the estimator takes them; Unscorable if one does not fit the domain."""
    if domain.kind == "categorical":
        index = {choice: i for i, choice in enumerate(domain.choices)}
        try:
            return [index[choice_key(value)] for value in raw]
        except (KeyError, TypeError):
            raise Unscorable("a trial has a value that is not one of the choices (the search space "
                             "changed, or the trial was added by hand)") from None
    if not {type(value) for value in raw} <= {int, float}:  # not bool, None, text
        raise Unscorable("a trial has no number for it (a conditional or nested search space)")
    try:
        values = np.asarray(raw, dtype=np.float64)
    except OverflowError:  # an integer beyond any float
        raise Unscorable("a trial has a value that is not a finite number") from None
    if not np.all(np.isfinite(values)):
        raise Unscorable("a trial has a value that is not a finite number")
    if domain.log and np.any(values <= 0):
        raise Unscorable("a trial has a value of 0 or less on a log axis")
    return values


def importances(parameters: list[dict[str, Any]], numbers: Sequence[float], space: dict[str, Any],
                minimize: bool, gamma: float = GAMMA) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """PED-ANOVA importance of each search-space parameter, from trials' ``parameters`` and
    their finite final ``numbers`` (same order): ``[{"name", "importance"}]`` most important
    first (summing to 1, or all 0 when no parameter makes a difference), and the parameters
    skipped, each with the reason."""
    results = np.asarray(numbers, dtype=np.float64)
    is_top = top_quantile(results, minimize, gamma)
    divergences: dict[str, float] = {}
    skipped: list[dict[str, str]] = []
    for name, spec in space.items():
        raw = [trial.get(name) for trial in parameters]
        try:
            domain = domain_of(spec, raw)
            values = _values(domain, raw)
        except Unscorable as why:
            skipped.append({"name": name, "reason": str(why)})
            continue
        if domain.single():
            divergences[name] = 0.0  # one value: nothing to tell apart
            continue
        top = [v for v, keep in zip(values, is_top) if keep] if isinstance(values, list) else values[is_top]
        divergences[name] = pearson_divergence(domain, top, values)
    total = sum(divergences.values())
    ranking = sorted(divergences.items(), key=lambda item: -item[1])
    scored = [{"name": name, "importance": value / total if total > 0 else 0.0} for name, value in ranking]  # stable: equals in the search space's order
    return scored, skipped


def importance_view(store: Store, key: str | None, keys: list[str] | None = None) -> dict[str, Any]:
    """``GET /api/v1/expmgr/importance?key=``: the importances under result ``key`` (default:
    ``default``), the trials counted, γ and how many were in the top; ``reason`` instead
    when there are too few trials or nothing to score. A key no final result has is a
    RequestError (400). ``keys``: the result keys when known (the server's facts), else read
    from the store."""
    with store.snapshot():
        profile = store.profile()
        key = checked_key(key, stored_result_keys(store) if keys is None else keys)
        finals = store.final_results()
    scored_trials = numbers_under_key(finals, key)
    minimize = profile.minimizes
    space = profile.config.get("searchSpace") or {}
    answer: dict[str, Any] = {"key": key, "method": "PED-ANOVA", "gamma": GAMMA,
                              "optimizeMode": "minimize" if minimize else "maximize",
                              "trials": len(scored_trials), "topTrials": 0, "parameters": [], "skipped": []}
    if len(scored_trials) < MIN_TRIALS:
        answer["reason"] = (f"importance needs at least {MIN_TRIALS} trials with a finite final result "
                            f"under {key!r}; there are {len(scored_trials)}")
        return answer
    if not isinstance(space, dict) or not space:
        answer["reason"] = "the experiment has no search space to score"
        return answer
    numbers = [number for *_, number in scored_trials]
    answer["topTrials"] = int(top_quantile(np.asarray(numbers, dtype=np.float64), minimize).sum())
    scored, skipped = importances([parameters for _, _, parameters, _ in scored_trials], numbers, space, minimize)
    answer["parameters"], answer["skipped"] = scored, skipped
    if not scored:
        answer["reason"] = "no parameter of the search space could be scored (see skipped)"
    return answer
