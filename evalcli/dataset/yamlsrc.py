"""Safe YAML loading that remembers where every value came from (line and column).

``load_yaml`` returns plain Python data plus a ``Positions`` map from a value's path (a tuple of
keys and list indexes) to its place in the file, so any error found later can point at the line.
Anchors are allowed, but the expanded document is bounded, so a "billion laughs" bomb fails fast.

Where pyyaml has its libyaml binding (its PyPI wheels do), libyaml scans and parses the text (several times
faster than pyyaml's pure-Python reader, scanner and parser) and pyyaml's composer and safe constructor build
the same nodes with the same marks; the composer stays in Python so that absurd nesting still ends in a
RecursionError reported as an error (libyaml's own composer would overflow the C stack instead).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from ..errors import DatasetError, Problem
from ..secrets import looks_secret

Path = tuple[str | int, ...]

MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_ALIAS_VISITS = 100_000
MAX_DEPTH = 64
MAX_EXPANDED_CHARS = 4 * MAX_FILE_BYTES

_INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

try:
    from yaml.cyaml import CParser
except ImportError:  # pyyaml built without libyaml
    CParser = None


if CParser is not None:

    class LibyamlLoader(CParser, Composer, SafeConstructor, Resolver):  # type: ignore[misc,valid-type]
        """libyaml's scanner and parser, pyyaml's composer and safe constructor: ``yaml.SafeLoader``'s nodes."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

        get_single_node = Composer.get_single_node
        compose_document = Composer.compose_document
        compose_node = Composer.compose_node

        def get_mark(self) -> Any:
            """Where parsing stands: the start of the next event."""
            return self.peek_event().start_mark


def make_loader(text: str) -> Any:
    """The fastest safe loader this pyyaml has (``LibyamlLoader``, else ``yaml.SafeLoader``)."""
    return LibyamlLoader(text) if CParser is not None else yaml.SafeLoader(text)


@dataclass
class Positions:
    """Where each path of a loaded document sits in its file."""

    file: str
    values: dict[Path, tuple[int, int]] = field(default_factory=dict)
    keys: dict[Path, tuple[int, int]] = field(default_factory=dict)

    def where(self, path: Sequence[str | int], *, key: bool = False) -> str:
        """``FILE:LINE:COL`` of the deepest known part of ``path`` (its key, if asked and known)."""
        path = tuple(path)
        while True:
            spot = (self.keys.get(path) if key else None) or self.values.get(path)
            if spot is not None:
                return f"{self.file}:{spot[0]}:{spot[1]}"
            if not path:
                return self.file
            path = path[:-1]
            key = False

    def problem(self, path: Sequence[str | int], message: str, hint: str = "", *, key: bool = False) -> Problem:
        return Problem(self.where(path, key=key), message, hint)


@dataclass
class Interpolated:
    """What loading noticed besides the data: environment variables used, secret values that must never
    be shown, and mistakes that do not stop the rest of the file from being checked (an unset
    variable, a duplicate key)."""

    names: set[str] = field(default_factory=set)
    secret_values: set[str] = field(default_factory=set)
    problems: list[Problem] = field(default_factory=list)


class _Walker:
    def __init__(self, file: str, loader: Any, env: dict[str, str]) -> None:
        self.positions = Positions(file)
        self.loader = loader
        self.env = env
        self.used = Interpolated()
        self.problems: list[Problem] = []
        self.seen: set[int] = set()
        self.alias_visits = 0
        self.expanded_chars = 0

    def walk(self, node: yaml.Node, path: Path) -> Any:
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
        self.positions.values.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self.walk(child, (*path, i)) for i, child in enumerate(node.value)]
        value = self._construct(node, path)
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

    def _construct(self, node: yaml.Node, path: Path) -> Any:
        try:
            return self.loader.construct_object(node)
        except yaml.YAMLError:
            raise
        except Exception as exc:  # noqa: BLE001 - PyYAML's constructors raise plain errors on some bad values
            raise DatasetError([Problem(f"{self.positions.file}:{node.start_mark.line + 1}:{node.start_mark.column + 1}",
                                        f"cannot read this value as {node.tag.rsplit(':', 1)[-1]}: {exc}",
                                        "fix the value, or remove its '!!' tag")]) from None

    def _mapping(self, node: yaml.MappingNode, path: Path) -> dict[Any, Any]:
        self.loader.flatten_mapping(node)
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                self.problems.append(self.positions.problem(path, "a mapping key must be a plain value",
                                                            "use a string key"))
                continue
            key = self._construct(key_node, path)
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                key = str(key)
            child = (*path, key if isinstance(key, (str, int)) else str(key))
            self.positions.keys[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if key in result:
                self.problems.append(self.positions.problem(child, f"duplicate key {key!r}",
                                                            "each key may appear once; remove one of them", key=True))
            result[key] = self.walk(value_node, child)
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
        loader = make_loader(text)
    except yaml.reader.ReaderError as exc:  # a control character anywhere: pyyaml's reader checks the whole text
        raise DatasetError([_unprintable(exc, text, file, in_bytes=False)]) from None
    walker = _Walker(file, loader, dict(os.environ) if env is None else env)
    try:
        node = loader.get_single_node()
        data = walker.walk(node, ()) if node is not None else None
    except yaml.reader.ReaderError as exc:  # libyaml meets it while parsing, at a byte offset
        raise DatasetError([_unprintable(exc, text, file, in_bytes=True)]) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{file}:{mark.line + 1}:{mark.column + 1}" if mark else file
        raise DatasetError([Problem(where, f"not valid YAML: {exc.problem or exc.context}",
                                    "check the indentation and quoting on that line")]) from None
    except yaml.YAMLError as exc:
        raise DatasetError([Problem(file, f"not valid YAML: {exc}", "check the file's syntax")]) from None
    except RecursionError:
        mark = loader.get_mark()  # where the parser gave up: inside the deepest part
        raise DatasetError([Problem(f"{file}:{mark.line + 1}:{mark.column + 1}",
                                    f"the document is nested too deeply (the limit is {MAX_DEPTH} levels)",
                                    "flatten the structure")]) from None
    finally:
        loader.dispose()
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
              not_a_mapping: Problem) -> M | None:
    """``raw`` validated as ``model``; else ``None``, after adding ``not_a_mapping`` (when it is not a mapping) or a
    located problem for each mistake (``what`` names the part of the file, e.g. ``item 3``)."""
    if not isinstance(raw, dict):
        problems.append(not_a_mapping)
        return None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        problems.extend(problems_from_pydantic(exc, path, pos, what, list(model.model_fields)))
        return None
