"""Safe YAML loading that remembers where every value came from (line and column).

``load_yaml`` returns plain Python data plus a ``Positions`` map from a value's path (a tuple of
keys and list indexes) to its place in the file, so any error found later can point at the line.
Anchors are allowed, but the expanded document is bounded, so a "billion laughs" bomb fails fast.

The text is parsed by libyaml where pyyaml has it (``yamlnodes``: its events composed into light nodes),
several times faster than pyyaml's pure-Python loader, with the same values, tags and line:column marks.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from yaml.constructor import SafeConstructor

from ..errors import DatasetError, Problem
from ..secrets import looks_secret
from . import yamlnodes
from .yamlnodes import MAPPING, SCALAR, SEQUENCE, STR_TAG, Node

Path = tuple[str | int, ...]

MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_ALIAS_VISITS = 100_000
MAX_DEPTH = 64
MAX_EXPANDED_CHARS = 4 * MAX_FILE_BYTES

_INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

@dataclass
class Positions:
    """Where each path of a loaded document sits in its file: read off the document's nodes when asked (a YAML
    file), or from ``values`` and ``keys`` (a JSONL line), 1-based."""

    file: str
    values: dict[Path, tuple[int, int]] = field(default_factory=dict)
    keys: dict[Path, tuple[int, int]] = field(default_factory=dict)
    root: Node | None = None
    _index: dict[int, dict[Any, tuple[Node, Node]]] = field(default_factory=dict, repr=False, compare=False)

    def where(self, path: Sequence[str | int], *, key: bool = False) -> str:
        """``FILE:LINE:COL`` of the deepest known part of ``path`` (its key, if asked and known)."""
        spot = self._spot(tuple(path), key)
        return f"{self.file}:{spot[0]}:{spot[1]}" if spot else self.file

    def line(self, path: Sequence[str | int]) -> int | None:
        """The 1-based line of the value at ``path`` (of the deepest known part of it), if known."""
        spot = self._spot(tuple(path), False)
        return spot[0] if spot else None

    def _spot(self, path: Path, key: bool) -> tuple[int, int] | None:
        """1-based (line, column) of the deepest known part of ``path`` (its key, if asked and known); ``None`` when
        no part of it is known."""
        if self.root is not None:
            line, column = self._locate(path, key)
            return line + 1, column + 1
        while True:
            spot = (self.keys.get(path) if key else None) or self.values.get(path)
            if spot is not None or not path:
                return spot
            path = path[:-1]
            key = False

    def _locate(self, path: Path, key: bool) -> tuple[int, int]:
        """The place of the deepest node along ``path`` (of its key, when asked and the whole path is found).
        Keys are matched as ``load_yaml`` made them; a repeated key finds its last occurrence (the value kept)."""
        assert self.root is not None
        node, spot, key_spot = self.root, yamlnodes.place(self.root), None
        for part in path:
            if node[0] == MAPPING:
                index = self._index.get(id(node))
                if index is None:  # each mapping is indexed once, when first asked about
                    index = self._index[id(node)] = {_key_of(k): (k, v) for k, v in node[1] if k[0] == SCALAR}
                found = index.get(part)
                if found is None:
                    return spot
                key_spot, node = yamlnodes.place(found[0]), found[1]
            elif node[0] == SEQUENCE and type(part) is int and 0 <= part < len(node[1]):
                key_spot, node = None, node[1][part]
            else:
                return spot
            spot = yamlnodes.place(node)
        return key_spot if key and key_spot is not None else spot

    def problem(self, path: Sequence[str | int], message: str, hint: str = "", *, key: bool = False) -> Problem:
        return Problem(self.where(path, key=key), message, hint)


def _key_of(node: Node) -> str | int:
    """A mapping key as a path part: its string, int, or the string of anything else."""
    if node[1] == STR_TAG:
        return str(node[2])
    try:
        key = _constructor.construct_object(yaml.ScalarNode(node[1], node[2], style=node[5]))
    except Exception:  # noqa: BLE001 - a key that cannot be read was reported when loading
        return str(node[2])
    return key if isinstance(key, (str, int)) else str(key)


_constructor = SafeConstructor()


@dataclass
class Interpolated:
    """What loading noticed besides the data: environment variables used, secret values that must never
    be shown, and mistakes that do not stop the rest of the file from being checked (an unset
    variable, a duplicate key)."""

    names: set[str] = field(default_factory=set)
    secret_values: set[str] = field(default_factory=set)
    problems: list[Problem] = field(default_factory=list)


class _Walker:
    def __init__(self, file: str, env: dict[str, str], aliased: bool = True) -> None:
        self.aliased = aliased
        """Whether some node is reached twice (through an alias): only then are visits counted."""
        self.positions = Positions(file)
        self.constructor = SafeConstructor()
        self.env = env
        self.used = Interpolated()
        self.problems: list[Problem] = []
        self.seen: set[int] = set()
        self.merged: dict[int, int] = {}
        """Per mapping node (by id): how many of its pairs came from merge keys (``<<``)."""
        self.alias_visits = 0
        self.expanded_chars = 0

    def walk(self, node: Node, path: Path) -> Any:
        revisit = False
        if self.aliased:
            revisit = id(node) in self.seen
            if revisit:
                self.alias_visits += 1
            self.seen.add(id(node))
        if self.alias_visits > MAX_ALIAS_VISITS:
            raise DatasetError([self.positions.problem(path, "the document expands to too many values (a YAML alias bomb?)",
                                                       "write the data out instead of nesting aliases")])
        if len(path) > MAX_DEPTH:
            raise DatasetError([self.positions.problem(path, f"nesting deeper than {MAX_DEPTH} levels",
                                                       "flatten the structure")])
        kind = node[0]
        if kind == MAPPING:
            return self._mapping(node, path)
        if kind == SEQUENCE:
            if self.aliased or len(path) >= MAX_DEPTH:
                return [self.walk(child, (*path, i)) for i, child in enumerate(node[1])]
            items = []
            for i, child in enumerate(node[1]):  # a string is the most common node: it is read here
                if child[0] == SCALAR and child[1] == STR_TAG:
                    text = child[2]
                    items.append(self._interpolate(text, (*path, i)) if "${" in text else text)
                else:
                    items.append(self.walk(child, (*path, i)))
            return items
        value = node[2] if node[1] == STR_TAG else self._construct(node)
        if revisit and isinstance(value, str):
            # few aliases of one long string expand to as much text as many aliases of short ones
            self.expanded_chars += len(value)
            if self.expanded_chars > MAX_EXPANDED_CHARS:
                raise DatasetError([self.positions.problem(
                    path, "the document expands to too much text through aliases (a YAML alias bomb?)",
                    "write the data out instead of repeating a long aliased value")])
        if isinstance(value, str) and "${" in value:
            return self._interpolate(value, path)
        return value

    def _construct(self, node: Node) -> Any:
        """A scalar of another tag than str (int, float, bool, null, timestamp, binary...), as pyyaml's
        ``SafeConstructor`` reads it."""
        _, tag, value, line, column, style = node
        start = yamlnodes.mark(line, column)
        try:
            return self.constructor.construct_object(yaml.ScalarNode(tag, value, start, start, style=style))
        except yaml.YAMLError:
            raise
        except Exception as exc:  # noqa: BLE001 - PyYAML's constructors raise plain errors on some bad values
            raise DatasetError([Problem(f"{self.positions.file}:{line + 1}:{column + 1}",
                                        f"cannot read this value as {tag.rsplit(':', 1)[-1]}: {exc}",
                                        "fix the value, or remove its '!!' tag")]) from None

    def _mapping(self, node: Node, path: Path) -> dict[Any, Any]:
        merged = self.merged.get(id(node))
        if merged is None:
            merged = self.merged[id(node)] = yamlnodes.flatten(node)
        result: dict[Any, Any] = {}
        written: set[Any] = set()
        plain = not self.aliased and len(path) < MAX_DEPTH
        for index, (key_node, value_node) in enumerate(node[1]):
            if key_node[0] != SCALAR:
                self.problems.append(self.positions.problem(path, "a mapping key must be a plain value",
                                                            "use a string key"))
                continue
            key = key_node[2] if key_node[1] == STR_TAG else self._construct(key_node)
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                key = str(key)
            if index >= merged:  # a key written out may override a merged one (and the first merged one wins)
                if key in written:
                    self.problems.append(Problem(f"{self.positions.file}:{key_node[3] + 1}:{key_node[4] + 1}",
                                                 f"duplicate key {key!r}", "each key may appear once; remove one of them"))
                written.add(key)
            part = key if isinstance(key, (str, int)) else str(key)
            if plain and value_node[0] == SCALAR and value_node[1] == STR_TAG:
                text = value_node[2]
                result[key] = self._interpolate(text, (*path, part)) if "${" in text else text
            else:
                result[key] = self.walk(value_node, (*path, part))
        return result

    def _interpolate(self, text: str, path: Path) -> str:
        def replace(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            self.used.names.add(name)
            value = self.env.get(name)
            if value is None or (value == "" and default is not None):
                if default is None:
                    self.problems.append(self.positions.problem(
                        path, f"environment variable {name} is not set",
                        f"set {name}, or give a default: ${{{name}:-value}}"))
                    return ""
                value = default
            if looks_secret(name, value):
                self.used.secret_values.add(value)
            return value

        return _INTERPOLATION.sub(replace, text)


def load_yaml(text: str, file: str, env: dict[str, str] | None = None) -> tuple[Any, Positions, Interpolated]:
    """Parse one YAML document safely. A document that cannot be read raises ``DatasetError`` with
    file:line:col; mistakes that leave it readable are returned in ``problems`` of the third value."""
    if len(text) > MAX_FILE_BYTES:
        raise DatasetError([Problem(file, f"file is {len(text) // (1024 * 1024)} MB; the limit is "
                                          f"{MAX_FILE_BYTES // (1024 * 1024)} MB",
                                    "split the data into a JSONL file named by 'data_file:'")])
    try:
        source = yamlnodes.parser(text)
    except yaml.reader.ReaderError as exc:  # a control character anywhere: pyyaml's reader checks the whole text
        raise DatasetError([_unprintable(exc, text, file, in_bytes=False)]) from None
    walker = _Walker(file, dict(os.environ) if env is None else env)
    try:
        node, walker.aliased = yamlnodes.compose(source)
        walker.positions.root = node
        data = walker.walk(node, ()) if node is not None else None
    except yaml.reader.ReaderError as exc:  # libyaml meets it while parsing, at a byte offset
        raise DatasetError([_unprintable(exc, text, file, in_bytes=True)]) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        if "maximum nesting depth" in str(exc.problem):  # libyaml's own limit (pyyaml 6.0.4's wheels), as ours
            raise DatasetError([Problem(f"{file}:{mark.line + 1}:{mark.column + 1}" if mark else file,
                                        f"the document is nested too deeply (the limit is {MAX_DEPTH} levels)",
                                        "flatten the structure")]) from None
        where = f"{file}:{mark.line + 1}:{mark.column + 1}" if mark else file
        raise DatasetError([Problem(where, f"not valid YAML: {exc.problem or exc.context}",
                                    "check the indentation and quoting on that line")]) from None
    except yaml.YAMLError as exc:
        raise DatasetError([Problem(file, f"not valid YAML: {exc}", "check the file's syntax")]) from None
    except yamlnodes.TooDeep as exc:  # where composing stopped: inside the deepest part
        raise DatasetError([Problem(f"{file}:{exc.line + 1}:{exc.column + 1}",
                                    f"the document is nested too deeply (the limit is {MAX_DEPTH} levels)",
                                    "flatten the structure")]) from None
    finally:
        dispose = getattr(source, "dispose", None)
        if dispose is not None:
            dispose()
    walker.used.problems.extend(walker.problems)
    return data, walker.positions, walker.used


def _unprintable(exc: yaml.reader.ReaderError, text: str, file: str, *, in_bytes: bool) -> Problem:
    position = len(text.encode("utf-8")[: exc.position].decode("utf-8", "ignore")) if in_bytes else exc.position
    line = text.count("\n", 0, position) + 1
    column = position - text.rfind("\n", 0, position)
    found = text[position] if position < len(text) else exc.character
    code = ord(found) if isinstance(found, str) and len(found) == 1 else found
    shown = f"{code:#04x}" if isinstance(code, int) else repr(code)
    return Problem(f"{file}:{line}:{column}", f"not valid YAML: control character {shown} is not allowed",
                   "remove it (inside double quotes it may be written as an escape, e.g. \\t)")


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest choice, or nothing."""
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def problems_from_pydantic(exc: ValidationError, path: Path, positions: Positions, what: str,
                           fields: Sequence[str]) -> list[Problem]:
    """Turn a pydantic ``ValidationError`` on the value at ``path`` into located problems."""
    problems = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        full = (*path, *loc)
        name = ".".join(str(part) for part in loc)
        if error["type"] == "extra_forbidden":
            problems.append(positions.problem(
                full, f"unknown key '{loc[-1]}' in {what}{did_you_mean(str(loc[-1]), fields)}",
                f"valid keys: {', '.join(fields)}", key=True))
        elif error["type"] == "missing":
            problems.append(positions.problem(path, f"{what} needs '{name}'", f"add '{name}: ...'"))
        else:
            message = str(error["msg"]).removeprefix("Value error, ")
            problems.append(positions.problem(full, f"{what}: '{name}': {message}" if name else f"{what}: {message}",
                                              "fix the value on that line"))
    return problems


M = TypeVar("M", bound=BaseModel)


def validated(model: type[M], raw: Any, path: Path, pos: Positions, what: str, problems: list[Problem],
              not_a_mapping: tuple[str, str]) -> M | None:
    """``raw`` validated as ``model``; else ``None``, after adding the problem ``not_a_mapping`` (message, hint) at
    ``path`` when it is not a mapping, or a located problem for each mistake (``what`` names the part of the file,
    e.g. ``item 3``)."""
    if not isinstance(raw, dict):
        problems.append(pos.problem(path, *not_a_mapping))
        return None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        problems.extend(problems_from_pydantic(exc, path, pos, what, list(model.model_fields)))
        return None
