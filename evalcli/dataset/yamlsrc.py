"""Safe YAML loading that remembers where every value came from (line and column).

``load_yaml`` returns the values ``yaml.safe_load`` gives a document (docs/yaml.md) plus a ``Positions`` map from a
value's path (a tuple of keys and list indexes) to its place in the file, so any error found later can point at the
line. Anchors are allowed, but the expanded document is bounded, so an alias or merge-key bomb fails fast.

The text is parsed by libyaml where pyyaml has it (``yamlnodes``: its events composed into light nodes), several
times faster than pyyaml's pure-Python loader, and by pyyaml's own parser wherever libyaml would read it otherwise;
``yamlvalues`` makes the values.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import field
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails
from yaml.constructor import SafeConstructor

from ..errors import LONE_SURROGATE, DatasetError, Problem
from ..records import record
from . import yamlmerge, yamlnodes, yamlvalues
from .yamlnodes import MAPPING, MAX_DEPTH, SCALAR, SEQUENCE, STR_TAG, Node
from .yamlvalues import MAX_ALIAS_VISITS, MAX_FILE_BYTES, Walker
from .yamlvalues import Interpolated as Interpolated  # re-exported: load.py, registry.py
from .yamlvalues import Path as Path


@record
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


def load_yaml(text: str, file: str, env: dict[str, str] | None = None) -> tuple[Any, Positions, Interpolated]:
    """Parse one YAML document safely, to the values ``yaml.safe_load`` gives it (docs/yaml.md). A document that cannot
    be read raises ``DatasetError`` with file:line:col, on the line safe_load's error names; mistakes that leave it
    readable are returned in ``problems`` of the third value."""
    if len(text) > MAX_FILE_BYTES:
        raise DatasetError([Problem(file, f"file is {len(text) // (1024 * 1024)} MB; the limit is "
                                          f"{MAX_FILE_BYTES // (1024 * 1024)} MB",
                                    "split the data into a JSONL file named by 'data_file:'")])
    composed, pure = _compose(text, file)
    positions = Positions(file, root=composed.root)
    used = Interpolated()
    if composed.root is None:
        return None, positions, used
    try:
        merged = yamlmerge.flatten_all(composed.root, MAX_ALIAS_VISITS) if composed.merges else {}
        walker = Walker(file, positions.problem, dict(os.environ) if env is None else env, used, composed.aliased,
                        merged)
        data = walker.walk(composed.root, ())
    except (yaml.YAMLError, yamlnodes.TooManyMerged) as exc:  # which error safe_load meets first, pyyaml says
        raise DatasetError([_problem(yamlvalues.first_error(text, pure) or exc, file)]) from None
    if "\\u" in text or "\\U" in text:  # only a double-quoted escape makes a surrogate
        surrogate = _lone_surrogate(composed.root, file)
        if surrogate is not None:
            raise DatasetError([surrogate])
    return data, positions, used


_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(root: Node, file: str) -> Problem | None:
    """The first scalar (key or value, in the file's order) whose text holds a surrogate: written as an escape
    (``"\\ud800"``, ``"\\U0000d800"``), which pyyaml reads alone (it never joins two halves into one character), so
    no later reader could encode it as UTF-8 (docs/yaml.md)."""
    stack, seen = [root], set()
    while stack:
        node = stack.pop()
        if node[0] == SCALAR:
            found = _SURROGATE.search(node[2]) if isinstance(node[2], str) else None
            if found is not None:
                line, column = yamlnodes.place(node)
                return Problem(f"{file}:{line + 1}:{column + 1}",
                               LONE_SURROGATE.format(escape=f"\\u{ord(found[0]):04x}"),
                               "write the character itself, or a character past U+FFFF as one escape of its code "
                               "point (\\U0001F600), or remove the escape")
        elif id(node) not in seen:  # an aliased collection is looked at once
            seen.add(id(node))
            children = node[1] if node[0] == SEQUENCE else [part for pair in node[1] for part in pair]
            stack.extend(reversed(children))
    return None


def _compose(text: str, file: str) -> tuple[yamlnodes.Composed, bool]:
    """The document's nodes, and whether pyyaml's own parser read them: where libyaml is missing, could read the
    text otherwise (``libyaml_may_differ``, ``NeedsPyyaml``) or refuses it, pyyaml's parser reads it again and its
    result, or error, stands."""
    pure = yamlnodes.CParser is None or yamlnodes.libyaml_may_differ(text)
    while True:
        source = None
        try:
            source = yamlnodes.parser(text, pure)
            return yamlnodes.compose(source, text, libyaml=not pure), pure
        except (yamlnodes.NeedsPyyaml, UnicodeEncodeError):
            pure = True
        except yaml.YAMLError as exc:
            if not pure and not _too_deep(exc):
                pure = True
                continue
            raise DatasetError([_problem(exc, file, text)]) from None
        except ValueError as exc:  # pyyaml's scanner on an escape past U+10FFFF ("\U00110000"): chr() refuses it
            if not pure:
                pure = True
                continue
            spot = source.get_mark() if source is not None else None
            where = f"{file}:{spot.line + 1}:{spot.column + 1}" if spot else file
            raise DatasetError([Problem(where, f"not valid YAML: an escape names no character ({exc})",
                                        "write a character up to \\U0010FFFF, or remove the escape")]) from None
        except yamlnodes.TooDeep as exc:  # where composing stopped: inside the deepest part
            raise DatasetError([_too_deep_problem(f"{file}:{exc.line + 1}:{exc.column + 1}")]) from None
        finally:
            dispose = getattr(source, "dispose", None)
            if dispose is not None:
                dispose()


def _too_deep(exc: yaml.YAMLError) -> bool:
    """libyaml's own nesting limit (pyyaml 6.0.4's wheels), reported as ours."""
    return isinstance(exc, yaml.MarkedYAMLError) and "maximum nesting depth" in str(exc.problem)


def _too_deep_problem(where: str) -> Problem:
    return Problem(where, f"the document is nested too deeply (the limit is {MAX_DEPTH} levels)", "flatten the structure")


_TAG_HINT = "write the value in the form its tag needs, or remove the tag"
_QUESTION_HINT = ("inside [...] or {...} a '?' ends an unquoted value, as yaml.safe_load reads YAML: quote the value "
                  "('Is it sunny?'), or write the item in block style (input: Is it sunny?)")
_TAB_HINT = ("a tab is there: YAML indents with spaces, never tabs, and keeps a tab in a value only inside quotes: "
             "replace it with spaces, or quote the value (an editor's 'convert indentation to spaces' fixes every line)")
_HINTS = {
    "found unhashable key": "a mapping key must be a plain value (a string or a number), not a list or a mapping",
    "could not determine a constructor": "remove the tag, or use one of YAML's own (!!str, !!int, !!set...)",
    "expected a mapping for merging": "merge a mapping (<<: *name) or a list of mappings (<<: [*a, *b])",
    "expected a mapping or list of mappings": "merge a mapping (<<: *name) or a list of mappings (<<: [*a, *b])",
    "expected a scalar node": _TAG_HINT, "expected a sequence": _TAG_HINT, "expected a mapping": _TAG_HINT,
    "expected a single mapping item": _TAG_HINT,
    "expected ',' or '}', but got '?'": _QUESTION_HINT, "expected ',' or ']', but got '?'": _QUESTION_HINT,
    "found character '\\t'": _TAB_HINT,
    "found a tab character": _TAB_HINT,
}
"""Hints for safe_load's errors about what a node is, by how their message starts (the first that matches)."""


