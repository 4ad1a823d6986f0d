"""YAML text to a tree of light nodes, with every node's line and column, as fast as this pyyaml allows.

libyaml (pyyaml's C binding, in its PyPI wheels) scans and parses the text into events; pyyaml's own parser does
where libyaml is missing, and wherever libyaml would read the text otherwise than pyyaml's parser, which is the one
``yaml.safe_load`` uses (``libyaml_may_differ`` before parsing, ``NeedsPyyaml`` while composing, and any error
libyaml raises: the caller reads the text again with ``parser(text, pure=True)``). The events are composed here,
without recursion, into tuples instead of ``yaml.Node`` objects (the nodes, marks and composer calls were most of
pyyaml's cost): a scalar is ``(SCALAR, tag, value, line, column, style)``, a sequence ``(SEQUENCE, [children],
line, column, tag)``, a mapping ``(MAPPING, [(key, value), ...], line, column, tag)``, lines and columns 0-based,
a collection's tag ``None`` when it is the default one (``!!seq``, ``!!map``). Tags are resolved as pyyaml's
``SafeLoader`` resolves them, anchors and aliases share one node (as pyyaml's composer does); merge keys (``<<``)
are flattened later, by pyyaml itself (``yamlmerge``). Nesting deeper than ``MAX_DEPTH`` raises ``TooDeep`` at
once (libyaml's own composer would overflow the C stack, pyyaml's would recurse, its scanner slows down with
depth). Syntax errors are pyyaml's own ``MarkedYAMLError``s, with their marks.
"""

from __future__ import annotations

import bisect
import re
from typing import Any, NamedTuple

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
MAP_TAG = "tag:yaml.org,2002:map"
SEQ_TAG = "tag:yaml.org,2002:seq"
SET_TAG = "tag:yaml.org,2002:set"
OMAP_TAG = "tag:yaml.org,2002:omap"
PAIRS_TAG = "tag:yaml.org,2002:pairs"
MERGE_TAG = "tag:yaml.org,2002:merge"
VALUE_TAG = "tag:yaml.org,2002:value"
COLLECTION_TAGS = frozenset({MAP_TAG, SEQ_TAG, SET_TAG, OMAP_TAG, PAIRS_TAG})
"""Tags whose pyyaml constructor makes a collection (a generator: the empty collection first, its content later)."""
MAX_DEPTH = 64
"""Nesting deeper than this is refused (docs/yaml.md bounds; safe_load reads deeper)."""
MAX_NESTING = MAX_DEPTH + 1
"""Open collections at once beyond which composing stops: a collection there is deeper than ``MAX_DEPTH`` (and
pyyaml's scanner, which checks every open flow collection at each token, slows down with depth)."""

Node = tuple[Any, ...]
_NO_KEY = object()
_resolver = Resolver()
_RESOLVED_FIRST = frozenset(k for k in Resolver.yaml_implicit_resolvers if k)
"""First characters of plain scalars that may be something else than a string (digits, ``~``, ``y``...)."""
_WILDCARD = None in Resolver.yaml_implicit_resolvers
_HEADER_HASH = re.compile(r"[|>][-+0-9]*#")
_FLOW_INDICATOR = re.compile(r"[,\[\]{}]")
_BREAKS = "\r\n\x85\u2028\u2029"
_BLANKS = " \t" + _BREAKS
_DIRECTIVE_AFTER = _BREAKS + "\ufeff"
"""What may stand before a directive's ``%``: a line break, or the byte order mark that starts the text."""


class TooDeep(Exception):
    """The document nests collections deeper than ``MAX_DEPTH``; ``line``/``column`` (0-based) is where."""

    def __init__(self, line: int, column: int) -> None:
        super().__init__(f"nested deeper than {MAX_DEPTH} levels")
        self.line = line
        self.column = column


class TooManyMerged(Exception):
    """Merge keys would copy in more pairs than the budget allows; ``line``/``column`` (0-based): the mapping."""

    def __init__(self, line: int, column: int) -> None:
        super().__init__("merge keys copy in too many pairs")
        self.line = line
        self.column = column


class NeedsPyyaml(Exception):
    """libyaml read a construct that pyyaml's own parser reads otherwise (or refuses): read the text again."""


class Composed(NamedTuple):
    root: Node | None
    aliased: bool
    """Some node is reached twice (through an alias)."""
    merges: bool
    """Some scalar is a merge key (``<<``) or a value key (``=``): mappings must be flattened."""


