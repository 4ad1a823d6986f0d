"""One regex rule (docs/checks.md): a string written ``"/.../"`` is a regular expression wherever a dataset's value is
matched against what the agent produced: a mock's ``when``, ``tool_args``, ``trajectory`` and ``structured_output``,
through one function (``evalcli.patterns.values_match``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from evalcli.patterns import is_pattern, pattern_problems, values_match
from evalcli.scorers.checks.matching import values_match as checks_values_match
from evalcli.tools import matches
from tests.conftest import CliResult

AGENT = '''
import json
import evalcli


@evalcli.tool
def search(query: str, filters: dict) -> str:
    return f"live results for {query}"


def searcher(input, **options):
    arguments = {"query": input, "filters": {"year": 2024, "venue": "Berlin Olympiastadion"}}
    try:
        value = search(**arguments)
    except Exception as exc:
        value = f"failed: {exc}"
    return [{"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "search", "arguments": json.dumps(arguments)}}]},
            {"role": "tool", "tool_call_id": "c1", "content": value},
            {"role": "assistant", "content": value}]
'''


def test_a_slash_string_is_a_regex_in_when_tool_args_and_trajectory(write: Callable[..., Path],
                                                                   cli: Callable[..., CliResult],
                                                                   workdir: Path) -> None:
    (workdir / "search_agent.py").write_text(AGENT)
    write("d.yaml", """
        target: search_agent:searcher
        tools:
          search:
            - when: {query: "/Euro 2024/"}
              returns: mocked results
        gates:
          - tool_args: {name: search, args: {query: "/Euro 2024/"}}
          - tool_args: {name: search, args: {filters: {venue: "/^Berlin/"}}}
          - trajectory: {expected: [{name: search, args: {query: "/final/"}}], args: partial}
        data:
          - id: final
            input: Who won the Euro 2024 final?
    """)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr  # old main: the mock matched, tool_args and trajectory did not
    [item] = result.json["items"]
    assert [m["source"] for m in item["turns"][0]["output"] if m["role"] == "tool"] == ["mock"]
    assert item["passed"] and list(item["gate_scores"].values()) == [1.0, 1.0, 1.0], item["outcomes"]
    write("e.yaml", """
        target: search_agent:searcher
        gates:
          - tool_args: {name: search, args: {query: "/Euro (2024/"}}
        data:
          - input: Who won?
        tools:
          search:
            - when: {query: "/[Ee]uro(/"}
              returns: mocked results
    """)
    bad = cli("validate", "e.yaml")
    assert bad.code == 2 and "Traceback" not in bad.stderr, bad.stderr
    assert "e.yaml:3:37: tool_args: 'args': query: '/Euro (2024/' is not a valid regular expression" in bad.stderr
    assert "e.yaml:8:21: dataset: tools.search[0]: when.query: '/[Ee]uro(/' is not a valid regular expression" \
        in bad.stderr, bad.stderr


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=8)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"),
                                                           ensure_ascii=False)


@given(JSON, st.text(max_size=6), st.sampled_from(["partial", "exact"]))
def test_a_slash_string_matches_a_value_whose_text_it_finds(actual: Any, piece: str, mode: str) -> None:
    pattern = f"/{re.escape(piece)}/"
    assert is_pattern(pattern) and pattern_problems(pattern) == []
    found = piece in _text(actual)
    assert values_match(pattern, actual, mode) == found  # type: ignore[arg-type]
    # the same answer from every place that matches a value: a mock's `when` and the checks
    assert matches({"k": pattern}, {"k": actual}) == found
    assert checks_values_match({"k": pattern}, {"k": actual}, mode) == found  # type: ignore[arg-type]
    assert checks_values_match([pattern], [actual], mode) == found  # type: ignore[arg-type]


WHOLE = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                     max_leaves=8)


def _has_pattern(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_pattern(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_pattern(v) for v in value)
    return is_pattern(value)


@given(WHOLE, WHOLE)
def test_a_value_without_patterns_matches_exactly_when_equal_as_json(expected: Any, actual: Any) -> None:
    if _has_pattern(expected):
        return
    same = json.dumps(expected, sort_keys=True) == json.dumps(actual, sort_keys=True)
    assert values_match(expected, actual, "exact") == same
    assert matches({"k": expected}, {"k": actual}) == same  # a mock's `when` compares each value exactly
    assert values_match(expected, expected, "partial")
    if same:
        assert values_match(expected, actual, "partial")  # exact is the stricter


def test_invalid_patterns_are_named() -> None:
    assert pattern_problems({"a": ["/ok/", "/(/"], "b": "//"}) == ["a[1]: '/(/' is not a valid regular expression: "
                                                                  "missing ), unterminated subpattern at position 0"]
    assert not is_pattern("/") and is_pattern("//") and not is_pattern(1)
