"""Reading config and search-space files with ruamel.yaml, keeping line/column positions.

A ``Source`` remembers the parsed document so that a field path such as
``tuner.classArgs.optimize_mode`` can be turned into ``config.yml:7:19`` in a ConfigError.
"""
from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping
from typing import Any, Iterator, cast

from expmgr import strict_json

from ._errors import ConfigError, Key, PathSegment, Problem, format_path
from ._keys import norm
from ._limits import MAX_CONFIG_BYTES, MAX_SEARCH_SPACE_BYTES, MAX_YAML_NODES


@dataclass
class Source:
    """A parsed file: its name as shown to the user and its ruamel document (None if unknown)."""

    file: Path
    doc: Any = None
    json_text: str | None = None
    """The text of a JSON file, located by ``_locate_json`` instead of a ruamel document (a
    round-trip parse of a large JSON file, done only for positions, takes seconds)."""
    nodes: Any = None
    """The composed node tree of a large YAML file (``parse_yaml_fast``), located by
    ``_locate_nodes`` instead of a round-trip document."""
    # top-level field values right after loading; a field changed since then is reported
    # without a file position
    snapshot: dict[str, Any] = field(default_factory=dict)
    key_order: list[str] = field(default_factory=list)
    # (normalised v2 path prefix, path in the file) for fields written under another key:
    # NNI's v1 keys (``trial.command`` for trialCommand), ``advisor`` for tuner
    renames: list[tuple[tuple[str | int, ...], tuple[PathSegment, ...]]] = field(default_factory=list)

    def in_file(self, path: tuple[PathSegment, ...]) -> tuple[PathSegment, ...]:
        """``path`` as written in the file: the longest renamed prefix replaced."""
        normalised = tuple(norm(seg) if isinstance(seg, str) else seg for seg in path)
        best: tuple[tuple[str | int, ...], tuple[PathSegment, ...]] | None = None
        for prefix, written in self.renames:
            if normalised[:len(prefix)] == prefix and (best is None or len(prefix) > len(best[0])):
                best = (prefix, written)
        return path if best is None else best[1] + path[len(best[0]):]

    def locate(self, path: tuple[PathSegment, ...], at_key: bool = False) -> tuple[int | None, int | None]:
        """1-based (line, column) of ``path`` in the document: the value, or the key if ``at_key``.

        When the path leads to a mapping or list, or stops early (a missing key), the position
        is that of the last key found; with nothing found, the start of the document.
        """
        if self.json_text is not None:
            return _locate_json(self.json_text, path, at_key)
        if self.nodes is not None:
            return _locate_nodes(self.nodes, path, at_key)
        node = self.doc
        if node is None or not hasattr(node, "lc"):
            return None, None
        key_pos: tuple[int, int] | None = (node.lc.line, node.lc.col)
        pos = key_pos
        for i, seg in enumerate(path):
            last = i == len(path) - 1
            if isinstance(seg, Key) and isinstance(node, list) and len(node) == 1 and isinstance(node[0], dict):
                node = node[0]   # trainingService given as a list of one
            if isinstance(seg, int) and not isinstance(seg, bool):
                if not isinstance(node, list) or not 0 <= seg < len(node):
                    pos = key_pos
                    break
                key_pos = pos = _lc(cast(Any, node).lc.item(seg))   # a ruamel CommentedSeq
                node = node[seg]
                continue
            found = _find_key(node, seg) if isinstance(node, dict) else _MISSING
            if found is _MISSING:
                pos = key_pos
                break
            key_pos = _lc(node.lc.key(found))
            value = node[found]
            if at_key and last:
                pos = key_pos
            else:
                pos = _lc(node.lc.value(found))
                if isinstance(value, (dict, list)) and (pos is None or key_pos is None or pos[0] != key_pos[0]):
                    pos = key_pos   # a block mapping/list below its key: point at the key
            node = value
        if pos is None:
            return None, None
        return pos[0] + 1, pos[1] + 1

    def error(self, problem: Problem) -> ConfigError:
        path = problem.path if problem.skip else self.in_file(problem.path)
        line, column = self.locate(path[problem.skip:], problem.at_key)
        return ConfigError(problem.message, file=self.file, line=line, column=column,
                           field=format_path(path) or None)


_MISSING = object()
_JSON_SPACE = re.compile(r"[ \t\n\r]*")


