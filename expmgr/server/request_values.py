"""Values read from a request (its path, query or body), bounded before they are used: an
integer has at most ``MAX_INTEGER_DIGITS`` digits and lies within a signed 64-bit integer
(what SQLite and a file offset take); anything else is a RequestError (400) naming the
parameter, never a 500 from deeper down (sqlite's OverflowError, int()'s 4,300-digit limit)::

    offset = integer("offset", raw, minimum=None)
    report = json_body(request.body)          # a RequestError (400) when it is not JSON
"""
from __future__ import annotations

import re
from typing import Any

from expmgr import strict_json
from expmgr.engine.errors import RefusalKind
from expmgr.server.refusals import RequestError

INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1
MAX_INTEGER_DIGITS = 19
"""The digits of INT64_MAX: more is out of range whatever they are, and is refused before int() reads them."""
_INTEGER = re.compile(rf"-?[0-9]{{1,{MAX_INTEGER_DIGITS}}}")


def _expected(minimum: int | None) -> str:
    return ("an integer" if minimum is None else "a non-negative integer" if minimum == 0
            else "a positive integer" if minimum == 1 else f"an integer of at least {minimum}")


def integer(name: str, raw: str, minimum: int | None = 0) -> int:
    """``raw`` (text of a path or query) as an integer of at least ``minimum`` (None: any)
    within a signed 64-bit integer; a RequestError (INVALID) naming ``name`` otherwise."""
    if _INTEGER.fullmatch(raw) is not None:
        value = int(raw)
        if INT64_MIN <= value <= INT64_MAX and (minimum is None or value >= minimum):
            return value
    shown = raw if len(raw) <= 40 else f"{raw[:40]}... ({len(raw)} characters)"
    raise RequestError(RefusalKind.INVALID, f"{name}: expected {_expected(minimum)}, got {shown!r} (at most "
                                            f"{MAX_INTEGER_DIGITS} digits, within a signed 64-bit integer)")


def json_integer(name: str, value: Any, minimum: int | None = 0) -> int:
    """``value`` (of a JSON body) as ``integer`` checks it: an int (not a bool) in range."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(RefusalKind.INVALID, f"{name}: expected {_expected(minimum)}, got {value!r}")
    if not INT64_MIN <= value <= INT64_MAX or (minimum is not None and value < minimum):
        raise RequestError(RefusalKind.INVALID, f"{name}: expected {_expected(minimum)}, got {value} "
                                                "(within a signed 64-bit integer)")
    return value


def json_body(body: bytes) -> Any:
    """A request's body as JSON (strict_json: an object naming a key twice is refused); a
    RequestError (INVALID) saying why when it is not JSON, not UTF-8 or nested too deep."""
    try:
        return strict_json.loads(body)
    except strict_json.DuplicateKeyError as error:
        raise RequestError(RefusalKind.INVALID, f"body: {error}") from None
    except (ValueError, RecursionError) as error:  # RecursionError: nested too deep
        raise RequestError(RefusalKind.INVALID, f"body: not JSON ({error})") from None