def _problem(exc: BaseException, file: str, text: str = "") -> Problem:
    """A YAML error as a located problem."""
    if isinstance(exc, yaml.reader.ReaderError):  # a control character: pyyaml's reader checks the whole text
        return _unprintable(exc, text, file)
    if isinstance(exc, yamlnodes.TooManyMerged):
        return Problem(f"{file}:{exc.line + 1}:{exc.column + 1}",
                       "the document expands to too many values through merge keys (a YAML merge-key bomb?)",
                       "write the data out instead of merging mappings that merge others")
    if not isinstance(exc, yaml.MarkedYAMLError):
        return Problem(file, f"not valid YAML: {exc}", "check the file's syntax")
    spot = exc.problem_mark or exc.context_mark
    where = f"{file}:{spot.line + 1}:{spot.column + 1}" if spot else file
    if _too_deep(exc):
        return _too_deep_problem(where)
    if isinstance(exc, yamlvalues.Unreadable):
        return Problem(where, str(exc.problem), "fix the value, or remove its '!!' tag")
    problem = str(exc.problem or exc.context)
    hint = next((h for start, h in _HINTS.items() if problem.startswith(start)),
                "check the indentation and quoting on that line")
    return Problem(where, f"not valid YAML: {problem}", hint)


def _unprintable(exc: yaml.reader.ReaderError, text: str, file: str) -> Problem:
    position = exc.position
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
    return problems_from_errors(exc.errors(), path, positions, what, fields)