def _locate_json(text: str, path: tuple[PathSegment, ...], at_key: bool) -> tuple[int | None, int | None]:
    """``Source.locate`` in JSON text, walking it with the json module's own scanner: only
    the containers on the path are read key by key; the values beside it are skipped whole
    (``raw_decode``, at C speed)."""
    decoder = json.JSONDecoder()

    def skip(i: int) -> int:
        return cast(re.Match, _JSON_SPACE.match(text, i)).end()

    def line_of(i: int) -> int:
        return text.count("\n", 0, i)

    def after_item(i: int) -> int:
        i = skip(decoder.raw_decode(text, i)[1])
        return skip(i + 1) if text.startswith(",", i) else i

    try:
        pos = key_pos = skip(0)
        for index, seg in enumerate(path):
            last = index == len(path) - 1
            if isinstance(seg, int) and not isinstance(seg, bool):
                if not text.startswith("[", pos):
                    pos = key_pos
                    break
                i, n = skip(pos + 1), 0
                while not text.startswith("]", i) and n < seg:
                    i, n = after_item(i), n + 1
                if text.startswith("]", i):
                    pos = key_pos
                    break
                key_pos = pos = i
                continue
            if not text.startswith("{", pos):
                pos = key_pos
                break
            i, found = skip(pos + 1), None
            while text.startswith('"', i):
                key, after_key = json.decoder.scanstring(text, i + 1)   # type: ignore[attr-defined]
                value_at = skip(skip(after_key) + 1)   # past the colon
                if _find_key({key: None}, seg) is not _MISSING:
                    found = (i, value_at)
                    break
                i = after_item(value_at)
            if found is None:
                pos = key_pos
                break
            key_pos = found[0]
            pos = key_pos if at_key and last else found[1]
            if text.startswith(("{", "["), pos) and line_of(pos) != line_of(key_pos):
                pos = key_pos   # a block below its key: point at the key
    except (ValueError, IndexError):   # cannot happen for text json.loads read; no position then
        return None, None
    return line_of(pos) + 1, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _locate_nodes(root: Any, path: tuple[PathSegment, ...], at_key: bool) -> tuple[int | None, int | None]:
    """``Source.locate`` in a composed YAML node tree, by the same rules."""
    from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode

    def at(node: Any) -> tuple[int, int]:
        return node.start_mark.line, node.start_mark.column

    node = root
    pos = key_pos = at(node)
    for index, seg in enumerate(path):
        last = index == len(path) - 1
        if (isinstance(seg, Key) and isinstance(node, SequenceNode) and len(node.value) == 1
                and isinstance(node.value[0], MappingNode)):
            node = node.value[0]   # trainingService given as a list of one
        if isinstance(seg, int) and not isinstance(seg, bool):
            if not isinstance(node, SequenceNode) or not 0 <= seg < len(node.value):
                pos = key_pos
                break
            node = node.value[seg]
            key_pos = pos = at(node)
            continue
        found = None
        if isinstance(node, MappingNode):
            for key_node, value_node in node.value:
                if isinstance(key_node, ScalarNode) and _find_key({key_node.value: None}, seg) is not _MISSING:
                    found = key_node, value_node
                    break
        if found is None:
            pos = key_pos
            break
        key_pos = at(found[0])
        node = found[1]
        pos = key_pos if at_key and last else at(node)
        if isinstance(node, (MappingNode, SequenceNode)) and pos[0] != key_pos[0]:
            pos = key_pos   # a block mapping/list below its key: point at the key
    return pos[0] + 1, pos[1] + 1


def _find_key(mapping: dict, seg: PathSegment) -> Any:
    if isinstance(seg, Key):
        for k in mapping:
            if isinstance(k, str) and norm(k) == norm(seg):
                return k
        return _MISSING
    for k in mapping:
        if k == seg or str(k) == seg:
            return k
    return _MISSING


def _lc(pair: Any) -> tuple[int, int] | None:
    try:
        return int(pair[0]), int(pair[1])
    except (TypeError, IndexError, ValueError):
        return None


def display_path(path: Path) -> Path:
    """``path`` relative to the working directory when inside it, else absolute."""
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


def read_text(real: Path, what: str = "config file", limit: int = MAX_CONFIG_BYTES) -> str:
    """The UTF-8 text of ``real``; ConfigError (without a file set) when it cannot be read
    or holds more than ``limit`` bytes (read no further than that)."""
    try:
        with open(real, "rb") as stream:
            data = stream.read(limit + 1)
        if len(data) > limit:
            raise ConfigError(f"{what} is larger than the limit of {limit // (1024 * 1024)} MiB "
                              f"(see Limits in docs/config.md)")
        return data.decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what} not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{what} expected, but this is a directory") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {what}: {exc.strerror or exc}") from None


FAST_YAML_BYTES = 64 * 1024
"""YAML texts at least this long are parsed by libyaml (ruamel.yaml.clib) into plain values
and located through their node tree: ruamel's round-trip parser, pure Python, takes tens of
seconds over a 100,000-option ``choice`` on a loaded machine; libyaml takes a tenth of that."""


