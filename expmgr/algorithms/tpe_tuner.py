"""The TPE tuner: Tree-structured Parzen Estimator (Bergstra et al., 2011), after
NNI 2.x's TPE and hyperopt.

For the first ``n_startup_jobs`` results of a parameter it samples at random.
After that, per parameter, past results are split into the best few ("good",
``ceil(gamma * sqrt(n))`` of them, as in NNI and hyperopt) and the rest ("bad"); each side gets an
adaptive Parzen estimator (a truncated Gaussian mixture with a prior component,
in log space for log types, scoring q types by their q-bucket's probability;
weighted counts for a choice or a randint, which NNI also treats as categories);
``n_ei_candidates`` values are drawn from the good model and the one maximizing
l(x) / g(x) wins.
Parameters inside a nested choice learn only from trials where their branch
was chosen. Parameters handed out but not reported yet count as results with a
"constant liar" loss (the best, worst or mean so far), so concurrent trials
explore different places::

    tuner = TpeTuner("maximize", seed=1, tpe_args={"n_startup_jobs": 10})
"""
from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from expmgr.algorithms.search_space import (
    RANDINT,
    Key,
    ParameterSpec,
    deformat_parameters,
    format_parameters,
    make_rng,
    parse_search_space,
)
from expmgr.algorithms.tuner import (
    AlgorithmError,
    OptimizeMode,
    Tuner,
    extract_scalar_reward,
)

_logger = logging.getLogger("nni.tuner.tpe")

_LIAR_TYPES = ("best", "worst", "mean", None)
_TINY = 1e-300


