"""Checks a search space in NNI's format: ``{name: {"_type": T, "_value": [...]}}``.

``validate_search_space(space)`` raises ConfigError naming the first bad entry, e.g.
``searchSpace.lr._value: uniform needs low < high, got [0.1, 0.01]``.
"""
from __future__ import annotations

import math
from typing import Any

from ._errors import ConfigError, PathSegment, Problem, format_path
from ._keys import unknown_message
from ._limits import (INT64_MAX, INT64_MIN, MAX_CHOICE_OPTIONS, MAX_LOG_EXPONENT, MAX_NESTING, MAX_PARAMETERS,
                      MAX_Q_STEPS, SIGMAS_DRAWN)

# _type -> names of the _value items
SEARCH_SPACE_TYPES: dict[str, tuple[str, ...]] = {
    "choice": (),
    "randint": ("lower", "upper"),
    "uniform": ("low", "high"),
    "quniform": ("low", "high", "q"),
    "loguniform": ("low", "high"),
    "qloguniform": ("low", "high", "q"),
    "normal": ("mu", "sigma"),
    "qnormal": ("mu", "sigma", "q"),
    "lognormal": ("mu", "sigma"),
    "qlognormal": ("mu", "sigma", "q"),
}

_ENTRY = "each parameter is {_type: <type>, _value: [...]}"


def validate_search_space(space: object, where: str = "searchSpace") -> None:
    """Raise ConfigError (field ``<where>.<name>...``) unless ``space`` is a valid search space."""
    try:
        check_search_space(space, ())
    except Problem as problem:
        field = ".".join(p for p in (where, format_path(problem.path)) if p)
        field = field.replace(".[", "[")
        raise ConfigError(problem.message, field=field) from None


def check_search_space(space: object, path: tuple[PathSegment, ...]) -> None:
    """Raise Problem for the first bad entry of ``space``, in order."""
    if not isinstance(space, dict):
        raise Problem(path, f"expected a mapping of parameter names to {{_type, _value}}, "
                            f"got {_describe(space)}")
    if not space:
        raise Problem(path, "the search space is empty; give at least one parameter")
    _check_entries(space, path, _Count(), 0)


class _Count:
    """Parameters seen so far, nested ones included (at most MAX_PARAMETERS)."""

    def __init__(self) -> None:
        self.parameters = 0


def _check_entries(entries: dict, path: tuple[PathSegment, ...], count: _Count, depth: int) -> None:
    for name, entry in entries.items():
        if not isinstance(name, str) or not name:
            raise Problem(path + (str(name),), f"parameter names must be non-empty strings, got {name!r}",
                          at_key=True)
        count.parameters += 1
        if count.parameters > MAX_PARAMETERS:
            raise Problem(path + (name,), f"a search space may have at most {MAX_PARAMETERS:,} parameters "
                                          f"(nested ones included); this is one more", at_key=True)
        _check_entry(entry, path + (name,), count, depth)


def _check_entry(entry: object, path: tuple[PathSegment, ...], count: _Count, depth: int) -> None:
    if not isinstance(entry, dict):
        raise Problem(path, f"expected {{_type: ..., _value: [...]}}, got {_describe(entry)}")
    for key in entry:
        if key not in ("_type", "_value"):
            raise Problem(path + (str(key),), f"unknown key; {_ENTRY}", at_key=True)
    if "_type" not in entry:
        raise Problem(path + ("_type",), f"required; {_ENTRY}")
    kind = entry["_type"]
    if not isinstance(kind, str) or kind not in SEARCH_SPACE_TYPES:
        if isinstance(kind, str) and kind.lower() in SEARCH_SPACE_TYPES:
            raise Problem(path + ("_type",), f"_type is case-sensitive: write {kind.lower()!r}")
        raise Problem(path + ("_type",), unknown_message("_type", str(kind), list(SEARCH_SPACE_TYPES), "types"))
    if "_value" not in entry:
        raise Problem(path + ("_value",), f"required; {_ENTRY}")
    value = entry["_value"]
    vpath = path + ("_value",)
    if kind == "choice":
        _check_choice(value, vpath, count, depth)
        return
    names = SEARCH_SPACE_TYPES[kind]
    shape = "[" + ", ".join(names) + "]"
    if not isinstance(value, list):
        raise Problem(vpath, f"{kind} needs a list {shape}, got {_describe(value)}")
    if len(value) != len(names):
        raise Problem(vpath, f"{kind} needs {len(names)} values {shape}, got {len(value)}")
    want_int = kind == "randint"
    for i, item in enumerate(value):
        if want_int and not _is_int(item):
            raise Problem(vpath + (i,), f"randint needs integers {shape}, got {_shown(item)}")
        if want_int and not INT64_MIN <= item <= INT64_MAX:
            raise Problem(vpath + (i,), f"randint bounds must fit a 64-bit integer "
                                        f"({INT64_MIN} to {INT64_MAX}), got {_shown(item)}")
        if not _is_number(item):
            finite = "finite " if isinstance(item, (int, float)) and not isinstance(item, bool) else ""
            raise Problem(vpath + (i,), f"{kind} needs {finite}numbers {shape}, got {_shown(item)}")
    if names[0] == "low" and not math.isfinite(float(value[1]) - float(value[0])):
        raise Problem(vpath, f"{kind}: the range {_shown(value)} is too wide for a floating-point number")
    args = dict(zip(names, value))
    if "low" in args:
        low, high = args["low"], args["high"]
        if kind in ("loguniform", "qloguniform") and low <= 0:
            raise Problem(vpath + (0,), f"{kind} needs 0 < low, got low = {low!r}")
        if not low < high:
            raise Problem(vpath, f"{kind} needs low < high, got {value!r}")
    if "lower" in args and not args["lower"] < args["upper"]:
        raise Problem(vpath, f"randint needs lower < upper, got {value!r} (upper is exclusive)")
    if "sigma" in args and args["sigma"] <= 0:
        raise Problem(vpath + (1,), f"{kind} needs sigma > 0, got sigma = {args['sigma']!r}")
    if "q" in args and args["q"] <= 0:
        raise Problem(vpath + (len(names) - 1,), f"{kind} needs q > 0, got q = {args['q']!r}")
    _check_reach(kind, args, value, vpath)


