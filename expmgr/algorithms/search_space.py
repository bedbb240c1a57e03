"""NNI search spaces as tuners see them: flat parameter specs, random sampling,
and conversion between NNI-shaped parameters and the flat form.

    specs = parse_search_space({"lr": {"_type": "loguniform", "_value": [1e-4, 0.1]}})
    params = sample(search_space, make_stdlib_rng(0))   # {"lr": 0.0031...}

A nested choice ``{"_type": "choice", "_value": [{"_name": "cnn", "k": {...}}, "mlp"]}``
is flattened: the choice itself has key ``("model",)`` and its flat value is the
index of the option; ``k`` has key ``("model", 0, "k")`` and is active only when
option 0 is chosen. Formatted parameters are NNI's shape: ``{"model": {"_name":
"cnn", "k": 3}}``. The space is assumed to be validated already.

Nothing here imports numpy: the light tuners (Random, GridSearch, Batch) draw with
``make_stdlib_rng`` and the dispatcher hosting them starts without numpy; the
model-based tuners draw with ``make_rng``'s numpy Generator. Both have the few
methods ``Draws`` names, with the same meaning, so a draw means the same either way.
"""
from __future__ import annotations

import copy
import functools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from expmgr.algorithms.tuner import AlgorithmError

CHOICE = "choice"
RANDINT = "randint"
UNIFORM = "uniform"
QUNIFORM = "quniform"
LOGUNIFORM = "loguniform"
QLOGUNIFORM = "qloguniform"
NORMAL = "normal"
QNORMAL = "qnormal"
LOGNORMAL = "lognormal"
QLOGNORMAL = "qlognormal"

_TINY = 1e-300
SIGMAS_DRAWN = 10
"""Normal types are drawn within ``mu ± SIGMAS_DRAWN * sigma`` (beyond it a draw's odds are
below 1e-22); the config refuses a space where that range, or ``exp`` of it for the log
types, is not finite (expmgr.config._limits)."""

_Q_TYPES = {QUNIFORM, QLOGUNIFORM, QNORMAL, QLOGNORMAL}
_LOG_TYPES = {LOGUNIFORM, QLOGUNIFORM, LOGNORMAL, QLOGNORMAL}
_NORMAL_TYPES = {NORMAL, QNORMAL, LOGNORMAL, QLOGNORMAL}

if TYPE_CHECKING:
    import numpy as np

Key = tuple
"""A parameter's path: ``("lr",)`` at top level, ``("model", 0, "lr")`` inside option 0 of ``model``."""


def is_nested_option(option: Any) -> bool:
    """True for a choice option that is a sub-space: a dict with a ``_name``."""
    return isinstance(option, dict) and "_name" in option


def _is_parameter(entry: Any) -> bool:
    return isinstance(entry, dict) and "_type" in entry


