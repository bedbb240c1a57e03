"""Checks one trial's parameters against a (valid) search space: what a customized trial,
one submitted by a user rather than drawn by the tuner, must pass before it runs.

``check_parameters(parameters, space)`` raises ConfigError naming the first bad parameter, e.g.
``parameters.lr: uniform takes a number from 0.001 to 0.1, got 0.5``. A value is checked as a
tuner would draw it: a ``choice`` one of its options (a nested option as ``{"_name": ..., its
parameters}``), ``randint`` an integer in [lower, upper), the bounded types a number in
[low, high], the normal types any finite number (the log ones above 0).
"""
from __future__ import annotations

from typing import Any

from ._errors import ConfigError
from ._search_space import _is_int, _is_number, _shown

_BOUNDED = ("uniform", "quniform", "loguniform", "qloguniform")
_LOG_NORMAL = ("lognormal", "qlognormal")


def check_parameters(parameters: object, space: dict[str, Any], where: str = "parameters") -> None:
    """Raise ConfigError (field ``<where>.<name>``) unless ``parameters`` holds exactly the
    parameters of ``space``, each a value it can take."""
    if not isinstance(parameters, dict):
        raise ConfigError(f"expected a JSON object of parameter names to values, got {type(parameters).__name__}",
                          field=where)
    for name in parameters:
        if name not in space:
            raise ConfigError(f"not in the search space, whose parameters are {', '.join(space)}",
                              field=f"{where}.{name}")
    for name, entry in space.items():
        if name not in parameters:
            raise ConfigError(f"missing: the search space has it ({entry['_type']})", field=f"{where}.{name}")
        _check_value(parameters[name], entry["_type"], entry["_value"], f"{where}.{name}")


def _check_value(value: Any, kind: str, args: list, field: str) -> None:
    if kind == "choice":
        _check_choice(value, args, field)
        return
    if kind == "randint":
        lower, upper = args
        if not _is_int(value) or not lower <= value < upper:
            raise ConfigError(f"randint takes an integer from {lower} to {upper - 1}, got {_shown(value)}",
                              field=field)
        return
    if not _is_number(value):
        raise ConfigError(f"{kind} takes a finite number, got {_shown(value)}", field=field)
    if kind in _BOUNDED:
        low, high = args[0], args[1]
        if not low <= value <= high:
            raise ConfigError(f"{kind} takes a number from {low:g} to {high:g}, got {_shown(value)}", field=field)
    elif kind in _LOG_NORMAL and not value > 0:
        raise ConfigError(f"{kind} takes a number above 0, got {_shown(value)}", field=field)


def _check_choice(value: Any, options: list, field: str) -> None:
    nested = {option["_name"]: option for option in options if isinstance(option, dict) and "_name" in option}
    if isinstance(value, dict) and "_name" in value and value["_name"] in nested:
        option = nested[value["_name"]]
        check_parameters({k: v for k, v in value.items() if k != "_name"},
                         {k: v for k, v in option.items() if k != "_name"}, where=field)
        return
    if not any(_same(value, option) for option in options if not isinstance(option, dict) or "_name" not in option):
        shown = ", ".join(_shown(option["_name"] if isinstance(option, dict) and "_name" in option else option)
                          for option in options[:10])
        more = f", ... ({len(options)} in all)" if len(options) > 10 else ""
        raise ConfigError(f"choice takes one of {shown}{more}; got {_shown(value)}", field=field)


def _same(value: Any, option: Any) -> bool:
    """Equal as JSON values: 1 and 1.0 are, true and 1 are not."""
    return value == option and isinstance(value, bool) == isinstance(option, bool)