def _check_reach(kind: str, args: dict[str, Any], value: list, vpath: tuple[PathSegment, ...]) -> None:
    """What tuners compute from the values must stay a finite number: a randint's width an
    int64 (numpy draws offsets below it), a normal type's draws within ``mu ± SIGMAS_DRAWN
    sigma`` finite (for a log type, ``exp`` of them), a q type at most MAX_Q_STEPS steps."""
    if kind == "randint":
        if args["upper"] - args["lower"] > INT64_MAX:
            raise Problem(vpath, f"randint: upper - lower must be at most {INT64_MAX} (a 64-bit integer, "
                                 f"which tuners draw offsets with), got {_shown(value)}")
        return
    if "mu" in args:
        mu, sigma = float(args["mu"]), float(args["sigma"])
        low, high = mu - SIGMAS_DRAWN * sigma, mu + SIGMAS_DRAWN * sigma
        if kind in ("lognormal", "qlognormal"):
            if high > MAX_LOG_EXPONENT:
                raise Problem(vpath, f"{kind}: exp(mu + {SIGMAS_DRAWN:g} sigma) overflows a floating-point "
                                     f"number (mu + {SIGMAS_DRAWN:g} sigma = {high:g}, the most is "
                                     f"{MAX_LOG_EXPONENT:.2f}); lower mu or sigma")
            low, high = math.exp(low), math.exp(high)
        elif not (math.isfinite(low) and math.isfinite(high)):
            raise Problem(vpath, f"{kind}: mu ± {SIGMAS_DRAWN:g} sigma, where values are drawn, "
                                 f"overflows a floating-point number; lower sigma")
    else:
        low, high = float(args["low"]), float(args["high"])
    if "q" in args:
        steps = (high - low) / float(args["q"])
        if not steps <= MAX_Q_STEPS:
            count = f"about {steps:.3g} steps" if math.isfinite(steps) else "more steps than a float can count"
            raise Problem(vpath + (len(value) - 1,),
                          f"{kind}: q = {args['q']!r} is too small for the range: {count}, "
                          f"the most is {MAX_Q_STEPS:.3g} (2**53: finer steps are not distinct "
                          f"floating-point numbers); raise q")


def _check_choice(value: object, vpath: tuple[PathSegment, ...], count: _Count, depth: int) -> None:
    if not isinstance(value, list) or not value:
        raise Problem(vpath, f"choice needs a non-empty list of options, got {_describe(value)}")
    if len(value) > MAX_CHOICE_OPTIONS:
        raise Problem(vpath, f"choice may have at most {MAX_CHOICE_OPTIONS:,} options, got {len(value):,}")
    for i, option in enumerate(value):
        if _has_non_finite(option):
            raise Problem(vpath + (i,), f"choice options must be JSON values; NaN and infinities are not, "
                                        f"got {_shown(option)}")
        if isinstance(option, dict) and "_name" in option:
            # a nested search space: {_name: "option", param: {_type, _value}, ...}
            if depth + 1 > MAX_NESTING:
                raise Problem(vpath + (i,), f"choices may be nested at most {MAX_NESTING} levels deep")
            nested = {k: v for k, v in option.items() if k != "_name"}
            _check_entries(nested, vpath + (i,), count, depth + 1)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: Any) -> bool:
    """A finite number; an integer too large for a float is not one."""
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return False
    try:
        return math.isfinite(x)
    except OverflowError:
        return False


def _has_non_finite(x: Any) -> bool:
    if isinstance(x, float):
        return not math.isfinite(x)
    if isinstance(x, dict):
        return any(_has_non_finite(item) for item in x.values())
    if isinstance(x, list):
        return any(_has_non_finite(item) for item in x)
    return False


def _shown(x: Any) -> str:
    """``repr(x)``, shortened: a 4,000-digit integer is named by its size."""
    if _is_int(x) and abs(x) >= 10**30:   # str() of a huge int is slow, and refused past 4,300 digits
        return f"an integer of about {int(abs(x).bit_length() * 0.30103) + 1} digits"
    if isinstance(x, list):
        text = "[" + ", ".join(_shown(item) for item in x[:4]) + (", ..." if len(x) > 4 else "") + "]"
    else:
        text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."


def _describe(x: object) -> str:
    if isinstance(x, list):
        return f"a list {x!r}" if x else "an empty list"
    if isinstance(x, dict):
        return "a mapping" if x else "an empty mapping"
    if x is None:
        return "nothing"
    return repr(x)
