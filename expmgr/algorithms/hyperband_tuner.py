"""The Hyperband tuner (Li et al., 2018), after NNI's ``Hyperband``: many random
configurations at a small budget, the best of them again at larger budgets.

A budget is how long a trial trains (epochs, steps, ...). Parameters handed to a
trial carry it under NNI's key ``TRIAL_BUDGET``, beside the search-space values::

    {"lr": 0.01, "TRIAL_BUDGET": 20}     # train for 20 units, report a final result

Bracket s (for s = s_max .. 0, s_max = floor(log_eta R)) runs successive halving:
it draws n = ceil((s_max + 1) / (s + 1) * eta**s) new configurations at budget
floor(R / eta**s); once every trial of that rung has a final result or has ended,
the best n // eta run again, as new trials, at eta times the budget, up to R.
After bracket 0 the cycle starts again at s_max, as in NNI, so the experiment's
maxTrialNumber or maxExperimentDuration ends the search. BOHB (``bohb_tuner``)
reuses this schedule with model-based sampling.
"""
from __future__ import annotations

import copy
import json
import logging
import math
from dataclasses import dataclass, field
from typing import Any, cast

from expmgr.algorithms.arguments import require_int
from expmgr.algorithms.search_space import (
    NumpyDraws,
    ParameterSpec,
    deformat_parameters,
    format_parameters,
    parse_search_space,
    sample,
)
from expmgr.algorithms.tuner import (
    AlgorithmError,
    NoMoreTrialError,
    NoTrialYetError,
    OptimizeMode,
    Tuner,
    extract_scalar_reward,
)

TRIAL_BUDGET = "TRIAL_BUDGET"
"""The key of the budget in the parameters handed to a trial (NNI's name)."""

EXEC_MODES = ("serial", "parallelism")
"""``serial``: one bracket at a time; ``parallelism``: a new bracket starts whenever
the running ones have nothing to hand out (NNI's ``exec_mode``)."""

MAX_DRAWS = 1000
"""Random draws spent looking for a configuration not tried before; when all of
them were tried, the search space is taken as used up."""

_EPSILON = 1e-6
_logger = logging.getLogger("nni.tuner.hyperband")


@dataclass(frozen=True)
class BracketSchedule:
    """Hyperband's brackets between a smallest and a largest budget.

    Bracket ``s`` starts ``size(s)`` configurations at ``budget(s, 0)``; rung ``i``
    of it runs at ``budget(s, i) = max_budget / eta**(s - i)``.
    """

    max_budget: float
    eta: int
    s_max: int
    whole_budgets: bool
    """Round budgets down to integers (Hyperband, as NNI); else keep fractions (BOHB)."""

    @classmethod
    def between(cls, min_budget: float, max_budget: float, eta: int, whole_budgets: bool) -> BracketSchedule:
        s_max = int(math.floor(math.log(max_budget / min_budget) / math.log(eta) + _EPSILON))
        return cls(float(max_budget), eta, s_max, whole_budgets)

    def size(self, s: int) -> int:
        """How many new configurations bracket ``s`` starts with."""
        return int(math.ceil((self.s_max + 1) / (s + 1) * self.eta**s - _EPSILON))

    def budget(self, s: int, rung: int) -> int | float:
        """The budget of rung ``rung`` of bracket ``s`` (an int when it is whole)."""
        raw = self.max_budget / self.eta ** (s - rung)
        if self.whole_budgets:
            return int(math.floor(raw + _EPSILON))
        nearest = round(raw)
        return int(nearest) if abs(raw - nearest) <= 1e-9 * max(1.0, raw) else raw


@dataclass(eq=False)
class _Bracket:
    number: int
    """1, 2, ... in the order brackets start."""
    s: int
    unsampled: int
    """New configurations rung 0 has still to draw."""
    rung: int = 0
    queue: list[_Trial] = field(default_factory=list)
    """Trials of the previous rung whose configurations this rung runs again, not handed out yet."""
    trials: list[_Trial] = field(default_factory=list)
    """This rung's trials handed out so far."""

    def rung_complete(self) -> bool:
        return not self.unsampled and not self.queue and all(t.done for t in self.trials)


@dataclass(eq=False)
class _Trial:
    parameter_id: int
    config: dict
    """The search-space parameters, without the budget."""
    budget: int | float
    bracket: _Bracket
    source: int | None
    """The parameter id of the trial it was promoted from."""
    loss: float | None = None
    """The final result, smaller is better whatever the optimize mode; None without one."""
    done: bool = False
    """It has a final result or has ended."""


