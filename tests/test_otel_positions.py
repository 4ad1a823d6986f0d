"""Where each JSON object of a one-document trace file starts (evalcli/otel/positions.py; docs/otel.md, "Mistakes"):
a hypothesis test of the one function that locates them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from evalcli.otel.positions import _objects, located

SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
DOCUMENTS = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.text(max_size=4), inner, max_size=4), max_leaves=25)


def objects(value: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object of ``value``, in the order its text opens them (recursively: the rule ``_objects`` keeps)."""
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from objects(item)
    elif isinstance(value, list):
        for item in value:
            yield from objects(item)


@given(DOCUMENTS, st.sampled_from([None, 0, 1, 2]))
def test_each_object_is_located_at_the_line_its_brace_opens(value: Any, indent: int | None) -> None:
    text = json.dumps({"data": value}, indent=indent)
    document, locate = located(text, "f.json", json.loads(text))
    assert document == json.loads(text)
    # the n-th '{' of the text that is not inside a string opens the n-th object
    braces: list[int] = []
    inside = escaped = False
    line = 1
    for char in text:
        if inside:
            inside, escaped = (inside, False) if escaped else (char != '"', char == "\\")
        elif char == '"':
            inside = True
        elif char == "{":
            braces.append(line)
        line += char == "\n"
    assert [locate(o) for o in objects(document)] == [f"f.json:{n}" for n in braces]
    assert list(_objects(document)) == list(objects(document))


def test_a_key_repeated_in_an_object_is_located_by_the_scanner() -> None:
    """``json`` keeps a repeated key's last value: the braces outnumber the objects, so they cannot be paired."""
    text = '{"data": [\n  {"a": {"x": 1},\n   "a": 2},\n  {"b": 3}\n]}'
    document, locate = located(text, "f.json", json.loads(text))
    assert document == {"data": [{"a": 2}, {"b": 3}]}
    assert [locate(o) for o in document["data"]] == ["f.json:2", "f.json:4"]