@dataclass
class ParameterSpec:
    """One parameter of a search space, with its NNI type and ``_value``."""

    key: Key
    type: str
    values: list

    @property
    def name(self) -> str:
        return self.key[-1]

    @property
    def path(self) -> str:
        """The parameter's names from the top, for messages: ``model.lr``."""
        return ".".join(str(part) for part in self.key[::2])

    @property
    def parent_key(self) -> Key | None:
        return self.key[:-2] if len(self.key) > 1 else None

    @property
    def parent_index(self) -> int | None:
        return self.key[-2] if len(self.key) > 1 else None

    @property
    def categorical(self) -> bool:
        return self.type == CHOICE

    @property
    def log(self) -> bool:
        """Sampled in log space (loguniform, lognormal and their q forms)."""
        return self.type in _LOG_TYPES

    @property
    def normal(self) -> bool:
        """Unbounded, parameterized by ``mu`` and ``sigma``."""
        return self.type in _NORMAL_TYPES

    @property
    def q(self) -> float | None:
        """The quantization step of q types (randint counts as q=1), else None."""
        if self.type in _Q_TYPES:
            return float(self.values[2])
        if self.type == RANDINT:
            return 1.0
        return None

    @property
    def low(self) -> float | None:
        """Smallest value a bounded type can take (inclusive), None for normal types."""
        if self.normal or self.categorical:
            return None
        return float(self.values[0])

    @property
    def high(self) -> float | None:
        """Largest value a bounded type can take (inclusive: ``upper - 1`` for randint)."""
        if self.normal or self.categorical:
            return None
        if self.type == RANDINT:
            return float(self.values[1]) - 1
        return float(self.values[1])

    @property
    def mu(self) -> float:
        return float(self.values[0])

    @property
    def sigma(self) -> float:
        return float(self.values[1])

    def bounds(self) -> tuple[float, float]:
        """``(low, high)`` of a bounded type (callers only ask bounded types)."""
        low, high = self.low, self.high
        assert low is not None and high is not None, self.type
        return low, high

    def step(self) -> float:
        """``q`` of a q type (callers only ask q types)."""
        q = self.q
        assert q is not None, self.type
        return q

    def model_bounds(self) -> tuple[float, float]:
        """The range in the space tuners move values in: log space for log types,
        unbounded for normal types."""
        if self.normal:
            return -math.inf, math.inf
        if self.log:
            low, high = self.bounds()
            return math.log(low), math.log(high)
        return self.bounds()

    def to_model(self, value: float) -> float:
        """A numeric value in that space: its log for log types (a q type's 0 counts as
        q/2), else itself; ``finish(exp(z))`` or ``finish(z)`` maps back."""
        if self.log:
            return math.log(max(float(value), self.q / 2 if self.q else _TINY))
        return float(value)

    def from_model(self, z: float) -> float | int:
        """The value of ``z`` in the model space (``to_model``'s inverse), finished: ``exp``
        for log types. A normal type's ``z`` is kept within ``mu ± SIGMAS_DRAWN sigma``,
        where the config lets values be drawn, so that ``exp`` never overflows."""
        if self.normal:
            reach = SIGMAS_DRAWN * self.sigma
            z = min(max(z, self.mu - reach), self.mu + reach)
        return self.finish(math.exp(z) if self.log else float(z))

    def is_active(self, flat: dict[Key, Any]) -> bool:
        """Whether this parameter exists given the choices already made in ``flat``."""
        return self.parent_key is None or flat.get(self.parent_key) == self.parent_index

    def finish(self, x: float) -> float | int:
        """Turn a raw real-space draw into a value: q rounding, clipping, Python type."""
        q = self.q
        if q is not None:
            x = round_half_even(x / q) * q
        if not self.normal:
            low, high = self.bounds()
            x = min(max(x, low), high)
        if self.type == RANDINT:
            return int(round(x))
        return float(x)

    def sample(self, rng: Draws) -> float | int:
        """A random flat value with NNI's semantics (a choice gives its option index)."""
        if self.type == CHOICE:
            return int(rng.integers(len(self.values)))
        if self.type == RANDINT:
            return int(rng.integers(int(self.values[0]), int(self.values[1])))
        if self.normal:
            z = rng.normal(self.mu, self.sigma)
        elif self.log:
            low, high = self.bounds()
            z = rng.uniform(math.log(low), math.log(high))
        else:
            low, high = self.bounds()
            z = rng.uniform(low, high)
        return self.from_model(z)

    def index_of(self, value: Any) -> int:
        """The index of the choice option ``value`` (matched by ``_name`` for sub-spaces)."""
        for index, option in enumerate(self.values):
            if is_nested_option(option):
                if isinstance(value, dict) and value.get("_name") == option["_name"]:
                    return index
            elif option == value and isinstance(option, bool) == isinstance(value, bool):
                return index
        raise ValueError(f"{value!r} is not one of the choices of {self.path!r}")


def parse_search_space(space: dict, _prefix: Key = ()) -> list[ParameterSpec]:
    """Flatten a search space into specs, each parent choice before its children."""
    specs = []
    for name, entry in space.items():
        if name == "_name" or not _is_parameter(entry):
            continue
        spec = ParameterSpec(_prefix + (name,), entry["_type"], list(entry["_value"]))
        specs.append(spec)
        if spec.categorical:
            for index, option in enumerate(spec.values):
                if is_nested_option(option):
                    specs.extend(parse_search_space(option, spec.key + (index,)))
    return specs


def format_parameters(flat: dict[Key, Any], specs: list[ParameterSpec]) -> dict:
    """NNI-shaped parameters from flat values (choices as option indices)."""
    result: dict = {}
    containers: dict[Key, dict] = {(): result}
    for spec in specs:
        container = containers.get(spec.key[:-1])
        if spec.key not in flat or container is None:
            continue
        value = flat[spec.key]
        if spec.categorical:
            option = spec.values[value]
            if is_nested_option(option):
                value = {"_name": option["_name"]}
                value.update(
                    (k, copy.deepcopy(v)) for k, v in option.items()
                    if k != "_name" and not _is_parameter(v)
                )
                containers[spec.key + (flat[spec.key],)] = value
            else:
                value = copy.deepcopy(option)
        container[spec.name] = value
    return result


