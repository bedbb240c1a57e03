"""YAML text of JSON-like data (dicts, lists, str, int, float, bool, None), laid out as the
experiment folder's config.yml: block mappings indented by 2, lists of plain values inline
(``_value: [16, 32]``), other lists in block style with the dash indented by 2. A string is
written plain where every YAML reader (1.1 or 1.2) reads it back as that string, else
double-quoted (JSON's escapes are YAML's). Written here rather than by ruamel.yaml, which
stays the reader (for its line numbers): an experiment built in Python writes its config.yml
at every start and would import a YAML library for nothing else::

    yaml_text({"trialCommand": "python3 trial.py", "searchSpace": {"x": {"_type": "choice", "_value": [1, 2]}}})
    # 'trialCommand: python3 trial.py\\nsearchSpace:\\n  x:\\n    _type: choice\\n    _value: [1, 2]\\n'
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./$+=-]*(?: [A-Za-z0-9_./$+=-]+)*")
"""Strings written without quotes: no character YAML gives a meaning to (``:#,[]{}&*!|>'"%@```),
no leading digit, sign or dot (numbers, ``.inf``), no leading or trailing space."""
_RESERVED = frozenset({"true", "false", "null", "yes", "no", "on", "off", "y", "n"})
"""Plain words that a YAML reader takes for a bool or null (YAML 1.1's included), in any case."""
_NOT_LITERAL = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]")
"""Characters a quoted YAML string must not hold as they are (not printable, or a line break
to YAML 1.1); JSON escapes the other control characters itself."""


def yaml_text(data: dict[str, Any]) -> str:
    """``data`` as a YAML document (see the module docstring)."""
    if not data:
        return "{}\n"
    return "".join(line + "\n" for line in _mapping_lines(data, 0))


def _mapping_lines(mapping: dict, indent: int) -> list[str]:
    pad = " " * indent
    lines = []
    for key, value in mapping.items():
        head = f"{pad}{_scalar(key)}:"
        if _is_inline(value):
            lines.append(f"{head} {_inline(value)}")
        elif isinstance(value, dict):
            lines.append(head)
            lines.extend(_mapping_lines(value, indent + 2))
        else:
            lines.append(head)
            lines.extend(_sequence_lines(value, indent + 2))
    return lines


def _sequence_lines(sequence: list, indent: int) -> list[str]:
    pad = " " * indent
    lines = []
    for item in sequence:
        if _is_inline(item):
            lines.append(f"{pad}- {_inline(item)}")
        elif isinstance(item, dict):  # its first key on the dash's line, the others under it
            first, *rest = _mapping_lines(item, indent + 2)
            lines.append(f"{pad}- {first[indent + 2:]}")
            lines.extend(rest)
        else:
            lines.append(f"{pad}-")
            lines.extend(_sequence_lines(item, indent + 2))
    return lines


def _is_inline(value: Any) -> bool:
    """A scalar, an empty collection, or a list of scalars (written ``[1, 2]``)."""
    if isinstance(value, dict):
        return not value
    if isinstance(value, list):
        return not any(isinstance(item, (dict, list)) for item in value)
    return True


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[" + ", ".join(_scalar(item) for item in value) + "]"
    return _scalar(value)


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        if "e" in text and "." not in text:  # YAML 1.1 reads 1e-05 as a string, 1.0e-05 as a float
            mantissa, _, exponent = text.partition("e")
            text = f"{mantissa}.0e{exponent}"
        return text
    if isinstance(value, str):
        if _PLAIN.fullmatch(value) and value.lower() not in _RESERVED:
            return value
        quoted = json.dumps(value, ensure_ascii=False)
        return _NOT_LITERAL.sub(lambda match: f"\\u{ord(match.group()):04x}", quoted)
    raise TypeError(f"not JSON-like data: {value!r}")
