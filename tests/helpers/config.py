"""Helpers for the config tests: write a config file and load it, expecting success or a ConfigError."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from expmgr.config import ConfigError, ExperimentConfig


def write(path: Path, text: str) -> Path:
    """Write dedented ``text`` (leading newline dropped) to ``path``, creating folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def load_error(path: Path, text: str | None = None) -> ConfigError:
    """The ConfigError raised by loading ``path`` (written from ``text`` first when given)."""
    if text is not None:
        write(path, text)
    with pytest.raises(ConfigError) as info:
        ExperimentConfig.load(path)
    return info.value


def assert_error(err: ConfigError, file: Path, line: int, field: str, fragment: str,
                 column: int | None = None) -> None:
    assert err.file == file, str(err)
    assert err.line == line, str(err)
    if column is not None:
        assert err.column == column, str(err)
    assert err.field == field, str(err)
    assert fragment in err.message, str(err)
    where = f"{file}:{line}:{err.column}" if err.column is not None else f"{file}:{line}"
    assert str(err) == f"{where}: {field}: {err.message}"


# a valid config, 12 lines; tests change one line or append lines 13+
GOOD = """\
experimentName: demo
searchSpace:
  lr: {_type: loguniform, _value: [0.0001, 0.1]}
trialCommand: python3 trial.py
trialConcurrency: 2
maxTrialNumber: 10
tuner:
  name: TPE
  classArgs:
    optimize_mode: maximize
trainingService:
  platform: local
"""


def good_with(old: str, new: str) -> str:
    """GOOD with one line replaced (``old`` must occur exactly once)."""
    assert GOOD.count(old) == 1, old
    return GOOD.replace(old, new)