class HyperbandTuner(NumpyDraws, Tuner):
    """NNI's Hyperband: ``optimize_mode``, ``R``, ``eta``, ``exec_mode`` and ``seed`` as NNI's classArgs."""

    _name = "Hyperband"

    def __init__(
        self,
        optimize_mode: str = "maximize",
        R: int = 60,
        eta: int = 3,
        exec_mode: str = "parallelism",
        seed: int | None = None,
    ) -> None:
        require_int("R", R, 1)
        require_int("eta", eta, 2)
        if exec_mode not in EXEC_MODES:
            raise AlgorithmError(f"exec_mode must be 'serial' or 'parallelism', got {exec_mode!r}")
        self._setup(
            OptimizeMode.parse(optimize_mode),
            BracketSchedule.between(1, R, eta, whole_budgets=True),
            serial=exec_mode == "serial",
            seed=seed,
        )

    def _setup(self, optimize_mode: OptimizeMode, schedule: BracketSchedule, serial: bool, seed: Any) -> None:
        """The state shared with BOHB, which builds its own schedule."""
        self.optimize_mode = optimize_mode
        self.schedule = schedule
        self._serial = serial
        self._keep_seed(seed)
        self._space: dict | None = None
        self._specs: list[ParameterSpec] = []
        self._brackets: list[_Bracket] = []
        """Brackets with a rung still running, oldest first."""
        self._next_s = schedule.s_max
        self._started = 0
        self._trials: dict[int, _Trial] = {}
        self._tried: set[str] = set()

    # -- the Tuner interface ------------------------------------------------

    def update_search_space(self, search_space: dict) -> None:
        """Take a (new) space; running brackets keep their configurations."""
        if TRIAL_BUDGET in search_space:
            raise AlgorithmError(
                f"{self._name}: the search space has a parameter named {TRIAL_BUDGET!r}, the key that"
                " carries the trial's budget; rename the parameter"
            )
        self._space = search_space
        self._specs = parse_search_space(search_space)

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict:
        """The next configuration with its ``TRIAL_BUDGET``: promotions of the oldest
        bracket first, then new configurations; NoTrialYetError while rungs wait."""
        if self._space is None:
            raise AlgorithmError(f"{self._name} tuner: update_search_space must be called before generate_parameters")
        for bracket in list(self._brackets):
            parameters = self._hand_out(bracket, parameter_id)
            if parameters is not None:
                return parameters
        if not self._serial or not self._brackets:
            parameters = self._hand_out(self._start_bracket(), parameter_id)
            if parameters is not None:  # None: the space is used up (the bracket is dropped)
                return parameters
        if self._brackets:
            raise NoTrialYetError(
                f"{self._name}: every trial of the current rung is handed out; the next ones"
                " depend on the results of running trials"
            )
        raise NoMoreTrialError(
            f"{self._name}: no configuration of the search space is left untried ({MAX_DRAWS} draws found only tried ones)"
        )

    def receive_trial_result(self, parameter_id: int, parameters: dict, value: Any, **kwargs: Any) -> None:
        """A final result; a rung is decided once each of its trials has one or has ended."""
        loss = self._loss(extract_scalar_reward(value))
        trial = self._trials.get(parameter_id)
        if trial is None:  # not handed out by this tuner (e.g. before a resume): only remembered
            self._remember(parameters, loss)
            return
        if trial.done:
            return  # a trial's first final result is the one that counts
        trial.loss, trial.done = loss, True
        if loss is not None:
            self._observe(trial.config, trial.budget, loss)
        self._advance(trial.bracket)

    def trial_end(self, parameter_id: int, success: bool, **kwargs: Any) -> None:
        """A trial that ended without a final result ranks below every result of its rung."""
        trial = self._trials.get(parameter_id)
        if trial is None or trial.done:
            return
        trial.done = True
        self._advance(trial.bracket)

    def checkpoint_source(self, parameter_id: int) -> int | None:
        """A promoted trial starts from a copy of the checkpoint folder of the trial
        it was promoted from; new configurations start empty."""
        trial = self._trials.get(parameter_id)
        return trial.source if trial is not None else None

    def import_data(self, data: list[dict]) -> None:
        """Remember earlier trials so their configurations are not drawn again; they
        cannot join a rung (BOHB also learns from their results)."""
        for number, record in enumerate(data):
            try:
                parameters = record["parameter"]
                value = record.get("value")
                loss = None if value is None else self._loss(extract_scalar_reward(value))
                if not isinstance(parameters, dict):
                    raise AlgorithmError(f"parameter should be a dict, got {parameters!r}")
            except (AlgorithmError, KeyError, TypeError, AttributeError) as exc:
                _logger.warning("%s: skipping imported record %d: %s", self._name, number, exc)
                continue
            self._remember(parameters, loss)

    # -- what BOHB changes ------------------------------------------------------

    def _sample_config(self) -> dict | None:
        """A new configuration not tried before, or None when the space is used up."""
        return self._random_untried()

    def _observe(self, config: dict, budget: float, loss: float) -> None:
        """A final result of ``config`` at ``budget`` (Hyperband does not learn from it)."""

    # -- brackets -----------------------------------------------------------

    def _start_bracket(self) -> _Bracket:
        s = self._next_s
        self._next_s = s - 1 if s > 0 else self.schedule.s_max
        self._started += 1
        bracket = _Bracket(self._started, s, unsampled=self.schedule.size(s))
        self._brackets.append(bracket)
        _logger.debug("%s: bracket %d starts (s=%d, %d configurations at budget %s)", self._name,
                      bracket.number, s, bracket.unsampled, self.schedule.budget(s, 0))
        return bracket

    def _hand_out(self, bracket: _Bracket, parameter_id: int) -> dict | None:
        """The bracket's next trial (a promotion, else a new configuration), or None."""
        source = None
        config = None
        if not bracket.queue and bracket.unsampled:
            config = self._sample_config()
            if config is not None:
                bracket.unsampled -= 1
            else:
                bracket.unsampled = 0  # the space is used up: the rung is what it has
                self._advance(bracket)
        if config is None:
            if not bracket.queue:
                return None
            promoted = bracket.queue.pop(0)
            config, source = promoted.config, promoted.parameter_id
        budget = self.schedule.budget(bracket.s, bracket.rung)
        trial = _Trial(parameter_id, config, budget, bracket, source)
        bracket.trials.append(trial)
        self._trials[parameter_id] = trial
        parameters = copy.deepcopy(config)
        parameters[TRIAL_BUDGET] = budget
        return parameters

    def _advance(self, bracket: _Bracket) -> None:
        """Once a rung is complete, promote its best configurations or end the bracket."""
        if not bracket.rung_complete():
            return
        ranked = sorted((t for t in bracket.trials if t.loss is not None), key=lambda t: cast(float, t.loss))
        keep = min(max(1, len(bracket.trials) // self.schedule.eta), len(ranked))
        if bracket.rung < bracket.s and keep > 0:
            bracket.rung += 1
            bracket.queue = ranked[:keep]
            bracket.trials = []
            _logger.debug("%s: bracket %d promotes %d configurations to budget %s", self._name,
                          bracket.number, keep, self.schedule.budget(bracket.s, bracket.rung))
        else:
            self._brackets.remove(bracket)

    # -- configurations ---------------------------------------------------------

    def _random_untried(self) -> dict | None:
        space = self._space
        assert space is not None  # generate_parameters refuses to run before update_search_space
        for _ in range(MAX_DRAWS):
            config = sample(space, self._rng)
            if self._claim(config):
                return config
        return None

    def _key(self, config: dict) -> str:
        """A configuration's identity: its values in the space's own types when it fits."""
        try:
            config = format_parameters(deformat_parameters(config, self._specs), self._specs)
        except (ValueError, TypeError):
            pass
        return json.dumps(config, sort_keys=True, default=str)

    def _is_tried(self, config: dict) -> bool:
        return self._key(config) in self._tried

    def _claim(self, config: dict) -> bool:
        """Mark ``config`` as tried; False if it already was."""
        key = self._key(config)
        if key in self._tried:
            return False
        self._tried.add(key)
        return True

    def _remember(self, parameters: dict, loss: float | None) -> None:
        config = {k: v for k, v in parameters.items() if k != TRIAL_BUDGET}
        self._claim(config)
        if loss is not None:
            budget = parameters.get(TRIAL_BUDGET)
            if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not budget > 0:
                budget = self.schedule.budget(0, 0)  # no budget recorded: taken as a full run
            self._observe(config, budget, loss)

    def _loss(self, reward: float) -> float | None:
        """Smaller is better; None for NaN, which counts as no result."""
        if math.isnan(reward):
            _logger.warning("%s: a NaN final result counts as no result", self._name)
            return None
        return reward if self.optimize_mode is OptimizeMode.Minimize else -reward