def deformat_parameters(params: dict, specs: list[ParameterSpec]) -> dict[Key, Any]:
    """Flat values from NNI-shaped parameters; ValueError when they do not fit the space."""
    flat: dict[Key, Any] = {}
    containers: dict[Key, dict] = {(): params}
    for spec in specs:
        container = containers.get(spec.key[:-1])
        if container is None:
            continue
        if not isinstance(container, dict) or spec.name not in container:
            raise ValueError(f"parameter {spec.path!r} is missing")
        value = container[spec.name]
        if spec.categorical:
            index = spec.index_of(value)
            flat[spec.key] = index
            if is_nested_option(spec.values[index]):
                containers[spec.key + (index,)] = value
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"parameter {spec.path!r} should be a number, got {value!r}")
        else:
            flat[spec.key] = int(value) if spec.type == RANDINT else float(value)
    return flat


CONTINUOUS_GRID_POINTS = 5
"""How many points a continuous (uniform, loguniform, normal, ...) parameter is tried at."""


GRID_LIMIT = 1_000_000
"""The most combinations GridSearch enumerates (docs/config.md, "Limits"): a larger grid
is refused when the search space is given, not discovered by running out of memory."""


def grid_values(spec: ParameterSpec) -> Sequence:
    """The flat values GridSearch tries for one parameter (option indices for a choice);
    for choice, randint and q types, every value it can take (a lazy range for randint)."""
    if spec.type == CHOICE:
        return range(len(spec.values))
    if spec.type == RANDINT:
        return range(int(spec.values[0]), int(spec.values[1]))
    if spec.type in (QUNIFORM, QLOGUNIFORM):
        q = spec.step()
        low, high = spec.bounds()
        steps = range(int(round_half_even(low / q)), int(round_half_even(high / q)) + 1)
        raw = [k * q for k in steps]
    elif spec.normal:
        offsets = linspace(-2.0, 2.0, CONTINUOUS_GRID_POINTS)
        raw = [spec.mu + k * spec.sigma for k in offsets]
        if spec.log:
            raw = [math.exp(z) for z in raw]
    elif spec.log:
        low, high = spec.bounds()
        raw = geomspace(low, high, CONTINUOUS_GRID_POINTS)
    else:
        low, high = spec.bounds()
        raw = linspace(low, high, CONTINUOUS_GRID_POINTS)
    return list(dict.fromkeys(spec.finish(float(x)) for x in raw))


def grid_size(specs: list[ParameterSpec]) -> int:
    """How many combinations GridSearch enumerates for ``specs`` (before duplicates are
    dropped), counted without listing them; capped at ``GRID_LIMIT + 1``."""
    children: dict[Key, list[ParameterSpec]] = {}
    for spec in specs:
        children.setdefault(spec.key[:-1], []).append(spec)

    def combinations(prefix: Key) -> int:
        total = 1
        for spec in children.get(prefix, []):
            if spec.type == CHOICE:
                count = sum(combinations(spec.key + (index,)) for index in range(len(spec.values)))
            else:
                count = grid_count(spec)
            total = min(total * count, GRID_LIMIT + 1)
        return total

    return combinations(())


def grid_count(spec: ParameterSpec) -> int:
    """How many values ``grid_values(spec)`` has at most, without listing them."""
    if spec.type == CHOICE:
        return len(spec.values)
    if spec.type == RANDINT:
        return int(spec.values[1]) - int(spec.values[0])
    if spec.type in (QUNIFORM, QLOGUNIFORM):
        q = spec.step()
        low, high = spec.bounds()
        steps = round_half_even(high / q) - round_half_even(low / q) + 1
        return int(min(steps, GRID_LIMIT + 1)) if math.isfinite(steps) else GRID_LIMIT + 1
    return CONTINUOUS_GRID_POINTS


def round_half_even(x: float) -> float:
    """``x`` rounded to an integer, halves to even, as a float (numpy's ``round``;
    infinities and NaN stay as they are)."""
    return float(round(x)) if math.isfinite(x) else x


def linspace(start: float, stop: float, num: int) -> list[float]:
    """``num`` evenly spaced floats from ``start`` to ``stop`` inclusive, computed as
    ``numpy.linspace`` computes them (``start + i * step``, the last one ``stop``)."""
    if num == 1:
        return [float(start)]
    step = (stop - start) / (num - 1)
    if step == 0:   # numpy's path for a step too small for a double (gh-5437)
        values = [i / (num - 1) * (stop - start) + start for i in range(num)]
    else:
        values = [i * step + start for i in range(num)]
    values[-1] = float(stop)
    return values


