"""Value checks every section of the config shares (booleans, bounded integers, GPU indices),
each raising ``Problem`` at the field's path::

    count = positive_int(value, path, MAXIMUM)   # Problem: "expected a positive integer, got 0"

Below ``_validate`` and ``_remote``, which check the sections with them.
"""
from __future__ import annotations

from typing import Any

from ._errors import PathSegment, Problem


def check_bool(value: Any, path: tuple[PathSegment, ...]) -> bool:
    if not isinstance(value, bool):
        raise Problem(path, f"expected true or false, got {value!r}")
    return value


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def positive_int(value: Any, path: tuple[PathSegment, ...], maximum: int | None = None) -> int:
    if not is_int(value) or value <= 0:
        raise Problem(path, f"expected a positive integer, got {shown_value(value)}")
    return at_most(value, path, maximum)


def non_negative_int(value: Any, path: tuple[PathSegment, ...], maximum: int | None = None) -> int:
    if not is_int(value) or value < 0:
        raise Problem(path, f"expected an integer >= 0, got {shown_value(value)}")
    return at_most(value, path, maximum)


def at_most(value: int, path: tuple[PathSegment, ...], maximum: int | None) -> int:
    if maximum is not None and value > maximum:
        raise Problem(path, f"at most {maximum:,} is allowed (see Limits in docs/config.md), got {shown_value(value)}")
    return int(value)


def shown_value(value: Any) -> str:
    """``repr(value)``, shortened: a 4,000-digit integer is named by its size."""
    if is_int(value) and abs(value) >= 10**30:   # str() of a huge int is slow, then refused
        return f"an integer of about {int(abs(value).bit_length() * 0.30103) + 1} digits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_gpu_indices(value: Any, path: tuple[PathSegment, ...]) -> list[int] | None:
    if value is None:
        return None
    expected = "expected GPU indices as a list of integers >= 0, an integer, or a string like \"0,1\""
    if is_int(value):
        items: list[Any] = [value]
    elif isinstance(value, str):
        try:
            items = [int(part) for part in value.split(",")]
        except ValueError:
            raise Problem(path, f"{expected}, got {value!r}") from None
    elif isinstance(value, (list, tuple)) and value:
        items = list(value)
    else:
        raise Problem(path, f"{expected}, got {value!r}")
    for i, item in enumerate(items):
        if not is_int(item) or item < 0:
            where = path + (i,) if isinstance(value, (list, tuple)) else path
            raise Problem(where, f"{expected}, got {item!r}")
    if len(set(items)) != len(items):
        raise Problem(path, f"GPU indices repeat: {value!r}")
    return [int(i) for i in items]


_NOT_PRELOADED = ("expmgr", "nni")
"""Modules a warm template never imports: they read the trial's own environment when imported."""


def check_warm_start(value: Any, path: tuple[PathSegment, ...]) -> str | list[str]:
    """``trialWarmStart``: ``auto``, ``off``, or a list of module names to preload."""
    if value in ("auto", "off"):
        return str(value)
    expected = "expected auto, off, or a list of module names such as [numpy, sklearn.ensemble]"
    if not isinstance(value, list):
        raise Problem(path, f"{expected}, got {shown_value(value)}")
    for index, name in enumerate(value):
        if not isinstance(name, str) or not name or not all(part.isidentifier() for part in name.split(".")):
            raise Problem(path + (index,), f"{expected}; {shown_value(name)} is not a module name")
        if name.split(".")[0] in _NOT_PRELOADED:
            raise Problem(path + (index,), f"{name} cannot be preloaded: it reads each trial's environment "
                                           f"when imported (leave it out; importing it costs next to nothing)")
    return list(value)
