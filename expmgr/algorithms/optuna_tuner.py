"""The Optuna bridge: an Optuna sampler (TPE, CMA-ES, GP, NSGA-II, QMC, Random)
proposes the parameters, driven with ask/tell on an in-memory study.

Needs the optional ``optuna`` package (``pip install 'expmgr[optuna]'``), imported
only when the tuner is created. Each parameter of the NNI search space becomes an
Optuna distribution; parameters inside a nested choice are asked for only when their
option is chosen (define-by-run). With ``objectives`` the study has several
directions and final results are dicts with one entry per objective::

    tuner = OptunaTuner("NSGAII", objectives={"default": "maximize", "latency": "minimize"}, seed=1)

How each NNI type maps to Optuna (``name`` is ``model/0/lr`` for ``lr`` in option 0 of ``model``):

- ``choice``: a categorical distribution of option indices; ``randint [a, b)``: integers ``a .. b-1``;
- ``uniform`` / ``loguniform``: floats (``log=True`` for the latter);
- ``quniform``: floats with ``step=q`` between the multiples of q nearest to low and high,
  then clipped to ``[low, high]`` (NNI's values exactly);
- ``qloguniform``: Optuna has no stepped log distribution, so the sampler proposes a
  log-uniform float and the trial gets it rounded to q and clipped (the sampler learns
  from the value it proposed);
- ``normal`` / ``qnormal`` / ``lognormal`` / ``qlognormal``: Optuna has no normal
  distribution; they become uniform over ``mu ± 4 sigma`` (over ``exp(mu ± 4 sigma)`` on a
  log scale for the lognormal ones), stepped or rounded as above. Values beyond 4 sigma
  are never proposed, and imported ones there are skipped.

Over 450 lines: one bridge; the mapping above (``_Parameter``) and the ask/tell tuner
change together whenever Optuna's distributions or study API do.
"""
from __future__ import annotations

import copy
import importlib.util
import inspect
import json
import logging
import math
import warnings
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

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
    NoMoreTrialError,
    OptimizeMode,
    Tuner,
    extract_scalar_reward,
)

_logger = logging.getLogger("nni.tuner.optuna")


@dataclass(frozen=True)
class _SamplerInfo:
    name: str
    """The classArgs spelling."""
    cls: str
    """Its class in ``optuna.samplers``."""
    needs: tuple[str, ...] = ()
    """Packages Optuna imports for it, which Optuna itself does not depend on."""
    multi_objective: bool = True
    quiet: tuple[str, ...] = ()
    """Its constructor's ``warn_*`` flags set to False unless sampler_args set them: falling
    back to independent sampling (categorical parameters, nested choices) is expected
    here, and Optuna would warn on every trial."""


SAMPLERS: dict[str, _SamplerInfo] = {
    info.name.lower(): info for info in (
        _SamplerInfo("TPE", "TPESampler"),
        _SamplerInfo("CmaEs", "CmaEsSampler", needs=("cmaes",), multi_objective=False,
                     quiet=("warn_independent_sampling",)),
        _SamplerInfo("GP", "GPSampler", needs=("torch", "scipy"), quiet=("warn_independent_sampling",)),
        _SamplerInfo("NSGAII", "NSGAIISampler"),
        _SamplerInfo("QMC", "QMCSampler", needs=("scipy",),
                     quiet=("warn_independent_sampling", "warn_asynchronous_seeding")),
        _SamplerInfo("Random", "RandomSampler"),
    )
}
"""The ``sampler`` class argument (any case) -> the Optuna sampler."""

NORMAL_RANGE = 4.0
"""Normal types are searched over ``mu ± NORMAL_RANGE * sigma``."""

_SAMPLER_ASKS = 10
"""Suggestions asked of the sampler before a point already tried is replaced by a random one."""
_RANDOM_DRAWS = 1000
"""Random draws that must all hit tried points before the space counts as exhausted."""