def load_yaml(text: str, shown: Path) -> tuple[Any, Source]:
    """The document of ``text`` (a round-trip ruamel document, or plain values when it is
    long) and a Source that locates paths in it; YAML errors become ConfigError at their
    position."""
    with _yaml_errors(shown):
        fast = _fast_yaml() if len(text) >= FAST_YAML_BYTES else None
        if fast is None:
            doc = _round_trip_yaml().load(text)
            source = Source(shown, doc)
        else:
            nodes = fast.compose(text)
            doc = None if nodes is None else fast.constructor.construct_document(nodes)
            source = Source(shown, nodes=nodes)
    _check_alias_expansion(doc, shown)
    try:
        _check_plain_values(doc, shown)
    except ConfigError:
        if source.nodes is None:
            raise
        with _yaml_errors(shown):   # plain values carry no positions: find the culprit's in a round trip
            _check_plain_values(_round_trip_yaml().load(text), shown)
        raise
    return doc, source


def parse_yaml(text: str, shown: Path) -> Any:
    """The document of ``text``, as ``load_yaml``."""
    return load_yaml(text, shown)[0]


def _round_trip_yaml() -> Any:
    from ruamel.yaml import YAML
    return YAML(typ="rt")


def _fast_yaml() -> Any:
    """A safe loader on libyaml's parser, or None without ruamel.yaml.clib."""
    try:
        import _ruamel_yaml  # noqa: F401  (ruamel.yaml.clib)
    except ImportError:
        return None
    from ruamel.yaml import YAML
    return YAML(typ="safe")


@contextlib.contextmanager
def _yaml_errors(shown: Path) -> Iterator[None]:
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    try:
        yield
    except RecursionError:
        raise ConfigError("invalid YAML: nested too deeply", file=shown) from None
    except ValueError as exc:   # e.g. an integer of more than 4,300 digits
        raise ConfigError(f"invalid YAML: {str(exc).split(';')[0]}", file=shown) from None
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        line = mark.line + 1 if mark is not None else None
        column = mark.column + 1 if mark is not None else None
        problem = problem.split("\n")[0].strip()
        raise ConfigError(f"invalid YAML: {problem}", file=shown, line=line, column=column) from None
    except YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}", file=shown) from None


_STANDARD_TAGS = {None, "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:omap",
                  "tag:yaml.org,2002:str"}
"""Tags that leave a value plain (a mapping, a list, a string)."""


def _check_plain_values(doc: Any, shown: Path) -> None:
    """Refuse what YAML can write and a config never means, at its line: a key that is not a
    string (``1:``, ``null:``, ``true:``, a complex ``? [a, b]`` key, an alias to a list), and
    a value of no JSON type (a date, ``!!binary``, ``!!set``, a tag such as ``!!python/object``).
    Each shared (aliased) node is walked once."""
    seen: set[int] = set()

    def refuse(message: str, position: Any) -> None:
        where = _lc(position) if position is not None else None
        raise ConfigError(message, file=shown, line=where[0] + 1 if where else None,
                          column=where[1] + 1 if where else None)

    def check(node: Any, position: Any) -> None:
        if isinstance(node, (dict, list)):
            if id(node) in seen:
                return
            seen.add(id(node))
            tag = getattr(getattr(node, "tag", None), "value", None)
            if tag not in _STANDARD_TAGS:
                refuse(f"the YAML tag {tag} is not supported; write a plain mapping or list", position)
            lc = getattr(node, "lc", None)
            if isinstance(node, dict):
                for key, value in node.items():
                    at_key = lc.key(key) if lc is not None else position
                    if not isinstance(key, str) or isinstance(key, TaggedScalar):
                        refuse(f"keys must be strings, got {_shown_node(key)}; quote a key such as '1'", at_key)
                    check(value, lc.value(key) if lc is not None else position)
            else:
                for index, value in enumerate(node):
                    check(value, lc.item(index) if lc is not None else position)
        elif isinstance(node, TaggedScalar):
            tag = getattr(node.tag, "value", None)
            if tag != "tag:yaml.org,2002:str":
                refuse(f"the YAML tag {tag} is not supported; write a plain value", position)
        elif node is not None and not isinstance(node, (str, int, float, bool)):
            refuse(f"expected a string, number, boolean, list or mapping, got {_shown_node(node)}; "
                   "quote it to give a string", position)

    from ruamel.yaml.comments import TaggedScalar
    try:
        check(doc, (0, 0))
    except RecursionError:
        raise ConfigError("invalid YAML: nested too deeply", file=shown) from None