def geomspace(start: float, stop: float, num: int) -> list[float]:
    """``num`` log-spaced floats from ``start`` to ``stop`` (both positive) inclusive,
    as ``numpy.geomspace`` computes them (``10 ** linspace(log10 start, log10 stop)``)."""
    values = [10.0 ** z for z in linspace(math.log10(start), math.log10(stop), num)]
    values[0] = float(start)
    values[-1] = float(stop)
    return values


class StdlibRng:
    """A seeded ``random.Random`` speaking the part of numpy's Generator API that sampling
    uses (``Draws``), so that the light tuners need no numpy. The draws mean the same as
    numpy's (uniform in ``[low, high)``, an integer in ``[low, high)``, a normal with
    ``loc`` and ``scale``); the numbers for a given seed differ from numpy's."""

    def __init__(self, seed: int | None) -> None:
        self._random = random.Random(seed)

    def integers(self, low: int, high: int | None = None) -> int:
        """An integer in ``[low, high)``, or in ``[0, low)`` when ``high`` is None."""
        if high is None:
            low, high = 0, low
        return self._random.randrange(low, high)

    def uniform(self, low: float, high: float) -> float:
        return self._random.uniform(low, high)

    def normal(self, loc: float, scale: float) -> float:
        return self._random.gauss(loc, scale)

    def random(self) -> float:
        """A float in ``[0, 1)``."""
        return self._random.random()


Draws = Union[StdlibRng, "np.random.Generator"]
"""A source of random draws: ``StdlibRng`` or a numpy Generator."""


def check_seed(seed: Any) -> int | None:
    """A tuner's ``seed`` class argument, checked: a non-negative integer, or None for fresh
    entropy (AlgorithmError otherwise)."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise AlgorithmError(f"seed must be a non-negative integer or null, got {seed!r}")
    return seed


def make_stdlib_rng(seed: Any) -> StdlibRng:
    """The numpy-free random generator of a tuner's ``seed`` class argument (an integer,
    or None for fresh entropy); for tuners that need no numpy otherwise."""
    check_seed(seed)
    return StdlibRng(seed)


def make_rng(seed: Any) -> np.random.Generator:
    """The numpy random generator of a tuner's ``seed`` class argument (an integer, or None
    for fresh entropy); for the model-based tuners, which use numpy anyway."""
    check_seed(seed)
    import numpy as np   # here, not at the top: the light tuners never import it
    return np.random.default_rng(seed)


def sample(space: dict, rng: Draws) -> dict:
    """Random parameters from an NNI search space, in NNI's shape with plain Python types."""
    specs = parse_search_space(space)
    flat: dict[Key, Any] = {}
    for spec in specs:
        if spec.is_active(flat):
            flat[spec.key] = spec.sample(rng)
    return format_parameters(flat, specs)


def check_each_draw(space: dict, seed: int = 0) -> None:
    """Draw every parameter of ``space`` once, nested ones included, as the tuners' random
    draws do (with ``make_stdlib_rng``: no numpy in the process that checks a config); raise
    ``SpaceDrawError`` naming the first whose draw fails or is not a finite number."""
    rng = make_stdlib_rng(seed)
    for spec in parse_search_space(space):
        try:
            value = spec.sample(rng)
        except Exception as error:   # an overflow, a bound numpy refuses: the space's fault
            raise SpaceDrawError(spec.key, f"cannot draw from it ({type(error).__name__}: {error})") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise SpaceDrawError(spec.key, f"drew {value!r}, which is not a finite number")


class SpaceDrawError(AlgorithmError):
    """A parameter that cannot be drawn from; ``key`` is its flat key (see ``Key``)."""

    def __init__(self, key: Key, message: str) -> None:
        super().__init__(f"parameter {'.'.join(map(str, key))!r}: {message}")
        self.key = key


class NumpyDraws:
    """Mixed into a tuner that draws with numpy: ``self._rng`` is the Generator of the seed
    given to ``_keep_seed`` (checked there), made at its first use. So building the tuner,
    which the experiment process does to check its config, does not import numpy."""

    _seed: int | None = None

    def _keep_seed(self, seed: Any) -> None:
        self._seed = check_seed(seed)

    @functools.cached_property
    def _rng(self) -> np.random.Generator:
        return make_rng(self._seed)
