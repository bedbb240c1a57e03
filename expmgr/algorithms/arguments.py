"""Checks of algorithms' classArgs, with the messages config errors show::

    require_int("population_size", population_size, 2)
    # AlgorithmError: population_size must be an integer >= 2, got 1.5
"""
from __future__ import annotations

import math
from typing import Any

from expmgr.algorithms.tuner import AlgorithmError


def require_int(name: str, value: Any, minimum: int) -> None:
    """``value`` is an integer (not a bool) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise AlgorithmError(f"{name} must be an integer >= {minimum}, got {value!r}")


def require_number(name: str, value: Any, minimum: float, above: bool = False) -> None:
    """``value`` is a finite number (not a bool) of at least ``minimum`` (above it with ``above``)."""
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or (value <= minimum if above else value < minimum)):
        raise AlgorithmError(f"{name} must be a number {'>' if above else '>='} {minimum}, got {value!r}")
