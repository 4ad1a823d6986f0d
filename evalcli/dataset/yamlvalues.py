"""Python values from ``yamlnodes``' light nodes, exactly as ``yaml.safe_load`` constructs them (docs/yaml.md).

``Walker`` builds the values depth first, each path's own copy (an alias is a copy, not the same object), reading
the common nodes (strings, untagged lists and mappings) inline and every other tag with pyyaml's own
``SafeConstructor``: ``!!omap`` and ``!!pairs`` lists of pairs, ``!!binary`` bytes, timestamps dates and datetimes,
as keys too. Whatever safe_load refuses raises a ``ConstructorError``; which error safe_load meets first (it
constructs breadth first) is ``first_error``'s answer: pyyaml's composer and constructor on the same text. evalcli's
own additions: ``${VAR}`` interpolated in string values, ``!!set`` read as a sorted list, a key written twice
reported, and the bounds that keep a small file from expanding into a huge one (aliases revisited, merged pairs,
text, depth).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import field
from typing import Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor

from ..errors import DatasetError, Problem
from ..identity import canonical_json
from ..interpolation import ESCAPED, INTERPOLATION
from ..records import record
from ..secrets import looks_secret
from . import yamlnodes as nodes
from .yamlmerge import CountedMerges, to_pyyaml
from .yamlnodes import MAPPING, MAX_DEPTH, SCALAR, SEQUENCE, STR_TAG, Node, TooManyMerged, mark, place

Path = tuple[str | int, ...]
"""Where a value is in a document: the keys and list indexes that lead to it."""

MAX_ALIAS_VISITS = 100_000
"""Values reached again through an alias, plus pairs copied in by merge keys, before a document is refused."""
MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_EXPANDED_CHARS = 4 * MAX_FILE_BYTES



@record
class Interpolated:
    """What loading noticed besides the data: environment variables used, secret values that must never
    be shown, and mistakes that do not stop the rest of the file from being checked (an unset
    variable, a duplicate key)."""

    names: set[str] = field(default_factory=set)
    secret_values: set[str] = field(default_factory=set)
    values: dict[str, set[str]] = field(default_factory=dict)
    """What each variable was read as (its value, or its default): a dataset's ``secrets: [NAME]`` makes them secret."""
    problems: list[Problem] = field(default_factory=list)


class Unreadable(ConstructorError):
    """A scalar its tag's constructor cannot read (``!!int seven``): pyyaml raises a plain ``ValueError`` there."""


def unreadable(tag: str, exc: Exception, at: yaml.Mark | None) -> Unreadable:
    return Unreadable(None, None, f"cannot read this value as {tag.rsplit(':', 1)[-1]}: {exc}", at)


