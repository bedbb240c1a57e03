"""Durations as NNI writes them: a number of seconds, or a string such as ``30s``, ``10m``, ``1.5h``, ``2d``.

``parse_duration("1.5h") == 5400.0``; anything else raises ConfigError saying the expected format.
"""
from __future__ import annotations

import math
import re

from ._errors import ConfigError
from ._limits import MAX_DURATION_SECONDS

UNITS: dict[str, float] = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
EXPECTED = "expected a duration such as 30s, 10m, 1.5h or 2d (units s, m, h, d) or a number of seconds"

_PATTERN = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]+)\s*$")


def parse_duration(value: object, *, allow_zero: bool = False) -> float:
    """Seconds in ``value``: a positive int/float, or a string of a positive number and a unit;
    at most ten years. ``allow_zero``: 0 too (a setting for which 0 means "none")."""
    if isinstance(value, bool):
        raise ConfigError(f"{EXPECTED}, got {value!r}")
    if isinstance(value, (int, float)):
        try:
            seconds = float(value)
        except OverflowError:   # an integer beyond any float
            seconds = math.inf
    elif isinstance(value, str):
        match = _PATTERN.match(value)
        if match is None:
            raise ConfigError(f"{EXPECTED}, got {value!r}")
        unit = match.group(2).lower()
        if unit not in UNITS:
            raise ConfigError(f"unknown unit {match.group(2)!r}; {EXPECTED}, got {value!r}")
        seconds = float(match.group(1)) * UNITS[unit]
    else:
        raise ConfigError(f"{EXPECTED}, got {value!r}")
    if math.isnan(seconds) or seconds < 0 or (seconds == 0 and not allow_zero):
        raise ConfigError(f"a duration must be {'0 or more' if allow_zero else 'more than 0'} seconds; {EXPECTED}, "
                          f"got {_shown(value)}")
    if seconds > MAX_DURATION_SECONDS:   # infinity too
        raise ConfigError(f"a duration must be at most {MAX_DURATION_SECONDS / 86400:g}d (10 years); "
                          f"{EXPECTED}, got {_shown(value)}")
    return seconds


def _shown(value: object) -> str:
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else "a huge integer"
    return text if len(text) <= 80 else text[:77] + "..."
