"""The TPE tuner: Tree-structured Parzen Estimator (Bergstra et al., 2011), with NNI 2.x's
classArgs and the joint ("multivariate") Parzen estimator that Optuna uses by default.

The search space is a tree: the top-level parameters form one group, and the
parameters inside each option of a nested choice form another, used only when that
option is chosen. For a group with fewer than ``n_startup_jobs`` results (trials in
which it was used), parameters are sampled at random. After that, its past results
are split into the best few ("good", ``min(ceil(gamma * n), 25)`` of n, as in Optuna)
and the rest ("bad"). Each side is modelled by a mixture with one component per
result plus a prior component (the search space's own distribution): a component
is a product over the group's parameters of a truncated Gaussian (in log space for
log types; q types and randints, which are ordered numbers here as in Optuna and
unlike NNI, scored by their q-bucket's probability; bandwidths from the distances
to neighbouring results, as in Optuna, but allowed to shrink to 3% of the range so
the good model can refine the best results, and never below a q-step) or of a
smoothed categorical (choices). ``n_ei_candidates`` points are drawn from the good
model (a component, then every parameter from it) and the one maximizing
l(x) / g(x) wins. Unlike NNI's TPE, which models each parameter
on its own, the joint model keeps what went together in good results together.

Parameters handed out but not reported yet count as results with a "constant liar"
loss (the best, worst or mean so far), so concurrent trials explore different
places. The tuner never suggests the same parameters twice, nor imported ones (it
falls back to random untried points, and raises ``NoMoreTrialError`` when a finite
space is used up)::

    tuner = TpeTuner("maximize", seed=1, tpe_args={"n_startup_jobs": 20})

The model (good/bad split, Parzen mixtures) is ``tpe_parzen.py``; it and numpy are imported
at the first suggestion or result, not with the tuner: the experiment process builds one to
check the config's classArgs and search space, and has no use for numpy.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from expmgr.algorithms.space_tuner import SpaceTuner
from expmgr.algorithms.tried_points import TriedPoints
from expmgr.algorithms.search_space import (
    NumpyDraws,
    Key,
    ParameterSpec,
    deformat_parameters,
    format_parameters,
    parse_search_space,
)
from expmgr.algorithms.tuner import AlgorithmError, OptimizeMode, extract_scalar_reward

if TYPE_CHECKING:
    import numpy as np

    from expmgr.algorithms.tpe_parzen import TpeResult


_LIAR_TYPES = ("best", "worst", "mean", None)
_ATTEMPTS = 3
"""Model-based suggestions tried before an already-tried point is replaced by a random untried one."""


@dataclass(frozen=True)
class TpeArguments:
    """The ``tpe_args`` class argument; names are NNI's, defaults NNI's unless noted
    (tests/perf/tuner_quality.py measured the changed ones)."""

    constant_liar_type: str | None = "best"
    """Loss assumed for pending trials: 'best', 'worst', 'mean', or None for no liar."""
    n_startup_jobs: int = 10
    """Results a parameter group needs before TPE replaces random sampling (NNI: 20; Optuna: 10)."""
    n_ei_candidates: int = 24
    """Candidates drawn from the good model per suggestion."""
    linear_forgetting: int = 25
    """Only the most recent this-many results weigh fully; older ones fade linearly."""
    prior_weight: float = 1.0
    """Weight of the prior (the search space's own distribution) in each model."""
    multivariate: bool = True
    """Model the parameters of a group jointly (Optuna's default); False models each
    parameter on its own, as NNI's TPE does. Not an NNI key."""
    gamma: float = 0.1
    """Good results are the best ``min(ceil(gamma * n), linear_forgetting)`` of n, Optuna's
    schedule (NNI's TPE takes ``ceil(gamma * sqrt(n))`` with gamma 0.25, which leaves only
    3 good results of 100 and measured markedly worse)."""

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
        if not isinstance(args.multivariate, bool):
            raise AlgorithmError(f"tpe_args multivariate must be true or false, got {args.multivariate!r}")
        if not _is_number(args.gamma) or not 0 < args.gamma <= 1:
            raise AlgorithmError(f"tpe_args gamma must be a number in (0, 1], got {args.gamma!r}")
        return args


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class TpeTuner(NumpyDraws, SpaceTuner):
    """NNI's TPE tuner: ``optimize_mode``, ``seed`` and ``tpe_args`` as NNI's classArgs."""

    who = "TPE"

    def __init__(
        self,
        optimize_mode: str = "minimize",
        seed: int | None = None,
        tpe_args: dict | None = None,
    ) -> None:
        self.optimize_mode = OptimizeMode.parse(optimize_mode)
        self.args = TpeArguments.parse(tpe_args)
        self._keep_seed(seed)
        self._specs: list[ParameterSpec] | None = None
        self._groups: list[list[ParameterSpec]] = []
        self._results: list[TpeResult] = []
        self._pending: dict[int, dict[Key, Any]] = {}
        self._tried = TriedPoints("TPE tuner")

    # -- the Tuner interface ------------------------------------------------

    def update_search_space(self, search_space: dict) -> None:
        """Take a new space; results for parameters whose definition is unchanged are kept."""
        specs = parse_search_space(search_space)
        if self._specs is not None:
            old = {spec.key: (spec.type, spec.values) for spec in self._specs}
            kept = {spec.key for spec in specs if old.get(spec.key) == (spec.type, spec.values)}
            self._results = [
                dataclasses.replace(r, flat={k: v for k, v in r.flat.items() if k in kept}) for r in self._results
            ]
            self._pending = {
                pid: {k: v for k, v in flat.items() if k in kept} for pid, flat in self._pending.items()
            }
        self._specs = specs
        if self.args.multivariate:
            groups: dict[Key, list[ParameterSpec]] = {}
            for spec in specs:
                groups.setdefault(spec.key[:-1], []).append(spec)
            self._groups = list(groups.values())
        else:
            self._groups = [[spec] for spec in specs]
        self._tried.update_search_space(specs)

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict:
        specs = self._require_specs()
        results = self._results_with_lies()
        for _ in range(_ATTEMPTS):
            flat = self._suggest(results)
            if flat is not None and not self._tried.exhausted(flat):
                params = format_parameters(flat, specs)
                self._tried.add(params)
                break
        else:
            params = self._tried.fresh(lambda: format_parameters(self._suggest([]) or {}, specs), self._rng)
            flat = deformat_parameters(params, specs)
        self._pending[parameter_id] = flat
        return params

    def receive_trial_result(self, parameter_id: int, parameters: dict, value: Any, **kwargs: Any) -> None:
        reward = extract_scalar_reward(value)
        flat = self._pending.pop(parameter_id, None)  # a suggestion's flat values are known
        if flat is None:
            self._tried.add(parameters)
        self._learn(parameters, reward, f"the result of parameter {parameter_id}", flat)

    def trial_end(self, parameter_id: int, success: bool, **kwargs: Any) -> None:
        """A trial that ended without reporting is no longer pending."""
        self._pending.pop(parameter_id, None)

    # -- bookkeeping ----------------------------------------------------------

    def _add_result(self, flat: dict[Key, Any], parameters: dict, loss: float) -> None:
        from expmgr.algorithms.tpe_parzen import TpeResult
        self._results.append(TpeResult(flat, loss))

    def _results_with_lies(self) -> list[TpeResult]:
        import numpy as np

        from expmgr.algorithms.tpe_parzen import TpeResult
        liar = self.args.constant_liar_type
        if liar is None or not self._pending or not self._results:
            return self._results
        losses = [r.loss for r in self._results]
        if liar == "best":
            lie = min(losses)
        elif liar == "worst":
            lie = max(losses)
        else:
            lie = float(np.mean(losses))
        return self._results + [TpeResult(flat, lie) for flat in self._pending.values()]

    # -- the estimator ----------------------------------------------------------

    def _suggest(self, results: list[TpeResult]) -> dict[Key, Any] | None:
        """Flat parameters for a new trial, each active group in turn, parents first; None
        when a group finds no candidate that can still lead to an untried point."""
        flat: dict[Key, Any] = {}
        for group in self._groups:
            if group[0].is_active(flat):  # a group's parameters share their parent option
                values = self._suggest_group(group, results, flat)
                if values is None:
                    return None
                flat.update(values)
        return flat

    def _suggest_group(
        self, group: list[ParameterSpec], results: list[TpeResult], chosen: dict[Key, Any]
    ) -> dict[Key, Any] | None:
        """Values for ``group``, given the parameters ``chosen`` so far."""
        import numpy as np

        from expmgr.algorithms.tpe_parzen import ParzenMixture, split_history
        keys = [spec.key for spec in group]
        used = [r for r in results if all(key in r.flat for key in keys)]
        if len(used) < max(self.args.n_startup_jobs, 1):
            if len(group) > 1 and len(used) < len(results):
                # Some results predate a parameter added to the space: model the others alone.
                suggestion: dict[Key, Any] = {}
                for spec in group:
                    values = self._suggest_group([spec], results, {**chosen, **suggestion})
                    if values is None:
                        return None
                    suggestion.update(values)
                return suggestion
            return {spec.key: spec.sample(self._rng) for spec in group}
        good, bad = split_history(used, self.args.gamma, self.args.linear_forgetting)
        good_model = ParzenMixture(group, good, self.args.prior_weight, self.args.linear_forgetting)
        bad_model = ParzenMixture(group, bad, self.args.prior_weight, self.args.linear_forgetting)
        columns = good_model.sample(self.args.n_ei_candidates, self._rng)
        with np.errstate(invalid="ignore"):  # -inf - -inf where prior_weight 0 leaves gaps
            scores = good_model.log_pdf(columns) - bad_model.log_pdf(columns)
        scores = np.where(np.isnan(scores), -math.inf, scores)
        # The best candidate that can still lead to an untried point (in discrete spaces
        # the best one may have been tried already).
        for index in np.argsort(-scores, kind="stable"):
            candidate = {key: column[index] for key, column in zip(keys, columns)}
            if not self._tried.exhausted({**chosen, **candidate}):
                return candidate
        return None