def _shown_node(node: Any) -> str:
    """A YAML value as an error shows it: its kind, and what it is when short."""
    if isinstance(node, (dict, list, tuple, Mapping)):   # a complex key: ruamel's CommentedKeySeq/KeyMap
        return "a mapping" if isinstance(node, Mapping) else "a list"
    if node is None or isinstance(node, (bool, int, float)):
        return repr(node if not isinstance(node, bool) else bool(node))
    kind = {bytes: "binary data (!!binary)"}.get(type(node), type(node).__name__)
    return f"{kind} {str(node)[:40]!r}" if not isinstance(node, bytes) else kind


def _check_alias_expansion(doc: Any, shown: Path) -> None:
    """Refuse a document whose aliases expand it past MAX_YAML_NODES values (a "billion
    laughs" would hang whoever walks it) or into itself. Sizes are memoized per shared
    node, so this takes time in the document's written size, not its expanded one."""
    sizes: dict[int, int] = {}
    written = 0   # values as written: each container once, with its direct children

    def size(node: Any) -> int:
        nonlocal written
        if not isinstance(node, (dict, list)):
            return 1
        known = sizes.get(id(node))
        if known is not None:
            if known < 0:
                raise ConfigError("a YAML alias refers to a value that contains it", file=shown)
            return known
        sizes[id(node)] = -1   # being counted: meeting it again is a cycle
        children = list(node.values()) if isinstance(node, dict) else node
        written += 1 + len(children)
        total = 1 + sum(size(child) for child in children)
        sizes[id(node)] = total
        return total

    try:
        expanded = size(doc)
    except RecursionError:
        raise ConfigError("invalid YAML: nested too deeply", file=shown) from None
    if expanded <= MAX_YAML_NODES or expanded <= written:
        return   # a document that large without aliases is not refused here
    line = column = None
    if isinstance(doc, (dict, list)) and hasattr(doc, "lc"):   # point at the top-level entry that crosses it
        keys = list(doc) if isinstance(doc, dict) else list(range(len(doc)))
        cumulative = 1
        for key in keys:
            cumulative += size(doc[key])
            if cumulative > MAX_YAML_NODES:
                pos = _lc(doc.lc.key(key) if isinstance(doc, dict) else doc.lc.item(key))
                if pos is not None:
                    line, column = pos[0] + 1, pos[1] + 1
                break
    raise ConfigError(f"YAML aliases expand this document to more than {MAX_YAML_NODES:,} values; "
                      f"write the values out or use fewer aliases", file=shown, line=line, column=column)


def to_plain(node: Any) -> Any:
    """Plain dict/list/str/int/float/bool/None from a ruamel document (order kept)."""
    if isinstance(node, dict):
        return {to_plain(k): to_plain(v) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [to_plain(v) for v in node]
    if isinstance(node, bool):
        return bool(node)
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    if hasattr(node, "value") and getattr(getattr(node, "tag", None), "value", None) == "tag:yaml.org,2002:str":
        return str(node.value)   # !!str 5: a TaggedScalar in ruamel's round-trip document
    return node


def type_name(node: Any) -> str:
    if isinstance(node, list):
        return "a list"
    if isinstance(node, str):
        return "a string"
    if isinstance(node, bool):
        return "a boolean"
    if isinstance(node, (int, float)):
        return "a number"
    return type(node).__name__


def read_search_space_file(real: Path) -> tuple[Any, Source]:
    """The content of a search-space file (.json as JSON, .yml/.yaml as YAML) and its Source."""
    shown = display_path(real)
    try:
        text = read_text(real, "search space file", MAX_SEARCH_SPACE_BYTES)
    except ConfigError as exc:
        exc.file = shown
        raise
    if not text.strip():
        raise ConfigError("search space file is empty", file=shown)
    is_json = real.suffix.lower() == ".json"
    if not is_json and real.suffix.lower() not in (".yml", ".yaml"):
        is_json = text.lstrip().startswith(("{", "["))
    if is_json:
        try:
            value = strict_json.loads(text)
        except strict_json.DuplicateKeyError as exc:  # json.loads alone would keep the last silently
            raise ConfigError(f"invalid JSON: {exc}", file=shown) from None
        except RecursionError:
            raise ConfigError("invalid JSON: nested too deeply", file=shown) from None
        except json.JSONDecodeError as exc:
            raise ConfigError(f"invalid JSON: {exc.msg}", file=shown, line=exc.lineno,
                              column=exc.colno) from None
        return value, Source(shown, json_text=text)
    doc, source = load_yaml(text, shown)
    if doc is None:
        raise ConfigError("search space file is empty", file=shown)
    return to_plain(doc), source
