"""The PBT tuner: Population Based Training (Jaderberg et al., 2017), generation by
generation as NNI's PBTTuner, with checkpoints passed through the manager.

A population of ``population_size`` members trains in stretches. Each trial of a
generation is one member's stretch: it starts from the checkpoint it finds in
``expmgr.get_checkpoint_dir()`` (empty in generation 0), trains for as long as the
trial code decides (a few epochs, say), saves its checkpoint there and reports a
final result. When every member has ended, the next generation is made: the bottom
``fraction`` are replaced by copies of random top-``fraction`` members (exploit: the
top member's hyperparameters and a copy of its checkpoint folder), whose
hyperparameters are then perturbed (explore); the others continue with their own
hyperparameters from their own checkpoint. ``checkpoint_source(parameter_id)`` tells
the manager which earlier trial's folder a new trial starts from::

    tuner = PbtTuner("maximize", population_size=8, seed=1)

As NNI's PBTTuner, the parameters also hold ``load_checkpoint_dir`` and ``save_checkpoint_dir``,
so NNI's PBT trials run unchanged: both are the new trial's own checkpoint folder (filled in by
the manager, see ``TRIAL_CHECKPOINT_DIR``), which holds the copy of the exploited member's
checkpoint before the trial starts. NNI's ``all_checkpoint_dir`` is accepted and not used:
checkpoints live in the trials' folders.
"""
from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from typing import Any

from expmgr.algorithms.arguments import require_int
from expmgr.algorithms.search_space import (
    NumpyDraws,
    Key,
    ParameterSpec,
    deformat_parameters,
    format_parameters,
    is_nested_option,
    parse_search_space,
)
from expmgr.algorithms.tuner import (
    TRIAL_CHECKPOINT_DIR,
    AlgorithmError,
    NoTrialYetError,
    OptimizeMode,
    Tuner,
    extract_scalar_reward,
)

_logger = logging.getLogger("nni.tuner.pbt")

CHECKPOINT_PARAMETERS = ("load_checkpoint_dir", "save_checkpoint_dir")
"""NNI's names of the folders a PBT trial loads its checkpoint from and saves it to."""

SAMPLING_ATTEMPTS = 100
"""Draws tried to find a generation-0 member that was not imported or drawn already,
and explorations tried to find hyperparameters that differ from the parent's."""


@dataclass
class _Member:
    """One member of the current generation."""

    flat: dict[Key, Any]
    """Its hyperparameters, flat (choices as option indices)."""
    source: int | None
    """The previous-generation parameter id whose checkpoint it starts from."""
    parameter_id: int | None = None
    """The trial running this stretch, once handed out."""
    loss: float | None = None
    """Its result, smaller is better whatever the optimize mode; None until reported."""
    ended: bool = False
    """Its trial has ended (with or without a result)."""

    @property
    def done(self) -> bool:
        return self.loss is not None or self.ended


