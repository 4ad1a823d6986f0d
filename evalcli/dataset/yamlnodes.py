"""YAML text to a tree of light nodes, with every node's line and column, as fast as this pyyaml allows.

libyaml (pyyaml's C binding, in its PyPI wheels) scans and parses the text into events; without it pyyaml's
own parser does. The events are composed here, without recursion, into tuples instead of ``yaml.Node``
objects (the nodes, marks and composer calls were most of pyyaml's cost): a scalar is
``(SCALAR, tag, value, line, column, style)``, a sequence ``(SEQUENCE, [children], line, column)``, a mapping
``(MAPPING, [(key, value), ...], line, column)``, lines and columns 0-based. Tags are resolved as pyyaml's
``SafeLoader`` resolves them, anchors and aliases share one node (as pyyaml's composer does), merge keys
(``<<``) are flattened by ``flatten`` exactly as pyyaml flattens them. Nesting deeper than ``MAX_NESTING``
raises ``TooDeep`` at once (libyaml's own composer would overflow the C stack; pyyaml's would recurse).
Syntax errors are pyyaml's own ``MarkedYAMLError``s, with their marks.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.resolver import Resolver

try:
    from yaml.cyaml import CParser as _CParser  # type: ignore[attr-defined]  # libyaml's parser, not in the stubs

    CParser: Any = _CParser
except ImportError:  # pyyaml built without libyaml
    CParser = None

SCALAR, SEQUENCE, MAPPING = 0, 1, 2
STR_TAG = "tag:yaml.org,2002:str"
MERGE_TAG = "tag:yaml.org,2002:merge"
VALUE_TAG = "tag:yaml.org,2002:value"
MAX_NESTING = 1000
"""Open collections at once beyond which composing stops (pyyaml's composer hit Python's recursion limit here)."""

Node = tuple[Any, ...]
_NO_KEY = object()
_resolver = Resolver()
_RESOLVED_FIRST = frozenset(k for k in Resolver.yaml_implicit_resolvers if k)
"""First characters of plain scalars that may be something else than a string (digits, ``~``, ``y``...)."""
_WILDCARD = None in Resolver.yaml_implicit_resolvers


class TooDeep(Exception):
    """The document nests collections deeper than ``MAX_NESTING``; ``line``/``column`` (0-based) is where."""

    def __init__(self, line: int, column: int) -> None:
        super().__init__(f"nested deeper than {MAX_NESTING} levels")
        self.line = line
        self.column = column


def parser(text: str) -> Any:
    """An event source for ``text``: libyaml's parser where present, else pyyaml's (whose reader checks the
    whole text for control characters at once, raising ``yaml.reader.ReaderError`` here)."""
    return CParser(text) if CParser is not None else yaml.SafeLoader(text)


def mark(line: int, column: int) -> yaml.Mark:
    """A pyyaml mark for an error at a node's place."""
    return yaml.Mark("<dataset>", 0, line, column, None, None)  # type: ignore[arg-type]  # no buffer to quote


def compose(source: Any) -> tuple[Node | None, bool]:
    """The first document of an event source as light nodes (``None`` for an empty stream), and whether it
    holds an alias (some node is reached twice); a second document is an error, as for ``yaml.safe_load``."""
    get_event = source.get_event
    get_event()  # StreamStartEvent
    event = get_event()
    if isinstance(event, StreamEndEvent):
        return None, False
    anchors: dict[str, Node] = {}
    root, aliased = _document(get_event, anchors)
    event = get_event()
    if not isinstance(event, StreamEndEvent):
        raise yaml.composer.ComposerError("expected a single document in the stream",
                                          mark(*place(root)) if root else None,
                                          "but found another document", event.start_mark)
    return root, aliased