def problems_from_errors(errors: Sequence[ErrorDetails], path: Path, positions: Positions, what: str,
                         fields: Sequence[str]) -> list[Problem]:
    """Pydantic's errors on the value at ``path`` as located problems."""
    problems = []
    for error in errors:
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
                                              _number_as_text(error) or "fix the value on that line"))
    return problems


def _number_as_text(error: ErrorDetails) -> str | None:
    """The hint for a number YAML read as text: ``1e-6`` (no dot, as yaml.safe_load's YAML 1.1 wants in a float) is
    the string ``"1e-6"``, so "Input should be a valid number" alone puzzles (docs/yaml.md)."""
    written = error.get("input")
    if error["type"] not in ("float_type", "int_type") or not isinstance(written, str):
        return None
    try:
        value = float(written)
    except ValueError:
        return None
    whole = error["type"] == "int_type"
    if value != value or value in (float("inf"), float("-inf")) or (whole and not value.is_integer()):
        return None
    number = str(int(value)) if whole else repr(value)
    mantissa, e, exponent = number.partition("e")
    if e and "." not in mantissa:
        number = f"{mantissa}.0e{exponent}"  # Python's 1e-06, as YAML reads a float: 1.0e-06
    return (f"YAML reads {written} as text, not a number (yaml.safe_load reads an exponent only after a dot and with "
            f"its sign: 1.0e-6, 1.0e+3); write {number}")


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
        return model.model_validate(raw, strict=True)  # as written (docs/datasets.md: types)
    except ValidationError as exc:
        problems.extend(problems_from_pydantic(exc, path, pos, what, list(model.model_fields)))
        return None


def validated_worded(model: type[M], raw: dict[Any, Any], path: Path, pos: Positions, what: str,
                     problems: list[Problem], worded: Callable[[ErrorDetails], bool]) -> tuple[M | None, list[Problem]]:
    """``raw`` (a mapping) validated as ``model``, except for the mistakes ``worded`` says the caller words itself
    (with a rewrite, or more precisely): those keys keep their raw values in the model returned, and their problems
    in pydantic's words are returned for the caller to add if its own checks found nothing (``settle``), so the
    validator is never looser than the model. ``None`` after adding a located problem for each other mistake."""
    try:
        return model.model_validate(raw), []
    except ValidationError as exc:
        errors = exc.errors()
    own = [error for error in errors if worded(error)]
    others = [error for error in errors if not worded(error)]
    if others:
        problems.extend(problems_from_errors(others, path, pos, what, list(model.model_fields)))
        return None, []
    keys = {str(error["loc"][0]) for error in own}
    valid = model.model_validate({key: value for key, value in raw.items() if key not in keys})
    return valid.model_copy(update={key: raw[key] for key in keys if key in raw}), problems_from_errors(own, path, pos, what,
                                                                                             list(model.model_fields))


def settle(deferred: list[Problem], problems: list[Problem], before: int) -> None:
    """Adds the problems ``validated_worded`` deferred when the caller's own checks added none since ``before``."""
    if deferred and len(problems) == before:
        problems.extend(deferred)