@dataclass(frozen=True)
class TpeArguments:
    """The ``tpe_args`` class argument; names and defaults are NNI's."""

    constant_liar_type: str | None = "best"
    """Loss assumed for pending trials: 'best', 'worst', 'mean', or None for no liar."""
    n_startup_jobs: int = 20
    """Results a parameter needs before TPE replaces random sampling."""
    n_ei_candidates: int = 24
    """Candidates drawn from the good model per suggestion."""
    linear_forgetting: int = 25
    """Only the most recent this-many results weigh fully; older ones fade linearly."""
    prior_weight: float = 1.0
    """Weight of the prior (the search space's own distribution) in each model."""
    gamma: float = 0.25
    """Good results are the best ``ceil(gamma * sqrt(n))`` of n."""

    @classmethod
    def parse(cls, tpe_args: dict | None) -> TpeArguments:
        """Validate a ``tpe_args`` dict; unknown keys and bad values are AlgorithmErrors."""
        tpe_args = dict(tpe_args or {})
        known = [f.name for f in fields(cls)]
        for key in tpe_args:
            if key not in known:
                raise AlgorithmError(
                    f"unknown tpe_args key {key!r}; known keys are: {', '.join(known)}"
                )
        args = cls(**tpe_args)
        if args.constant_liar_type not in _LIAR_TYPES:
            raise AlgorithmError(
                "tpe_args constant_liar_type must be 'best', 'worst', 'mean' or null,"
                f" got {args.constant_liar_type!r}"
            )
        for name, minimum in (("n_startup_jobs", 0), ("n_ei_candidates", 1), ("linear_forgetting", 0)):
            value = getattr(args, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise AlgorithmError(f"tpe_args {name} must be an integer >= {minimum}, got {value!r}")
        if not _is_number(args.prior_weight) or args.prior_weight < 0:
            raise AlgorithmError(f"tpe_args prior_weight must be a number >= 0, got {args.prior_weight!r}")
        if not _is_number(args.gamma) or not 0 < args.gamma <= 1:
            raise AlgorithmError(f"tpe_args gamma must be a number in (0, 1], got {args.gamma!r}")
        return args


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class _Record:
    value: Any
    """The parameter's flat value (option index for a choice)."""
    loss: float
    """Smaller is better, whatever the optimize mode."""


class TpeTuner(Tuner):
    """NNI's TPE tuner: ``optimize_mode``, ``seed`` and ``tpe_args`` as NNI's classArgs."""

    def __init__(
        self,
        optimize_mode: str = "minimize",
        seed: int | None = None,
        tpe_args: dict | None = None,
    ) -> None:
        self.optimize_mode = OptimizeMode.parse(optimize_mode)
        self.args = TpeArguments.parse(tpe_args)
        self._rng = make_rng(seed)
        self._specs: list[ParameterSpec] | None = None
        self._history: dict[Key, list[_Record]] = {}
        self._pending: dict[int, dict[Key, Any]] = {}
        self._losses: list[float] = []

    # -- the Tuner interface ------------------------------------------------

    def update_search_space(self, search_space: dict) -> None:
        """Take a new space; results for parameters whose definition is unchanged are kept."""
        specs = parse_search_space(search_space)
        if self._specs is not None:
            old = {spec.key: (spec.type, spec.values) for spec in self._specs}
            kept = {spec.key for spec in specs if old.get(spec.key) == (spec.type, spec.values)}
            self._history = {k: v for k, v in self._history.items() if k in kept}
            self._pending = {
                pid: {k: v for k, v in flat.items() if k in kept} for pid, flat in self._pending.items()
            }
        self._specs = specs

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict:
        specs = self._require_specs()
        history = self._history_with_lies()
        flat: dict[Key, Any] = {}
        for spec in specs:
            if spec.is_active(flat):
                flat[spec.key] = self._suggest(spec, history.get(spec.key, []))
        self._pending[parameter_id] = flat
        return format_parameters(flat, specs)

    def receive_trial_result(self, parameter_id: int, parameters: dict, value: Any, **kwargs: Any) -> None:
        reward = extract_scalar_reward(value)
        flat = self._pending.pop(parameter_id, None)
        if flat is None:
            flat = self._deformat(parameters, f"result of parameter {parameter_id}")
            if flat is None:
                return
        self._record(flat, reward)

    def trial_end(self, parameter_id: int, success: bool, **kwargs: Any) -> None:
        """A trial that ended without reporting is no longer pending."""
        self._pending.pop(parameter_id, None)

    def import_data(self, data: list[dict]) -> None:
        """Learn from ``[{"parameter": {...}, "value": ...}]``; records that do not fit are skipped."""
        self._require_specs()
        for number, record in enumerate(data):
            if record.get("value") is None:
                continue  # a trial that ended without a result (resume imports every trial)
            try:
                reward = extract_scalar_reward(record["value"])
                parameters = record["parameter"]
            except (AlgorithmError, KeyError, TypeError) as exc:
                _logger.warning("TPE: skipping imported record %d: %s", number, exc)
                continue
            flat = self._deformat(parameters, f"imported record {number}")
            if flat is not None:
                self._record(flat, reward)

    # -- bookkeeping ----------------------------------------------------------

    def _require_specs(self) -> list[ParameterSpec]:
        if self._specs is None:
            raise AlgorithmError("TPE tuner: update_search_space must be called first")
        return self._specs

    def _deformat(self, parameters: Any, what: str) -> dict[Key, Any] | None:
        try:
            if not isinstance(parameters, dict):
                raise ValueError(f"parameters should be a dict, got {parameters!r}")
            return deformat_parameters(parameters, self._require_specs())
        except ValueError as exc:
            _logger.warning("TPE: ignoring %s, it does not fit the search space: %s", what, exc)
            return None

    def _record(self, flat: dict[Key, Any], reward: float) -> None:
        loss = reward if self.optimize_mode is OptimizeMode.Minimize else -reward
        if math.isnan(loss):
            _logger.warning("TPE: ignoring a NaN final metric")
            return
        self._losses.append(loss)
        for key, value in flat.items():
            self._history.setdefault(key, []).append(_Record(value, loss))

    def _history_with_lies(self) -> dict[Key, list[_Record]]:
        liar = self.args.constant_liar_type
        if liar is None or not self._pending or not self._losses:
            return self._history
        if liar == "best":
            lie = min(self._losses)
        elif liar == "worst":
            lie = max(self._losses)
        else:
            lie = float(np.mean(self._losses))
        history = {key: list(records) for key, records in self._history.items()}
        for flat in self._pending.values():
            for key, value in flat.items():
                history.setdefault(key, []).append(_Record(value, lie))
        return history

    # -- the estimator ----------------------------------------------------------

    def _suggest(self, spec: ParameterSpec, records: list[_Record]) -> Any:
        if len(records) < self.args.n_startup_jobs:
            return spec.sample(self._rng)
        good, bad = _split_history(records, self.args.gamma, self.args.linear_forgetting)
        if spec.categorical:
            return self._suggest_choice(len(spec.values), good, bad, offset=0)
        if spec.type == RANDINT:
            lower, upper = int(spec.values[0]), int(spec.values[1])
            return self._suggest_choice(upper - lower, good, bad, offset=lower)
        return self._suggest_numeric(spec, good, bad)

    def _suggest_choice(self, size: int, good: list[_Record], bad: list[_Record], offset: int) -> int:
        """Choices (option indices) and randints (``offset`` + index) as weighted categories."""
        good_p = self._categorical_model(good, size, offset)
        bad_p = self._categorical_model(bad, size, offset)
        candidates = self._rng.choice(size, size=self.args.n_ei_candidates, p=good_p)
        with np.errstate(divide="ignore"):  # prior_weight 0 can leave categories at p = 0
            scores = np.log(good_p[candidates]) - np.log(bad_p[candidates])
        return offset + int(candidates[int(np.argmax(scores))])

    def _categorical_model(self, records: list[_Record], size: int, offset: int) -> np.ndarray:
        weights = _forgetting_weights(len(records), self.args.linear_forgetting)
        indices = np.array([r.value - offset for r in records], dtype=int)
        counts = np.bincount(indices, weights=weights, minlength=size)
        pseudo_counts = counts + self.args.prior_weight
        if pseudo_counts.sum() == 0:
            pseudo_counts = np.ones(size)
        return pseudo_counts / pseudo_counts.sum()

    def _suggest_numeric(self, spec: ParameterSpec, good: list[_Record], bad: list[_Record]) -> float:
        lo, hi = _model_bounds(spec)
        if spec.normal:
            prior_mu, prior_sigma = spec.mu, spec.sigma
        else:
            prior_mu, prior_sigma = (lo + hi) / 2, hi - lo
        good_model = self._parzen([_to_model(spec, r.value) for r in good], prior_mu, prior_sigma)
        bad_model = self._parzen([_to_model(spec, r.value) for r in bad], prior_mu, prior_sigma)
        draws = _sample_mixture(*good_model, lo, hi, self.args.n_ei_candidates, self._rng)
        candidates = [spec.finish(math.exp(z) if spec.log else z) for z in draws]
        scores = (
            _log_likelihood(spec, candidates, *good_model, lo, hi)
            - _log_likelihood(spec, candidates, *bad_model, lo, hi)
        )
        return candidates[int(np.argmax(scores))]

    def _parzen(
        self, observations: Sequence[float], prior_mu: float, prior_sigma: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Hyperopt's adaptive Parzen estimator: (weights, mus, sigmas) of a Gaussian mixture.

        Each observation is a component whose width is the distance to its farther
        neighbour, clipped to [prior_sigma / min(100, n + 1), prior_sigma]; the prior
        is one more component with ``prior_weight``.
        """
        obs = np.asarray(observations, dtype=float)
        order = np.argsort(obs, kind="stable")
        prior_pos = int(np.searchsorted(obs[order], prior_mu))
        mus = np.insert(obs[order], prior_pos, prior_mu)
        if len(obs) == 0:
            sigmas = np.array([prior_sigma])
        elif len(obs) == 1:
            sigmas = np.full(2, prior_sigma * 0.5)
        else:
            sigmas = np.empty(len(mus))
            sigmas[1:-1] = np.maximum(mus[1:-1] - mus[:-2], mus[2:] - mus[1:-1])
            sigmas[0] = mus[1] - mus[0]
            sigmas[-1] = mus[-1] - mus[-2]
        min_sigma = prior_sigma / min(100.0, 1.0 + len(mus))
        sigmas = np.clip(sigmas, min_sigma, prior_sigma)
        sigmas[prior_pos] = prior_sigma
        obs_weights = _forgetting_weights(len(obs), self.args.linear_forgetting)[order]
        weights = np.insert(obs_weights, prior_pos, self.args.prior_weight)
        if weights.sum() == 0:
            weights[prior_pos] = 1.0
        return weights / weights.sum(), mus, sigmas


def _split_history(
    records: list[_Record], gamma: float, linear_forgetting: int
) -> tuple[list[_Record], list[_Record]]:
    """The best ``min(ceil(gamma * sqrt(n)), linear_forgetting)`` records and the rest,
    each in chronological order (so linear forgetting fades the oldest)."""
    n_good = min(int(math.ceil(gamma * math.sqrt(len(records)))), max(linear_forgetting, 1))
    by_loss = sorted(range(len(records)), key=lambda i: records[i].loss)
    good = set(by_loss[:n_good])
    return (
        [r for i, r in enumerate(records) if i in good],
        [r for i, r in enumerate(records) if i not in good],
    )


def _forgetting_weights(n: int, linear_forgetting: int) -> np.ndarray:
    """Weights of n chronological observations: the last ``linear_forgetting`` weigh 1,
    older ones ramp down linearly to 1/n (hyperopt's ``linear_forgetting_weights``)."""
    if n < max(linear_forgetting, 1):
        return np.ones(n)
    ramp = np.linspace(1.0 / n, 1.0, num=n - linear_forgetting)
    return np.concatenate([ramp, np.ones(linear_forgetting)])


def _model_bounds(spec: ParameterSpec) -> tuple[float, float]:
    """The parameter's support in the space the mixture lives in (log space for log types)."""
    if spec.normal:
        return -math.inf, math.inf
    if spec.log:
        return math.log(spec.low), math.log(spec.high)
    return spec.low, spec.high


def _to_model(spec: ParameterSpec, value: float) -> float:
    if spec.log:
        return math.log(max(float(value), spec.q / 2 if spec.q else _TINY))
    return float(value)


def _sample_mixture(
    weights: np.ndarray, mus: np.ndarray, sigmas: np.ndarray,
    lo: float, hi: float, n: int, rng: np.random.Generator,
) -> np.ndarray:
    """n draws from the Gaussian mixture truncated to [lo, hi] (by rejection)."""
    accepted: list[float] = []
    for _ in range(100):
        components = rng.choice(len(weights), size=n, p=weights)
        draws = rng.normal(mus[components], sigmas[components])
        accepted.extend(draws[(draws >= lo) & (draws <= hi)])
        if len(accepted) >= n:
            return np.array(accepted[:n])
    components = rng.choice(len(weights), size=n - len(accepted), p=weights)
    rest = np.clip(mus[components], lo, hi)
    return np.concatenate([np.array(accepted), rest])


def _log_normal_mass(a: float, b: float) -> float:
    """log(Phi(b) - Phi(a)) for a standard normal, accurate in both tails."""
    if a > 0:
        mass = 0.5 * (math.erfc(a / math.sqrt(2)) - math.erfc(b / math.sqrt(2)))
    elif b < 0:
        mass = 0.5 * (math.erfc(-b / math.sqrt(2)) - math.erfc(-a / math.sqrt(2)))
    else:
        mass = 0.5 * (math.erf(b / math.sqrt(2)) - math.erf(a / math.sqrt(2)))
    return math.log(max(mass, _TINY))


_log_normal_mass_v = np.vectorize(_log_normal_mass, otypes=[float])


def _logsumexp(x: np.ndarray, axis: int) -> np.ndarray:
    peak = np.max(x, axis=axis, keepdims=True)
    return np.squeeze(peak, axis=axis) + np.log(np.sum(np.exp(x - peak), axis=axis))


def _log_likelihood(
    spec: ParameterSpec, values: list[float], weights: np.ndarray, mus: np.ndarray,
    sigmas: np.ndarray, lo: float, hi: float,
) -> np.ndarray:
    """log p(value) under the mixture truncated to [lo, hi] as a whole: a density,
    or for q types the probability of the value's q-bucket."""
    with np.errstate(divide="ignore"):  # prior_weight 0 gives the prior a weight of 0
        log_weights = np.log(weights)
    log_accept = _logsumexp(
        log_weights + _log_normal_mass_v((lo - mus) / sigmas, (hi - mus) / sigmas), axis=0
    )
    x = np.asarray(values, dtype=float)[:, None]
    q = spec.q
    if q is None:
        z = np.log(x) if spec.log else x
        log_component = (
            -0.5 * ((z - mus) / sigmas) ** 2 - np.log(sigmas) - 0.5 * math.log(2 * math.pi)
        )
    else:
        real_lo, real_hi = (math.exp(lo), math.exp(hi)) if spec.log else (lo, hi)
        lower = np.maximum(x - q / 2, real_lo)
        upper = np.minimum(x + q / 2, real_hi)
        if spec.log:
            with np.errstate(divide="ignore"):
                lower = np.where(lower > 0, np.log(np.maximum(lower, _TINY)), -math.inf)
                upper = np.log(np.maximum(upper, _TINY))
        log_component = _log_normal_mass_v((lower - mus) / sigmas, (upper - mus) / sigmas)
    return _logsumexp(log_weights + log_component, axis=1) - log_accept