def _document(get_event: Any, anchors: dict[str, Node]) -> tuple[Node | None, bool]:
    resolve: Any = _resolver.resolve
    resolved_first = _RESOLVED_FIRST
    aliased = False
    open_nodes: list[Node] = []
    keys: list[Any] = []
    root: Node | None = None
    while True:
        event = get_event()
        kind = type(event)
        if kind is ScalarEvent:
            tag, value = event.tag, event.value
            if tag is None or tag == "!":
                if event.implicit[0] and (not value or value[0] in resolved_first or _WILDCARD):
                    tag = resolve(yaml.ScalarNode, value, event.implicit)
                else:
                    tag = STR_TAG
            start = event.start_mark
            node: Node = (SCALAR, tag, value, start.line, start.column, event.style)
        elif kind is SequenceEndEvent or kind is MappingEndEvent:
            open_nodes.pop()
            keys.pop()
            continue
        elif kind is SequenceStartEvent or kind is MappingStartEvent:
            start = event.start_mark
            if len(open_nodes) >= MAX_NESTING:
                raise TooDeep(start.line, start.column)
            node = (SEQUENCE if kind is SequenceStartEvent else MAPPING, [], start.line, start.column)
        elif kind is AliasEvent:
            found = anchors.get(event.anchor)
            if found is None:
                raise yaml.composer.ComposerError(None, None, f"found undefined alias {event.anchor!r}", event.start_mark)
            node = found
            aliased = True
        elif kind is DocumentEndEvent:
            return root, aliased
        else:  # pragma: no cover - libyaml and pyyaml emit nothing else inside a document
            raise yaml.composer.ComposerError(None, None, f"unexpected {kind.__name__}", event.start_mark)
        anchor = getattr(event, "anchor", None) if kind is not AliasEvent else None
        if anchor is not None:
            if anchor in anchors:
                raise yaml.composer.ComposerError(f"found duplicate anchor {anchor!r}; first occurrence",
                                                  mark(*place(anchors[anchor])), "second occurrence", event.start_mark)
            anchors[anchor] = node
        if not open_nodes:
            root = node
        else:
            parent = open_nodes[-1]
            if parent[0] == SEQUENCE:
                parent[1].append(node)
            elif keys[-1] is _NO_KEY:
                keys[-1] = node
            else:
                parent[1].append((keys[-1], node))
                keys[-1] = _NO_KEY
        if kind is SequenceStartEvent or kind is MappingStartEvent:
            open_nodes.append(node)
            keys.append(_NO_KEY)


def place(node: Node) -> tuple[int, int]:
    """A node's (line, column), 0-based."""
    return (node[3], node[4]) if node[0] == SCALAR else (node[2], node[3])


def flatten(node: Node) -> int:
    """Merge keys (``<<``) replaced by the pairs they merge, in place: pyyaml's ``SafeConstructor.flatten_mapping``.
    Returns how many pairs were merged in (they come first; 0 once a node is flattened)."""
    pairs = node[1]
    merge: list[tuple[Node, Node]] = []
    index = 0
    while index < len(pairs):
        key, value = pairs[index]
        if key[0] == SCALAR and key[1] == MERGE_TAG:
            del pairs[index]
            if value[0] == MAPPING:
                flatten(value)
                merge.extend(value[1])
            elif value[0] == SEQUENCE:
                parts = []
                for sub in value[1]:
                    if sub[0] != MAPPING:
                        raise yaml.constructor.ConstructorError(
                            "while constructing a mapping", mark(*place(node)),
                            f"expected a mapping for merging, but found {_kind(sub)}", mark(*place(sub)))
                    flatten(sub)
                    parts.append(sub[1])
                for part in reversed(parts):
                    merge.extend(part)
            else:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", mark(*place(node)),
                    f"expected a mapping or list of mappings for merging, but found {_kind(value)}", mark(*place(value)))
        elif key[0] == SCALAR and key[1] == VALUE_TAG:
            pairs[index] = ((SCALAR, STR_TAG, *key[2:]), value)
            index += 1
        else:
            index += 1
    if merge:
        pairs[:0] = merge
    return len(merge)


def _kind(node: Node) -> str:
    return ("scalar", "sequence", "mapping")[node[0]]