class Walker:
    """One document's values, from ``file``; ``merged`` (from ``yamlmerge.flatten_all``): per mapping, its leading merged pairs,
    already counted in ``alias_visits``."""

    def __init__(self, file: str, problem: Callable[[Path, str, str], Problem], env: dict[str, str],
                 used: Interpolated, aliased: bool, merged: dict[int, int]) -> None:
        self.file = file
        self.problem = problem
        """A problem located at a path (``Positions.problem``)."""
        self.env = env
        self.used = used
        self.aliased = aliased
        """Whether some node is reached twice (through an alias): only then are visits counted."""
        self.merged = merged
        self.alias_visits = sum(merged.values())
        self.expanded_chars = 0
        self.seen: set[int] = set()
        self.constructor = SafeConstructor()
        self.constructors = SafeConstructor.yaml_constructors

    def walk(self, node: Node, path: Path, counted: bool = False) -> Any:
        """The value of ``node`` at ``path``; ``counted``: reached through a merged pair, already counted."""
        revisit = False
        if self.aliased:
            revisit = id(node) in self.seen
            if revisit and not counted:
                self.alias_visits += 1
            self.seen.add(id(node))
        if self.alias_visits > MAX_ALIAS_VISITS:
            raise DatasetError([self.problem(path, "the document expands to too many values (a YAML alias bomb?)",
                                                       "write the data out instead of nesting aliases")])
        if len(path) > MAX_DEPTH:
            raise DatasetError([self.problem(path, f"nesting deeper than {MAX_DEPTH} levels",
                                                       "flatten the structure")])
        kind = node[0]
        if kind == MAPPING:
            return self._mapping(node, path) if node[4] is None else self._tagged(node, path)
        if kind == SEQUENCE:
            if node[4] is not None:
                return self._tagged(node, path)
            if self.aliased or len(path) >= MAX_DEPTH:
                return [self.walk(child, (*path, i)) for i, child in enumerate(node[1])]
            items = []
            for i, child in enumerate(node[1]):  # a string is the most common node: it is read here
                if child[0] == SCALAR and child[1] == STR_TAG:
                    text = child[2]
                    items.append(self._interpolate(text, (*path, i), True) if "${" in text else text)
                else:
                    items.append(self.walk(child, (*path, i)))
            return items
        value = node[2] if node[1] == STR_TAG else self._construct(node)
        if revisit and isinstance(value, str):
            # few aliases of one long string expand to as much text as many aliases of short ones
            self.expanded_chars += len(value)
            if self.expanded_chars > MAX_EXPANDED_CHARS:
                raise DatasetError([self.problem(
                    path, "the document expands to too much text through aliases (a YAML alias bomb?)",
                    "write the data out instead of repeating a long aliased value")])
        if isinstance(value, str) and "${" in value:
            return self._interpolate(value, path, True)
        return value

    def _construct(self, node: Node) -> Any:
        """A scalar of another tag than str (int, float, bool, null, timestamp, binary...), as pyyaml's
        ``SafeConstructor`` reads it; a tag it has no constructor for, or a collection's, raises."""
        _, tag, value, line, column, style = node
        constructor = self.constructors.get(tag)
        if constructor is None or tag in nodes.COLLECTION_TAGS:
            return construct_alone(node)  # raises pyyaml's own error
        start = mark(line, column)
        try:
            return constructor(self.constructor, yaml.ScalarNode(tag, value, start, start, style=style))
        except yaml.YAMLError:
            raise
        except Exception as exc:  # noqa: BLE001 - PyYAML's constructors raise plain errors on some bad values
            raise unreadable(tag, exc, start) from None

    def _key(self, node: Node, mapping: Node) -> Any:
        """A mapping key: a scalar's value (not interpolated), or what safe_load makes of a collection (a list or
        a mapping cannot be a key: ``found unhashable key``)."""
        if node[0] == SCALAR:
            return node[2] if node[1] == STR_TAG else self._construct(node)
        if node[4] is None or node[4] in nodes.COLLECTION_TAGS:
            raise ConstructorError("while constructing a mapping", mark(*place(mapping)), "found unhashable key",
                                   mark(*place(node)))
        return construct_alone(node)

    def _mapping(self, node: Node, path: Path) -> dict[Any, Any]:
        merged = self.merged.get(id(node), 0)
        result: dict[Any, Any] = {}
        written: set[Any] = set()
        plain = not self.aliased and len(path) < MAX_DEPTH
        for index, (key_node, value_node) in enumerate(node[1]):
            key = key_node[2] if key_node[0] == SCALAR and key_node[1] == STR_TAG else self._key(key_node, node)
            if index >= merged:  # a key written out may override a merged one (and the first merged one wins)
                if key in written:
                    self.used.problems.append(Problem(f"{self.file}:{key_node[3] + 1}:{key_node[4] + 1}",
                                                      f"duplicate key {key!r}",
                                                      "each key may appear once; remove one of them"))
                written.add(key)
            part = key if isinstance(key, (str, int)) else str(key)
            if plain and value_node[0] == SCALAR and value_node[1] == STR_TAG:
                text = value_node[2]
                result[key] = self._interpolate(text, (*path, part), True) if "${" in text else text
            else:
                result[key] = self.walk(value_node, (*path, part), index < merged)
        return result

    def _tagged(self, node: Node, path: Path) -> Any:
        """A collection with another tag than its own: ``!!set`` on a mapping (its members as a list, sorted by their
        JSON text as the identity sorts them: a set's order is the hash seed's), ``!!omap``/``!!pairs`` on a sequence;
        anything else is read by pyyaml alone (a scalar tag finds a ``=`` key's value; else it raises)."""
        kind, tag = node[0], node[4]
        if kind == MAPPING and tag == nodes.SET_TAG:  # a list, in one order on every run (docs/yaml.md)
            return sorted(self._mapping(node, path), key=canonical_json)
        if kind == SEQUENCE and (tag == nodes.OMAP_TAG or tag == nodes.PAIRS_TAG):
            pairs = []
            for index, sub in enumerate(node[1]):
                if sub[0] != MAPPING or len(sub[1]) != 1:
                    return construct_alone(node)  # raises pyyaml's own error
                key_node, value_node = sub[1][0]
                key = self._key(key_node, sub) if key_node[0] == SCALAR else self.walk(key_node, (*path, index, 0))
                pairs.append((key, self.walk(value_node, (*path, index, 1))))
            return pairs
        value = construct_alone(node)
        return self._interpolate(value, path) if isinstance(value, str) and "${" in value else value

    def _interpolate(self, text: str, path: Path, plain: bool = False) -> str:
        """``text`` with each ``${NAME}``/``${NAME:-default}`` replaced, and any other ``${`` not written ``$${`` a
        mistake (``${ A }``, ``${A-x}``, a nested ``${A:-${B}}``: left as text, a reader would take it as interpolated,
        docs/datasets.md); a scalar (quoted or not: inside ``{...}`` it must be quoted) that is wholly one
        interpolation is a ``WholeInterpolation`` (a key that wants a number or true/false reads it: ``read_scalar``)."""
        def replace(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if default is not None and "${" in default:
                unread.append(match.group(0) + "}")
                return match.group(0)
            self.used.names.add(name)
            value = self.env.get(name)
            if value is None or (value == "" and default is not None):
                if default is None:
                    self.used.problems.append(self.problem(
                        path, f"environment variable {name} is not set",
                        f"set {name}, or give a default: ${{{name}:-value}}"))
                    return ""
                value = default
            self.used.values.setdefault(name, set()).add(value)
            if looks_secret(name, value):
                self.used.secret_values.add(value)
            return value

        unread: list[str] = []
        pieces = text.split(ESCAPED)
        result = "${".join(INTERPOLATION.sub(replace, piece) for piece in pieces)
        for piece in pieces:
            left = UNREAD.search(INTERPOLATION.sub("", piece))
            if left is not None:
                unread.append(left[0])
        if unread:  # ``${ A }``, ``${A-x}``, ``${A:?x}``, ``${A:-${B}}``: kept as text they would look interpolated
            self.used.problems.append(self.problem(
                path, f"{unread[0]} is not an interpolation evalcli reads",
                "write ${NAME} or ${NAME:-default} (NAME of letters, digits and _; a default holds no '}' and no "
                "${...}), or $${ for a literal ${"))
        return WholeInterpolation(result) if plain and INTERPOLATION.fullmatch(text) else result


UNREAD = re.compile(r"\$\{[^}\n]{0,40}\}?")
"""The start of a ``${`` that no interpolation matched, as a message quotes it."""


class WholeInterpolation(str):
    """The text of a scalar written wholly as one interpolation (``concurrency: ${CONC:-4}``), quoted or not (inside
    ``{...}`` or ``[...]`` it must be quoted): a string, which a key that wants a number or true/false reads as YAML
    reads the same text written in its place (``read_scalar``; docs/datasets.md, "Environment variables"). One with
    other text around it is a plain ``str``."""

    __slots__ = ()


_RESOLVER = yaml.resolver.Resolver()


def typed(value: Any) -> Any:
    """What a key that wants a number or true/false reads: a whole interpolation's value as YAML reads it
    (``read_scalar``), any other value as it is (docs/datasets.md, "Environment variables")."""
    return read_scalar(value) if isinstance(value, WholeInterpolation) else value


def read_scalar(text: str) -> Any:
    """``text`` as ``yaml.safe_load`` reads it written as a plain scalar: ``4`` an int, ``0.5`` a float, ``true``/``no``
    a bool, ``null`` or nothing ``None``, anything else (``abc``, ``[1]``) the text itself."""
    tag = _RESOLVER.resolve(yaml.ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
    if tag == STR_TAG:
        return str(text)
    start = mark(0, 0)
    try:
        return SafeConstructor().construct_object(yaml.ScalarNode(tag, text, start, start))
    except Exception:  # noqa: BLE001 - a value YAML's resolver matched but cannot build: it stays text
        return str(text)


class SafeCounted(CountedMerges):
    """pyyaml's ``SafeConstructor``, with the pairs that merge keys copy in counted against ``MAX_ALIAS_VISITS``
    before they are copied (``CountedMerges``), and a plain Python error of a constructor (``!!int seven``) raised
    as ``Unreadable`` at its node."""

    def __init__(self) -> None:
        super().__init__(MAX_ALIAS_VISITS)

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (yaml.YAMLError, TooManyMerged, RecursionError, MemoryError):
            raise
        except Exception as exc:  # noqa: BLE001 - PyYAML's constructors raise plain errors on some bad values
            raise unreadable(node.tag, exc, node.start_mark) from None


def first_error(text: str, pure: bool) -> Exception | None:
    """The error ``yaml.safe_load`` raises for ``text`` (``TooManyMerged`` where merge keys would copy in more than
    the budget first), read by the same parser the document was composed with (libyaml's, or pyyaml's if
    ``pure``); ``None`` if it raises none, or recurses too deep to tell. A merge of something not a mapping is
    looked for again with pyyaml's parser: libyaml places an empty value in a flow mapping (``{<<:\n}``) at the
    token after it, pyyaml on the line of its ``:`` (docs/yaml.md)."""
    found = _first_error(text, pure)
    if not pure and isinstance(found, yaml.MarkedYAMLError) and "for merging" in str(found.problem):
        return _first_error(text, True)
    return found


def _first_error(text: str, pure: bool) -> Exception | None:
    loader = yaml.SafeLoader(text) if pure or nodes.CParser is None else yaml.CSafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            SafeCounted().construct_document(node)
    except (yaml.YAMLError, TooManyMerged) as exc:
        return exc
    except RecursionError:
        return None
    finally:
        loader.dispose()
    return None


def construct_alone(node: Node) -> Any:
    """``node`` as pyyaml's own constructor reads it, on its own: for the tags ``Walker`` does not read itself
    (a scalar tag on a collection, a collection tag on a scalar, an unknown tag), which mostly raise."""
    return SafeCounted().construct_document(to_pyyaml(node))