def parser(text: str, pure: bool = False) -> Any:
    """An event source for ``text``: libyaml's parser where present (unless ``pure``), else pyyaml's (whose reader
    checks the whole text for control characters at once, raising ``yaml.reader.ReaderError`` here)."""
    if CParser is not None and not pure:
        try:
            return CParser(text)
        except UnicodeEncodeError:  # a lone surrogate in the text: pyyaml's reader says where
            pass
    return yaml.SafeLoader(text)


def libyaml_may_differ(text: str) -> bool:
    """Whether libyaml could read ``text`` otherwise than pyyaml's parser: a directive (a line starting with
    ``%``: libyaml accepts ``%YAML 1.1#x`` and tabs in directives, refuses ``%YAML 1.3``), or a tab anywhere but
    inside a quoted scalar or a block scalar's content (pyyaml refuses tabs between tokens, libyaml skips them), or
    a byte order mark after the first character (text to pyyaml, ignored by libyaml)."""
    if text.find("\ufeff", 1) > 0:
        return True
    percent = text.find("%")  # str.find, not a regular expression: several times faster on a large file
    while percent >= 0:
        if percent == 0 or text[percent - 1] in _DIRECTIVE_AFTER:
            return True
        percent = text.find("%", percent + 1)
    return "\t" in text and _tab_outside_scalars(text)


def _tab_outside_scalars(text: str) -> bool:
    spans: list[tuple[int, int]] = []
    try:
        source = CParser(text)
    except UnicodeEncodeError:  # a lone surrogate: pyyaml's reader refuses it
        return True
    try:
        while True:
            event = source.get_event()
            kind = type(event)
            if kind is ScalarEvent and event.style:  # quoted or block ('' is plain)
                start, end = event.start_mark.index, event.end_mark.index  # the start: at the node's properties
                if event.style == "|" or event.style == ">":  # the content starts on the line after the header
                    start = _line_end(text, start)
                else:
                    while text.startswith(("!", "&"), start):  # a tag or an anchor, then spaces (a tab is outside)
                        while start < end and text[start] not in _BLANKS:
                            start += 1
                        while start < end and text[start] in _BLANKS and text[start] != "\t":
                            start += 1
                spans.append((start, end))
            elif kind is StreamEndEvent:
                break
    except yaml.YAMLError:
        return False  # libyaml refuses the text: it is read again by pyyaml's parser anyway
    finally:
        source.dispose()
    starts = [start for start, _ in spans]
    tab = text.find("\t")
    while tab >= 0:
        at = bisect.bisect_left(starts, tab) - 1
        if at < 0 or not spans[at][0] < tab < spans[at][1]:
            return True
        tab = text.find("\t", tab + 1)
    return False


def mark(line: int, column: int) -> yaml.Mark:
    """A pyyaml mark for an error at a node's place."""
    return yaml.Mark("<dataset>", 0, line, column, None, None)  # type: ignore[arg-type]  # no buffer to quote


def compose(source: Any, text: str, libyaml: bool) -> Composed:
    """The first document of an event source as light nodes (``root`` ``None`` for an empty stream); a second
    document is an error, as for ``yaml.safe_load``. ``libyaml``: the source is libyaml's, whose reading of
    ``text`` is checked where pyyaml's parser could differ (``NeedsPyyaml``)."""
    get_event = source.get_event
    get_event()  # StreamStartEvent
    event = get_event()
    if isinstance(event, StreamEndEvent):
        return Composed(None, False, False)
    composed = _document(get_event, text if libyaml else None)
    event = get_event()
    if not isinstance(event, StreamEndEvent):
        raise yaml.composer.ComposerError("expected a single document in the stream",
                                          mark(*place(composed.root)) if composed.root else None,
                                          "but found another document", event.start_mark)
    return composed