def _canonical(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class PbtTuner(NumpyDraws, Tuner):
    """NNI's PBT tuner; the class arguments are NNI's, plus ``seed``."""

    def __init__(
        self,
        optimize_mode: str = "maximize",
        population_size: int = 10,
        factor: float = 0.2,
        resample_probability: float = 0.25,
        fraction: float = 0.2,
        seed: int | None = None,
        all_checkpoint_dir: str | None = None,
    ) -> None:
        self.optimize_mode = OptimizeMode.parse(optimize_mode)
        if all_checkpoint_dir is not None:
            _logger.info("PBT: all_checkpoint_dir is not used; each trial's checkpoint is in its own folder")
        require_int("population_size", population_size, 2)
        if not _is_number(factor) or not 0 < factor < 1:
            raise AlgorithmError(f"factor must be a number in (0, 1), got {factor!r}")
        if not _is_number(resample_probability) or not 0 <= resample_probability <= 1:
            raise AlgorithmError(f"resample_probability must be a number in [0, 1], got {resample_probability!r}")
        if not _is_number(fraction) or not 0 < fraction <= 0.5:
            raise AlgorithmError(f"fraction must be a number in (0, 0.5], got {fraction!r}")
        self.population_size = population_size
        self.factor = float(factor)
        self.resample_probability = float(resample_probability)
        self.fraction = float(fraction)
        self._keep_seed(seed)
        self._specs: list[ParameterSpec] | None = None
        self._generation = 0
        self._members: list[_Member] | None = None  # built at the first generate_parameters
        self._handed_out = 0
        self._by_id: dict[int, _Member] = {}
        self._sources: dict[int, int | None] = {}
        self._imported: dict[str, tuple[float, dict[Key, Any]]] = {}  # canonical -> best (loss, flat)
        self._tried: set[str] = set()

    @property
    def generation(self) -> int:
        """The number of the generation being handed out or run: 0, 1, 2, ..."""
        return self._generation

    # -- the Tuner interface ------------------------------------------------

    def update_search_space(self, search_space: dict) -> None:
        """Take the space. A new space after trials were handed out restarts the search
        at a fresh random generation 0 (results of the old generation are ignored)."""
        self._specs = parse_search_space(search_space)
        if self._members is not None:
            _logger.warning("PBT: the search space changed; starting again from a random generation 0")
            self._generation = 0
            self._members = None
            self._handed_out = 0
            self._by_id = {}

    def generate_parameters(self, parameter_id: int, **kwargs: Any) -> dict:
        """The next member of the current generation; ``NoTrialYetError`` once all of
        them are handed out and the generation has not ended yet."""
        specs = self._require_specs()
        if self._members is None:
            self._members = self._first_generation()
        if self._handed_out == len(self._members):
            raise NoTrialYetError(
                f"PBT: generation {self._generation} is handed out; the next one is made when all its trials end"
            )
        member = self._members[self._handed_out]
        self._handed_out += 1
        member.parameter_id = parameter_id
        self._by_id[parameter_id] = member
        self._sources[parameter_id] = member.source
        parameters = format_parameters(member.flat, specs)
        parameters.update({name: TRIAL_CHECKPOINT_DIR for name in CHECKPOINT_PARAMETERS if name not in parameters})
        return parameters

    def checkpoint_source(self, parameter_id: int) -> int | None:
        """The previous-generation trial whose checkpoint folder ``parameter_id`` starts
        from: a top member's for an exploited member, its own lineage's otherwise, None
        in generation 0."""
        return self._sources.get(parameter_id)

    def receive_trial_result(self, parameter_id: int, parameters: dict, value: Any, **kwargs: Any) -> None:
        """Record a member's result; the last member of a generation to end makes the next one."""
        reward = extract_scalar_reward(value)
        member = self._by_id.get(parameter_id)
        if member is None:
            _logger.debug("PBT: ignoring the result of parameter %s, not in generation %d", parameter_id,
                          self._generation)
            return
        loss = reward if self.optimize_mode is OptimizeMode.Minimize else -reward
        if math.isnan(loss):
            _logger.warning("PBT: parameter %s reported NaN; it ranks with the failed members", parameter_id)
            member.ended = True
        elif member.loss is None:
            member.loss = loss
        self._advance_if_done()

    def trial_end(self, parameter_id: int, success: bool, **kwargs: Any) -> None:
        """A member that ends without a result ranks worst (and is replaced)."""
        member = self._by_id.get(parameter_id)
        if member is None:
            return
        member.ended = True
        self._advance_if_done()

    def import_data(self, data: list[dict]) -> None:
        """Imported points are never drawn again for generation 0; those with results
        seed it, best first (the rest of it is random). After generation 0 has been
        handed out, imports change nothing but are noted."""
        specs = self._require_specs()
        for number, record in enumerate(data):
            try:
                parameters = record["parameter"]
                if not isinstance(parameters, dict):
                    raise ValueError(f"parameters should be a dict, got {parameters!r}")
                parameters = {k: v for k, v in parameters.items()
                              if k not in CHECKPOINT_PARAMETERS or any(spec.key == (k,) for spec in specs)}
                flat = deformat_parameters(parameters, specs)
                value = record.get("value")
                reward = None if value is None else extract_scalar_reward(value)
            except (AlgorithmError, KeyError, TypeError, ValueError) as exc:
                _logger.warning("PBT: skipping imported record %d: %s", number, exc)
                continue
            key = _canonical(format_parameters(flat, specs))
            self._tried.add(key)
            if reward is not None and not math.isnan(reward):
                loss = reward if self.optimize_mode is OptimizeMode.Minimize else -reward
                if key not in self._imported or loss < self._imported[key][0]:
                    self._imported[key] = (loss, flat)
        if self._members is not None:
            _logger.info("PBT: generation 0 was already made; imported points only count as tried")

    # -- generations ------------------------------------------------------------

    def _require_specs(self) -> list[ParameterSpec]:
        if self._specs is None:
            raise AlgorithmError("PBT tuner: update_search_space must be called first")
        return self._specs

    def _first_generation(self) -> list[_Member]:
        """The best imported points with results, then untried random points."""
        specs = self._require_specs()
        seeded = sorted(self._imported.values(), key=lambda item: item[0])[: self.population_size]
        members = [_Member(dict(flat), source=None) for _, flat in seeded]
        while len(members) < self.population_size:
            members.append(_Member(self._untried_random_point(specs), source=None))
        return members

    def _untried_random_point(self, specs: list[ParameterSpec]) -> dict[Key, Any]:
        """A random point not imported nor drawn before; in a space too small for
        that, a repeated one after SAMPLING_ATTEMPTS draws."""
        for _ in range(SAMPLING_ATTEMPTS):
            flat = self._random_point(specs)
            key = _canonical(format_parameters(flat, specs))
            if key not in self._tried:
                self._tried.add(key)
                return flat
        _logger.info("PBT: no untried point found in %d draws; generation 0 repeats one", SAMPLING_ATTEMPTS)
        return flat

    def _random_point(self, specs: list[ParameterSpec]) -> dict[Key, Any]:
        flat: dict[Key, Any] = {}
        for spec in specs:
            if spec.is_active(flat):
                flat[spec.key] = spec.sample(self._rng)
        return flat

    def _advance_if_done(self) -> None:
        members = self._members
        if members is None or self._handed_out < len(members) or not all(m.done for m in members):
            return
        self._members = self._next_generation(members)
        self._generation += 1
        self._handed_out = 0
        self._by_id = {}
        _logger.info("PBT: generation %d is ready", self._generation)

    def _next_generation(self, members: list[_Member]) -> list[_Member]:
        """Rank; the bottom members (at least the ``fraction``, and every member without
        a result while top members remain) become explored copies of random top members."""
        n = len(members)
        # ties keep the population's order; members without a result rank last
        order = sorted(range(n), key=lambda i: (members[i].loss is None, members[i].loss or 0.0))
        cutoff = min(n // 2, max(1, math.ceil(self.fraction * n - 1e-9)))
        failed = sum(1 for m in members if m.loss is None)
        replaced = min(n - cutoff, max(cutoff, failed))
        tops = order[:cutoff]
        bottoms = set(order[n - replaced:])
        next_members = []
        for i, member in enumerate(members):
            if i in bottoms:
                top = members[tops[int(self._rng.integers(len(tops)))]]
                next_members.append(_Member(self._explore(top.flat), source=top.parameter_id))
            else:
                next_members.append(_Member(dict(member.flat), source=member.parameter_id))
        return next_members

    def _explore(self, parent: dict[Key, Any]) -> dict[Key, Any]:
        """Perturbed hyperparameters, different from ``parent`` unless nothing in its
        active branch can change."""
        for _ in range(SAMPLING_ATTEMPTS):
            flat = self._perturbed(parent)
            if flat != parent:
                return flat
        return flat

    def _perturbed(self, parent: dict[Key, Any]) -> dict[Key, Any]:
        flat: dict[Key, Any] = {}
        for spec in self._require_specs():
            if not spec.is_active(flat):
                continue
            if spec.key not in parent:  # cannot happen while branches are kept; be safe
                flat[spec.key] = spec.sample(self._rng)
            elif spec.categorical and any(is_nested_option(option) for option in spec.values):
                flat[spec.key] = parent[spec.key]  # a branch: its checkpoint fits only it
            elif self._rng.random() < self.resample_probability:
                flat[spec.key] = spec.sample(self._rng)
            elif spec.categorical:
                flat[spec.key] = parent[spec.key]
            else:
                flat[spec.key] = self._scaled(spec, parent[spec.key])
        return flat

    def _scaled(self, spec: ParameterSpec, value: float | int) -> float | int:
        """``value`` times 1 + factor or 1 - factor (at random), rounded and clipped to the
        space; a q type (or randint) moves at least one q step."""
        up = self._rng.random() < 0.5
        moved = spec.finish(value * (1 + self.factor if up else 1 - self.factor))
        if moved == value and spec.q is not None:
            moved = spec.finish(value + spec.q if up else value - spec.q)
        if spec.log and moved < 0:  # qlognormal's lowest value is 0
            return value
        return moved
