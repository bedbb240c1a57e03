"""Memory sizes, as a Ray trial's ``trialResources.memory`` takes them: a number of bytes, or a
string such as ``512MiB``, ``4GB`` or ``4GiB``.

``parse_size("4GiB") == 4 * 2**30``; anything else raises ConfigError saying the expected format.
"""
from __future__ import annotations

import re
from decimal import Decimal

from ._errors import ConfigError
from ._limits import MAX_TRIAL_MEMORY_BYTES

UNITS: dict[str, int] = {
    "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
"""Units, any case: B; KB, MB, GB, TB in powers of 1000; KiB, MiB, GiB, TiB in powers of 1024."""
EXPECTED = ("expected a size such as 512MiB, 4GB or 4GiB (units B, KB, MB, GB, TB of 1000 and "
            "KiB, MiB, GiB, TiB of 1024) or an integer number of bytes")

_PATTERN = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]+)\s*$", re.ASCII)


def parse_size(value: object) -> int:
    """Bytes in ``value``: a positive int, or a string of a positive number and a unit
    (rounded down to whole bytes); at most ``MAX_TRIAL_MEMORY_BYTES``."""
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    elif isinstance(value, str):
        match = _PATTERN.match(value)
        if match is None:
            raise ConfigError(f"{EXPECTED}, got {_shown(value)}")
        unit = match.group(2).lower()
        if unit not in UNITS:
            raise ConfigError(f"unknown unit {match.group(2)!r}; {EXPECTED}, got {_shown(value)}")
        if len(match.group(1)) > 30:
            raise ConfigError(f"{EXPECTED}, got {_shown(value)}")
        size = int(Decimal(match.group(1)) * UNITS[unit])   # exact: 1.5GiB is 1610612736 bytes
    else:
        raise ConfigError(f"{EXPECTED}, got {_shown(value)}")
    if size <= 0:
        raise ConfigError(f"a size must be at least 1 byte; {EXPECTED}, got {_shown(value)}")
    if size > MAX_TRIAL_MEMORY_BYTES:
        raise ConfigError(f"at most {MAX_TRIAL_MEMORY_BYTES // 2**40:,}TiB is allowed (see Limits in "
                          f"docs/config.md), got {_shown(value)}")
    return size


def _shown(value: object) -> str:
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else "a huge integer"
    return text if len(text) <= 80 else text[:77] + "..."