def _canonical(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


def _import_optuna() -> Any:
    try:
        import optuna
    except ImportError as exc:
        if exc.name is not None and exc.name.split(".")[0] != "optuna":
            raise AlgorithmError(f"Optuna tuner: importing optuna failed: {exc}") from exc
        raise AlgorithmError(
            "the Optuna tuner needs the optuna package, which is not installed: pip install 'expmgr[optuna]'"
        ) from exc
    return optuna


class _Parameter:
    """One search-space parameter as an Optuna distribution, with the conversions both ways."""

    def __init__(self, spec: ParameterSpec, optuna: Any) -> None:
        self.spec = spec
        self.name = "/".join(str(part) for part in spec.key)
        self.rounds = False
        """The sampler's float is rounded to q on the way out (q-log types)."""
        distributions = optuna.distributions
        if spec.categorical:
            self.distribution = distributions.CategoricalDistribution(tuple(range(len(spec.values))))
        elif spec.type == RANDINT:
            self.distribution = distributions.IntDistribution(int(spec.values[0]), int(spec.values[1]) - 1)
        else:
            if spec.normal:
                low = spec.mu - NORMAL_RANGE * spec.sigma
                high = spec.mu + NORMAL_RANGE * spec.sigma
                if spec.log:
                    low, high = math.exp(low), math.exp(high)
            else:
                low, high = spec.bounds()
            if spec.q is not None and not spec.log:
                step = spec.q
                low, high = self._on_grid(low), self._on_grid(high)
                self.distribution = distributions.FloatDistribution(low, high, step=step)
            else:
                self.rounds = spec.q is not None
                self.distribution = distributions.FloatDistribution(low, high, log=spec.log)

    def _on_grid(self, x: float) -> float:
        """The multiple of q nearest x, computed in decimal so Optuna sees an exact grid."""
        q = self.spec.step()
        return float(Decimal(repr(q)) * round(x / q))

    def suggest(self, trial: Any) -> Any:
        d = self.distribution
        if self.spec.categorical:
            return trial.suggest_categorical(self.name, d.choices)
        if self.spec.type == RANDINT:
            return trial.suggest_int(self.name, d.low, d.high)
        return trial.suggest_float(self.name, d.low, d.high, step=d.step, log=d.log)

    def draw(self, rng: Any) -> Any:
        """A uniform random value of the distribution (the fallback for repeated points)."""
        d = self.distribution
        if self.spec.categorical:
            return d.choices[int(rng.integers(len(d.choices)))]
        if self.spec.type == RANDINT:
            return int(rng.integers(d.low, d.high + 1))
        if d.step is not None:
            return self._on_grid(d.low + d.step * int(rng.integers(round((d.high - d.low) / d.step) + 1)))
        if d.log:
            return float(math.exp(rng.uniform(math.log(d.low), math.log(d.high))))
        return float(rng.uniform(d.low, d.high))

    def _contains(self, x: Any) -> bool:
        d = self.distribution
        if self.spec.categorical:
            return x in d.choices
        return d.low <= x <= d.high  # on the step grid by construction

    def to_flat(self, x: Any) -> Any:
        """Our flat value (option index for a choice) of the sampler's value."""
        if self.spec.categorical or self.spec.type == RANDINT:
            return int(x)
        return self.spec.finish(float(x))

    def from_flat(self, value: Any) -> Any:
        """The sampler's value for our flat value; ValueError when the distribution cannot give it."""
        if self.spec.categorical or self.spec.type == RANDINT:
            x: Any = int(value)
        elif self.distribution.step is not None:
            x = self._on_grid(float(value))
        elif self.rounds:
            x = min(max(float(value), self.distribution.low), self.distribution.high)
        else:
            x = float(value)
        if not self._contains(x) or not _same(self.to_flat(x), value):
            raise ValueError(f"parameter {self.spec.path!r}: {value!r} is not a value the Optuna search can give")
        return x


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


@dataclass
class _Running:
    trial: Any
    """The study's trial, or None when it belongs to a study replaced by a new search space."""


class OptunaTuner(Tuner):
    """An Optuna sampler behind NNI's tuner interface.

    ``sampler``: TPE, CmaEs, GP, NSGAII, QMC or Random (any case); ``sampler_args``:
    keyword arguments of that Optuna sampler's constructor; ``optimize_mode`` for a
    single objective (the result's ``default``); ``objectives``: metric name ->
    ``maximize`` / ``minimize`` for several; ``seed``: the sampler's seed.
    """

    def __init__(
        self,
        sampler: str = "TPE",
        sampler_args: dict | None = None,
        optimize_mode: str = "maximize",
        objectives: dict | None = None,
        seed: int | None = None,
    ) -> None:
        self.optimize_mode = OptimizeMode.parse(optimize_mode)
        self.objectives = _parse_objectives(objectives)
        self._rng = make_rng(seed)
        info = SAMPLERS.get(sampler.lower()) if isinstance(sampler, str) else None
        if info is None:
            known = ", ".join(i.name for i in SAMPLERS.values())
            raise AlgorithmError(f"Optuna tuner: unknown sampler {sampler!r}; known samplers are: {known}")
        if self.objectives is not None and len(self.objectives) > 1 and not info.multi_objective:
            raise AlgorithmError(
                f"Optuna tuner: sampler {info.name!r} optimizes one objective only, objectives has"
                f" {len(self.objectives)}; use NSGAII, TPE, GP, QMC or Random"
            )
        if sampler_args is not None and not isinstance(sampler_args, dict):
            raise AlgorithmError(f"Optuna tuner: sampler_args must be a mapping, got {sampler_args!r}")
        if sampler_args and "seed" in sampler_args:
            raise AlgorithmError("Optuna tuner: give the seed as the seed class argument, not in sampler_args")
        self._optuna = optuna = _import_optuna()
        missing = [name for name in info.needs if importlib.util.find_spec(name) is None]
        if missing:
            raise AlgorithmError(
                f"Optuna tuner: sampler {info.name!r} needs {' and '.join(missing)}, which Optuna does not"
                f" install: pip install {' '.join(missing)}"
            )
        cls = getattr(optuna.samplers, info.cls, None)
        if cls is None:
            raise AlgorithmError(
                f"Optuna tuner: optuna {optuna.__version__} has no {info.cls}; upgrade optuna for sampler {info.name!r}"
            )
        self._quiet_optuna_logging()
        self.sampler = self._make_sampler(info, cls, dict(sampler_args or {}), seed)
        self.study = self._new_study()
        """The in-memory Optuna study behind the tuner, for inspection (``best_trials``)."""
        self._parameters: list[_Parameter] | None = None
        self._running: dict[int, _Running] = {}
        self._tried: set[str] = set()
        self._results: list[tuple[dict, list[float]]] = []
        """Every result told to the study, as (parameters, values), to carry over to a new space."""

    # -- the Tuner interface ------------------------------------------------

    def update_search_space(self, search_space: dict) -> None:
        """Take a new space; with changed parameters a new study learns the results that fit it."""
        parameters = [_Parameter(spec, self._optuna) for spec in parse_search_space(search_space)]
        names = [p.name for p in parameters]
        duplicated = sorted({name for name in names if names.count(name) > 1})
        if duplicated:
            raise AlgorithmError(f"Optuna tuner: parameter names {duplicated} appear twice in the search space")
        old = self._parameters
        self._parameters = parameters
        if old is None or [(p.name, p.distribution) for p in old] == [(p.name, p.distribution) for p in parameters]:
            return
        self.study = self._new_study()
        self._running = {pid: _Running(None) for pid in self._running}
        results, self._results = self._results, []
        for params, values in results:
            fitted = self._fit(params)
            if fitted is not None:
                self._add_finished(*fitted, values)

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict:
        parameters = self._require_parameters()
        for _ in range(_SAMPLER_ASKS):
            trial, flat = self._ask()
            params = format_parameters(flat, [p.spec for p in parameters])
            if _canonical(params) not in self._tried:
                break
            self.study.tell(trial, state=self._optuna.trial.TrialState.FAIL)  # a repeat: ask again
        else:
            trial, params = self._ask_random_untried()
        self._tried.add(_canonical(params))
        self._running[parameter_id] = _Running(trial)
        return params

    def receive_trial_result(self, parameter_id: int, parameters: dict, value: Any, **kwargs: Any) -> None:
        values = self._values(value)
        running = self._running.pop(parameter_id, None)
        if any(math.isnan(v) for v in values):
            _logger.warning("Optuna: parameter %s reported NaN (%r); counted as a failed trial", parameter_id, value)
            if running is not None and running.trial is not None:
                self.study.tell(running.trial, state=self._optuna.trial.TrialState.FAIL)
            return
        if running is not None and running.trial is not None:
            self.study.tell(running.trial, values)
            self._results.append((copy.deepcopy(parameters), values))
            return
        # Asked by an earlier tuner (a resumed experiment) or under an earlier search space.
        fitted = self._fit(parameters, f"the result of parameter {parameter_id}")
        if fitted is not None:
            self._tried.add(_canonical(fitted[1]))
            self._add_finished(*fitted, values)

    def trial_end(self, parameter_id: int, success: bool, **kwargs: Any) -> None:
        """A trial that ended without a final result is a failed Optuna trial."""
        running = self._running.pop(parameter_id, None)
        if running is not None and running.trial is not None:
            self.study.tell(running.trial, state=self._optuna.trial.TrialState.FAIL)

    def import_data(self, data: list[dict]) -> None:
        """Add finished trials to the study; points are remembered as tried even without a value."""
        self._require_parameters()
        for number, record in enumerate(data):
            parameters = record.get("parameter") if isinstance(record, dict) else None
            if not isinstance(parameters, dict):
                _logger.warning("Optuna: skipping imported record %d: no dict of parameters", number)
                continue
            fitted = self._fit(parameters, f"imported record {number}")
            self._tried.add(_canonical(fitted[1] if fitted is not None else parameters))
            if fitted is None or record.get("value") is None:
                continue
            try:
                values = self._values(record["value"])
            except AlgorithmError as exc:
                _logger.warning("Optuna: skipping imported record %d: %s", number, exc)
                continue
            if any(math.isnan(v) for v in values):
                continue
            self._add_finished(*fitted, values)

    # -- Optuna ---------------------------------------------------------------

    def _quiet_optuna_logging(self) -> None:
        """Optuna logs each trial at INFO to its own stderr handler; keep its warnings,
        through our logging configuration instead."""
        optuna = self._optuna
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        optuna.logging.disable_default_handler()
        optuna.logging.enable_propagation()

    def _make_sampler(self, info: _SamplerInfo, cls: type, args: dict, seed: int | None) -> Any:
        accepted = inspect.signature(cls).parameters
        for flag in info.quiet:
            if flag in accepted:
                args.setdefault(flag, False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", self._optuna.exceptions.ExperimentalWarning)
            try:
                return cls(seed=seed, **args)
            except (TypeError, ValueError) as exc:
                raise AlgorithmError(
                    f"Optuna tuner: sampler_args {args!r} do not fit optuna.samplers.{info.cls}: {exc}"
                ) from exc

    def _new_study(self) -> Any:
        if self.objectives is None:
            directions = [self.optimize_mode.value]
        else:
            directions = [mode.value for mode in self.objectives.values()]
        return self._optuna.create_study(directions=directions, sampler=self.sampler)

    def _ask(self) -> tuple[Any, dict[Key, Any]]:
        """A new trial and its flat values, asking only for the parameters of chosen options."""
        try:
            trial = self.study.ask()
            flat: dict[Key, Any] = {}
            for parameter in self._require_parameters():
                if parameter.spec.is_active(flat):
                    flat[parameter.spec.key] = parameter.to_flat(parameter.suggest(trial))
        except (ValueError, RuntimeError) as exc:
            raise AlgorithmError(f"Optuna tuner: the sampler failed: {type(exc).__name__}: {exc}") from exc
        return trial, flat

    def _ask_random_untried(self) -> tuple[Any, dict]:
        """A trial at a random point not tried yet (the sampler kept proposing tried ones)."""
        parameters = self._require_parameters()
        specs = [p.spec for p in parameters]
        for _ in range(_RANDOM_DRAWS):
            flat: dict[Key, Any] = {}
            fixed: dict[str, Any] = {}
            for parameter in parameters:
                if parameter.spec.is_active(flat):
                    fixed[parameter.name] = parameter.draw(self._rng)
                    flat[parameter.spec.key] = parameter.to_flat(fixed[parameter.name])
            params = format_parameters(flat, specs)
            if _canonical(params) not in self._tried:
                self.study.enqueue_trial(fixed)
                trial, flat = self._ask()
                return trial, format_parameters(flat, specs)
        raise NoMoreTrialError(
            f"Optuna tuner: {_RANDOM_DRAWS} random points were all tried already; the search space looks exhausted"
        )

    def _fit(self, parameters: dict, what: str | None = None) -> tuple[dict[str, Any], dict] | None:
        """The sampler's values for NNI-shaped parameters and the parameters as we would
        generate them, or None (with a warning naming ``what``) when they do not fit the space."""
        parameters_list = self._require_parameters()
        specs = [p.spec for p in parameters_list]
        try:
            flat = deformat_parameters(parameters, specs)
            fixed = {p.name: p.from_flat(flat[p.spec.key]) for p in parameters_list if p.spec.key in flat}
        except (ValueError, TypeError) as exc:
            if what is not None:
                _logger.warning("Optuna: ignoring %s, it does not fit the search space: %s", what, exc)
            return None
        canonical_flat = {p.spec.key: p.to_flat(fixed[p.name]) for p in parameters_list if p.name in fixed}
        return fixed, format_parameters(canonical_flat, specs)

    def _add_finished(self, fixed: dict[str, Any], params: dict, values: list[float]) -> None:
        distributions = {p.name: p.distribution for p in self._require_parameters() if p.name in fixed}
        trial = self._optuna.trial.create_trial(params=fixed, distributions=distributions, values=values)
        self.study.add_trial(trial)
        self._results.append((params, values))

    # -- results ------------------------------------------------------------------

    def _values(self, value: Any) -> list[float]:
        """The study's values of a final result, in objective order; AlgorithmError naming what is wrong."""
        if self.objectives is None:
            return [extract_scalar_reward(value)]
        if _is_number(value):
            value = {"default": value}
        names = list(self.objectives)
        if not isinstance(value, dict):
            raise AlgorithmError(
                f"Optuna tuner: with objectives {names}, a final result must be a dict with those keys, got {value!r}"
            )
        values = []
        for name in names:
            if name not in value:
                raise AlgorithmError(
                    f"Optuna tuner: the final result has no {name!r}, one of the objectives {names};"
                    f" got keys {sorted(value)}"
                )
            if not _is_number(value[name]):
                raise AlgorithmError(f"Optuna tuner: objective {name!r} must be a number, got {value[name]!r}")
            values.append(float(value[name]))
        return values

    def _require_parameters(self) -> list[_Parameter]:
        if self._parameters is None:
            raise AlgorithmError("Optuna tuner: update_search_space must be called first")
        return self._parameters


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _parse_objectives(objectives: Any) -> dict[str, OptimizeMode] | None:
    if objectives is None:
        return None
    if not isinstance(objectives, dict) or not objectives:
        raise AlgorithmError(
            "Optuna tuner: objectives must be a mapping of metric names to maximize/minimize,"
            f" such as {{default: maximize, latency: minimize}}; got {objectives!r}"
        )
    parsed = {}
    for name, mode in objectives.items():
        if not isinstance(name, str) or not name:
            raise AlgorithmError(f"Optuna tuner: objectives keys must be metric names, got {name!r}")
        try:
            parsed[name] = OptimizeMode.parse(mode)
        except AlgorithmError:
            raise AlgorithmError(
                f"Optuna tuner: objectives {name!r} must be 'maximize' or 'minimize', got {mode!r}"
            ) from None
    return parsed
