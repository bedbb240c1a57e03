"""Config keys: camelCase and snake_case spellings of one field, and did-you-mean for unknown keys.

Keys match NNI's way: case and underscores are ignored, so ``trialConcurrency``,
``trial_concurrency`` and ``TrialConcurrency`` are the same key.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from ._errors import PathSegment, Problem, snake_to_camel


def norm(key: str) -> str:
    return key.lower().replace("_", "")


def spell(name: str, style: str) -> str:
    """A snake_case field name as the user sees it: camelCase in files and dicts, snake in Python."""
    return snake_to_camel(name) if style == "camel" else name


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """The choice closest to ``word`` ignoring case and underscores, or None."""
    import difflib

    by_norm = {norm(c): c for c in choices}
    close = difflib.get_close_matches(norm(word), list(by_norm), n=1, cutoff=0.6)
    return by_norm[close[0]] if close else None


def unknown_message(what: str, word: str, choices: Sequence[str], known_label: str) -> str:
    """``unknown <what> 'x'; did you mean 'y'? known <label>: a, b`` (did-you-mean when close)."""
    guess = did_you_mean(word, choices)
    text = f"unknown {what} {word!r}"
    if guess is not None:
        text += f"; did you mean {guess!r}?"
    return f"{text} (known {known_label}: {', '.join(choices)})"


def match_keys(mapping: Mapping[object, object], fields: Sequence[str], path: tuple[PathSegment, ...],
               style: str, hints: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``{snake_field: value}`` for each key of ``mapping``, in the mapping's order.

    Raises Problem (pointing at the key) for a key that is not one of ``fields``, with a
    did-you-mean; ``hints`` maps a normalised key to a more helpful message for it.
    """
    by_norm = {norm(f): f for f in fields}
    result: dict[str, Any] = {}  # values as given: the canonicalizer checks their types
    for key, value in mapping.items():
        if not isinstance(key, str):
            raise Problem(path + (str(key),), f"keys must be strings, got {key!r}", at_key=True)
        name = by_norm.get(norm(key))
        if name is None:
            if hints and norm(key) in hints:
                raise Problem(path + (key,), hints[norm(key)], at_key=True)
            shown = [spell(f, style) for f in fields]
            guess = did_you_mean(key, shown)
            if guess is not None:
                message = f"unknown key; did you mean {guess!r}?"
            else:
                message = f"unknown key; known keys: {', '.join(shown)}"
            raise Problem(path + (key,), message, at_key=True)
        if name in result:
            raise Problem(path + (key,), f"{spell(name, style)!r} is given twice", at_key=True)
        result[name] = value
    return result