def _document(get_event: Any, text: str | None) -> Composed:
    """One document's nodes. ``text`` (libyaml's events only): checked where libyaml reads a flow scalar with
    ``?`` (pyyaml ends a flow scalar there), a tag in a flow collection with a flow indicator in it (pyyaml keeps
    it in the tag), or a block scalar header followed by ``#`` (pyyaml wants a space first)."""
    resolve: Any = _resolver.resolve
    resolved_first = _RESOLVED_FIRST
    anchors: dict[str, Node] = {}
    aliased = merges = False
    flow_at = -1  # how many collections were open when the outermost flow collection opened (-1: none is)
    open_nodes: list[Node] = []
    keys: list[Any] = []
    root: Node | None = None
    while True:
        event = get_event()
        kind = type(event)
        if kind is ScalarEvent:
            tag, value, style = event.tag, event.value, event.style
            if tag is None:
                if event.implicit[0] and (not value or value[0] in resolved_first or _WILDCARD):
                    tag = resolve(yaml.ScalarNode, value, event.implicit)
                    if tag == MERGE_TAG or tag == VALUE_TAG:
                        merges = True
                else:
                    tag = STR_TAG
            else:
                if text is not None:
                    _check_tag(tag, text, event.start_mark.index, flow_at >= 0)
                if tag == "!":  # the non-specific tag: resolved as a plain scalar, even an empty one (libyaml's
                    tag = resolve(yaml.ScalarNode, value, (True, False))  # event says otherwise for that one)
                if tag == MERGE_TAG or tag == VALUE_TAG:
                    merges = True
            if text is not None:  # libyaml's styles: '' plain, '|' '>' block, quotes
                if not style:
                    if flow_at >= 0 and "?" in value:
                        raise NeedsPyyaml
                elif (style == "|" or style == ">") and _HEADER_HASH.match(text, _header(text, event.start_mark.index)):
                    raise NeedsPyyaml
            start = event.start_mark
            node: Node = (SCALAR, tag, value, start.line, start.column, style)
        elif kind is SequenceEndEvent or kind is MappingEndEvent:
            open_nodes.pop()
            keys.pop()
            if len(open_nodes) == flow_at:
                flow_at = -1
            continue
        elif kind is SequenceStartEvent or kind is MappingStartEvent:
            start = event.start_mark
            if len(open_nodes) >= MAX_NESTING:
                raise TooDeep(start.line, start.column)
            if flow_at < 0 and event.flow_style:
                flow_at = len(open_nodes)
            tag = event.tag
            if tag is not None:
                if text is not None:
                    _check_tag(tag, text, start.index, flow_at >= 0)
                if tag == "!" or tag == (SEQ_TAG if kind is SequenceStartEvent else MAP_TAG):
                    tag = None
                elif tag == MERGE_TAG or tag == VALUE_TAG:  # a collection as a merge (or value) key
                    merges = True
            node = (SEQUENCE if kind is SequenceStartEvent else MAPPING, [], start.line, start.column, tag)
        elif kind is AliasEvent:
            found = anchors.get(event.anchor)
            if found is None:
                raise yaml.composer.ComposerError(None, None, f"found undefined alias {event.anchor!r}", event.start_mark)
            node = found
            aliased = True
        elif kind is DocumentEndEvent:
            return Composed(root, aliased, merges)
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


def _line_end(text: str, index: int) -> int:
    """Where the line holding ``index`` ends (pyyaml's line breaks)."""
    return min((i for i in (text.find(b, index) for b in _BREAKS) if i >= 0), default=len(text))


def _check_tag(tag: str, text: str, index: int, in_flow: bool) -> None:
    """A tag libyaml may have read otherwise than pyyaml: in a flow collection (``_check_flow_tag``), or a local tag
    holding a second ``!`` after other than word characters (``!=!int``): libyaml reads the handle ``!`` and the rest
    as its suffix, pyyaml's scanner refuses the handle (docs/yaml.md)."""
    if in_flow:
        _check_flow_tag(text, index)
    if tag[0] == "!" and "!" in tag[1:] and not _WORD_HANDLE.match(tag):
        raise NeedsPyyaml


_WORD_HANDLE = re.compile(r"![0-9A-Za-z_-]*!")
"""The start of a local tag whose handle pyyaml reads: ``!``, word characters, ``!``."""


def _check_flow_tag(text: str, index: int) -> None:
    """A tag in a flow collection whose text holds a flow indicator (``[!!str,x]``): pyyaml reads the indicator
    as part of the tag, libyaml ends the tag before it."""
    for token in text[index:_line_end(text, index)].split():
        if token.startswith("!") and _FLOW_INDICATOR.search(token):
            raise NeedsPyyaml
        if not token.startswith(("!", "&")):
            return


def _header(text: str, index: int) -> int:
    """Where a block scalar's indicator (``|`` or ``>``) is, from the start of the node (its properties first)."""
    while index < len(text) and text[index] not in "|>":
        index += 1
    return index


def place(node: Node) -> tuple[int, int]:
    """A node's (line, column), 0-based."""
    return (node[3], node[4]) if node[0] == SCALAR else (node[2], node[3])
