"""parse_duration: NNI's duration strings (s, m, h, d) or a number of seconds."""
from __future__ import annotations

import pytest

from expmgr.config import ConfigError, parse_duration


@pytest.mark.parametrize("value,seconds", [
    (30, 30.0), (2.5, 2.5), ("30s", 30.0), ("10m", 600.0), ("1.5h", 5400.0), ("2d", 172800.0),
    ("10M", 600.0), (" 5 s ", 5.0), (".5h", 1800.0),
])
def test_valid_durations_become_seconds(value: object, seconds: float) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", ["10x", "-5m", "ten minutes", "", "5", "1h30m", "m", 0, -1, True, None,
                                   float("inf"), float("nan"), [1]])
def test_invalid_durations_say_the_expected_format(value: object) -> None:
    with pytest.raises(ConfigError, match=r"30s, 10m, 1\.5h or 2d"):
        parse_duration(value)


def test_unknown_unit_is_named() -> None:
    with pytest.raises(ConfigError, match="unknown unit 'x'"):
        parse_duration("10x")
