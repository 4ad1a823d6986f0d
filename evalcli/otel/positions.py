"""Where each JSON object of a one-document trace file starts (docs/otel.md, "Mistakes"): a span that cannot be read
in a pretty-printed Jaeger, Phoenix or OTLP export is located at its own line, not at line 1.

Python's ``json`` keeps no positions. The n-th ``{`` of the text outside a string opens the n-th object of the
document in the order the text writes them, so the text with its strings emptied (one regular-expression pass: a
string holds no raw line break, so the lines stay) and one walk of the parsed document pair them up. A key repeated
in an object (``json`` keeps its last value only) breaks that count: such a document is read again by ``json``'s
pure-Python scanner, with an object parser that notes each object's offset. Only a document written over several
lines is located this way (a JSONL line, or a one-line document, is its own line: ``one_line``)."""

from __future__ import annotations

import bisect
import json
import json.decoder
import json.scanner
import re
from collections.abc import Callable, Iterator
from typing import Any

Locate = Callable[[Any], str]
"""``FILE:LINE`` of a JSON object of the file (a span, a resource, the document), for a located warning."""
STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
"""A JSON string: a brace inside one opens nothing (and it holds no raw line break: JSON escapes them)."""


def located(text: str, path: object, document: Any) -> tuple[Any, Locate]:
    """The document to read (``document``, ``json.loads(text)``, or its equal read again) and where each of its
    objects starts: ``FILE:LINE``; a value that is not one of its objects (a list, a copy) is at line 1. The locator
    keeps the document, so its objects' ids stay theirs."""
    braces: list[int] = []  # the line of each '{' outside a string, in order
    for number, line in enumerate(STRING.sub('""', text).split("\n"), start=1):
        braces.extend([number] * line.count("{"))
    found = list(_objects(document))
    if len(found) == len(braces):
        lines = {id(obj): line for obj, line in zip(found, braces, strict=True)}
    else:  # a key repeated in an object: the pure-Python scanner, noting each object's line
        document, lines = _scanned(text)

    def locate(raw: Any, _kept: Any = document) -> str:
        return f"{path}:{lines.get(id(raw), 1)}"

    return document, locate


def _objects(value: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object of ``value``, in the order its text opens them."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(reversed(item.values()))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def _scanned(text: str) -> tuple[Any, dict[int, int]]:
    """The document, and the line each of its objects starts on (by id), read by ``json``'s pure-Python scanner."""
    starts: dict[int, int] = {}
    decoder: Any = json.JSONDecoder()
    parse: Any = getattr(json.decoder, "JSONObject")  # noqa: B009 - not in the stubs: the stdlib's own parser

    def parse_object(s_and_end: tuple[str, int], *args: Any) -> tuple[Any, int]:
        found, end = parse(s_and_end, *args)
        starts[id(found)] = s_and_end[1] - 1  # the offset of its '{'
        return found, end

    decoder.parse_object = parse_object
    decoder.scan_once = getattr(json.scanner, "py_make_scanner")(decoder)  # noqa: B009 - the one that calls it
    document = decoder.decode(text)
    newlines = [match.start() for match in re.finditer("\n", text)]
    return document, {key: bisect.bisect_left(newlines, offset) + 1 for key, offset in starts.items()}


def one_line(path: object, line: int) -> Locate:
    """Every object of a line at that line (a JSONL file's line, a one-line document)."""
    where = f"{path}:{line}"
    return lambda raw: where
