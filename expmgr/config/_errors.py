"""ConfigError, the one exception of the config package, and the field paths it reports.

Validation code raises the private ``Problem`` with a path of keys; the loader turns it into a
``ConfigError`` that knows the file, line and column of that path.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:  # _loader imports this module
    from ._loader import Source


class ConfigError(Exception):
    """A config that cannot be used, with where the problem is.

    Attributes: ``file`` (Path or None), ``line`` and ``column`` (1-based or None), ``field``
    (dotted camelCase path such as ``tuner.classArgs.optimize_mode``) and ``message``.
    ``str(err)`` reads ``config.yml:7:19: trialConcurrency: expected a positive integer, got -1``.
    """

    def __init__(self, message: str, *, file: Path | str | None = None, line: int | None = None,
                 column: int | None = None, field: str | None = None,
                 display_field: str | None = None) -> None:
        self.message = message
        self.file = Path(file) if file is not None else None
        self.line = line
        self.column = column
        self.field = field
        # how the field is shown: camelCase, or ExperimentConfig.snake_case for Python-built configs
        self.display_field = display_field if display_field is not None else field
        super().__init__(message)

    def __str__(self) -> str:
        parts = []
        if self.file is not None:
            where = str(self.file)
            if self.line is not None:
                where += f":{self.line}"
                if self.column is not None:
                    where += f":{self.column}"
            parts.append(where)
        if self.display_field:
            parts.append(self.display_field)
        parts.append(self.message)
        return ": ".join(parts)

    def __repr__(self) -> str:
        return f"ConfigError({str(self)!r})"

    def __reduce__(self):  # keep the attributes across pickling (e.g. to a subprocess)
        return (_rebuild, (self.message, self.file, self.line, self.column, self.field,
                           self.display_field))


def _rebuild(message, file, line, column, field, display_field) -> ConfigError:
    return ConfigError(message, file=file, line=line, column=column, field=field,
                       display_field=display_field)


class Key(str):
    """A config key in a field path, held in snake_case; ``.camel`` is its YAML spelling."""

    @property
    def camel(self) -> str:
        return snake_to_camel(self)


PathSegment = Union[Key, str, int]   # Key: config key; str: user key (parameter name); int: list index


def snake_to_camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def format_path(path: tuple[PathSegment, ...], style: str = "camel") -> str:
    """``("tuner", "class_args", "optimize_mode")`` -> ``tuner.classArgs.optimize_mode``.

    ``style`` is ``"camel"`` (YAML spelling) or ``"snake"`` (Python attribute spelling).
    """
    out = ""
    for seg in path:
        if isinstance(seg, int) and not isinstance(seg, bool):
            out += f"[{seg}]"
            continue
        name = seg.camel if isinstance(seg, Key) and style == "camel" else str(seg)
        out += ("." if out else "") + name
    return out


class Problem(Exception):
    """Internal: a validation failure at ``path``; turned into a ConfigError by the caller.

    ``at_key`` points the position at the key (unknown keys) rather than the value.
    ``source`` is set when the path lives in another file (a searchSpaceFile); ``skip`` is how
    many leading path segments are not part of that file.
    """

    def __init__(self, path: tuple[PathSegment, ...], message: str, *, at_key: bool = False,
                 source: Source | None = None, skip: int = 0) -> None:
        super().__init__(message)
        self.path = tuple(path)
        self.message = message
        self.at_key = at_key
        self.source = source
        self.skip = skip
