"""Every check of docs/checks.md, with the scenarios of Mastra's check tests, in OpenAI format."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from evalcli.dataset import parse_ref
from evalcli.dataset.yamlsrc import Positions
from evalcli.errors import DatasetError
from evalcli.scorers.base import ScorerRun
from evalcli.scorers.checks.basic import dice_similarity
from evalcli.scorers.registry import Builder, Registry


def say(*texts: str) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": t} for t in texts]


def call(name: str, call_id: str, result: Any = None, *, is_error: bool = False,
         answered: bool = True) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}]}]
    if answered:
        tool: dict[str, Any] = {"role": "tool", "tool_call_id": call_id,
                                "content": json.dumps(result if result is not None else {"ok": True})}
        if is_error:
            tool["is_error"] = True
        messages.append(tool)
    return messages


def score(check: str, arg: Any, output: list[dict[str, Any]]) -> float:
    problems: list[Any] = []
    spec = parse_ref({check: arg} if arg is not ... else check, (), Positions("t"), Registry(), problems, gate=False)
    assert not problems, problems
    assert spec is not None
    scorer = Builder({}, llm=lambda: None).build(spec)
    outcome = asyncio.run(scorer.score(ScorerRun("q", output)))
    assert outcome.score is not None
    return outcome.score


@pytest.mark.parametrize(("check", "arg", "text", "expected"), [
    ("includes", "sunny", "It is Sunny and warm today.", 1),
    ("includes", "rainy", "It is sunny and warm.", 0),
    ("includes", {"value": "Sunny", "ignore_case": False}, "It is sunny and warm.", 0),
    ("excludes", "error", "Hi there! How can I help?", 1),
    ("excludes", "error", "An error occurred while processing.", 0),
    ("equals", "Hello, world!", "hello, world!", 1),
    ("equals", "Hello, world!", "Hello, world! How are you?", 0),
    ("equals", {"value": "Hello", "ignore_case": False}, "hello", 0),
    ("equals", "hello", " hello", 0),
    ("matches", r"\d+°[FC]", "The temperature is 72°F today.", 1),
    ("matches", r"\d+°[FC]", "It is warm outside.", 0),
    ("matches", {"pattern": "hello", "exact": True}, "say hello world", 0),
    ("matches", {"pattern": "say hello world", "exact": True}, "say hello world", 1),
    ("matches", {"pattern": "a|say", "exact": True}, "say", 1),
    ("matches", "Hello", "hello", 0),
    ("similarity", "hello world", "hello world", 1),
    ("similarity", {"expected": "hello world", "threshold": 0.8}, "hello world", 1),
    ("similarity", {"expected": "hello world", "threshold": 0.9}, "xyz12345", 0),
])
def test_text_checks(check: str, arg: Any, text: str, expected: float) -> None:
    assert score(check, arg, say(text)) == expected


def test_includes_joins_messages_with_a_space_and_equals_with_nothing() -> None:
    output = say("Hello", "world")
    assert score("includes", "hello world", output) == 1
    assert score("equals", "helloworld", output) == 1
    assert score("matches", "^Helloworld$", output) == 1


def test_tool_call_messages_without_text_add_nothing_to_the_text() -> None:
    output = [*call("get_weather", "a"), *say("Sunny")]
    assert score("equals", "sunny", output) == 1
    assert score("includes", " sunny", output) == 0  # no stray separator from the text-less message


def test_list_content_uses_the_last_text_part() -> None:
    output = [{"role": "assistant", "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "last"}]}]
    assert score("equals", "last", output) == 1


def test_only_assistant_text_counts() -> None:
    output = [{"role": "user", "content": "Brooklyn"}, {"role": "tool", "tool_call_id": "x", "content": "Brooklyn"},
              *say("nothing here")]
    assert score("includes", "brooklyn", output) == 0


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("Sunny, 72°F", "Sunny, 73°F", 0.7777777777777778),
    ("hello world", "hello world", 1.0),
    ("abcdefgh", "xyz12345", 0.0),
    ("It is sunny in Brooklyn Tomorrow rainy", "sunny", 0.22857142857142856),
    ("", "", 1.0),
    ("a", "ab", 0.0),
    ("aa", "aaaa", 0.5),  # bigrams with multiplicity: {aa:1} vs {aa:3} share 1 -> 2*1/(2+4-2)
])
def test_dice_similarity(a: str, b: str, expected: float) -> None:
    assert dice_similarity(a, b) == expected


def test_similarity_scenario_from_mastra_is_raw_dice_without_threshold() -> None:
    text = "It is sunny and 72°F in Brooklyn today."
    raw = score("similarity", "Sunny and 72°F in Brooklyn", say(text))
    assert round(raw, 4) == 0.8077
    assert score("similarity", {"expected": "Sunny and 72°F in Brooklyn", "threshold": 0.5}, say(text)) == 1


def test_called_tool() -> None:
    assert score("called_tool", "get_weather", call("get_weather", "1")) == 1
    assert score("called_tool", "get_weather", call("search", "1")) == 0
    two = [*call("search", "1"), *call("search", "2")]
    assert score("called_tool", {"name": "search", "times": 2}, two) == 1
    assert score("called_tool", {"name": "search", "times": 3}, two) == 0
    assert score("called_tool", "save", call("save", "1", {"error": "disk full"}, is_error=True)) == 1


def test_did_not_call() -> None:
    assert score("did_not_call", "delete_user", say("hi")) == 1
    assert score("did_not_call", "delete_user", call("delete_user", "1")) == 0
    assert score("did_not_call", "save", call("save", "1", is_error=True)) == 0


@pytest.mark.parametrize(("names", "calls", "expected"), [
    (["search", "summarize"], ["search", "summarize"], 1),
    (["search", "summarize"], ["search", "validate", "summarize"], 1),
    (["search", "summarize"], ["summarize", "search"], 0),
    (["search", "summarize"], ["search"], 0),
    ([], [], 1),
    ([], ["x"], 1),
    (["a", "a"], ["a", "b", "a"], 1),
    (["a", "a"], ["a"], 0),
])
def test_tool_order(names: list[str], calls: list[str], expected: float) -> None:
    output = [m for i, n in enumerate(calls) for m in call(n, str(i))]
    assert score("tool_order", names, output) == expected


def test_max_tool_calls_and_used_no_tools() -> None:
    two = [*call("a", "1"), *call("b", "2")]
    assert score("max_tool_calls", 3, two) == 1
    assert score("max_tool_calls", 2, two) == 1
    assert score("max_tool_calls", 1, two) == 0
    assert score("max_tool_calls", 0, say("x")) == 1
    assert score("used_no_tools", ..., say("x")) == 1
    assert score("used_no_tools", ..., call("a", "1")) == 0
    assert score("used_no_tools", None, call("a", "1", is_error=True)) == 0
    assert score("used_no_tools", {}, say("x")) == 1


def test_no_tool_errors() -> None:
    assert score("no_tool_errors", ..., [*call("a", "1"), *say("ok")]) == 1
    assert score("no_tool_errors", ..., say("no tools")) == 1
    assert score("no_tool_errors", ..., call("a", "1", {"error": "Network timeout"})) == 0
    assert score("no_tool_errors", ..., call("a", "1", {"error": ""})) == 1  # falsy error is no error
    assert score("no_tool_errors", ..., call("a", "1", {"saved": False}, is_error=True)) == 0
    assert score("no_tool_errors", ..., call("a", "1", answered=False)) == 0  # a call with no result
    mixed = [*call("good", "1"), *call("bad", "2", {"error": "boom"})]
    assert score("no_tool_errors", ..., mixed) == 0
    plain_text_result = [*call("a", "1")[:1], {"role": "tool", "tool_call_id": "1", "content": "error: but not JSON"}]
    assert score("no_tool_errors", ..., plain_text_result) == 1


def test_tool_calls_counted_from_every_message_in_order() -> None:
    parallel = [{"role": "assistant", "content": "checking", "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "search", "arguments": "{}"}},
        {"id": "2", "type": "function", "function": {"name": "summarize", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "1", "content": "{}"}, {"role": "tool", "tool_call_id": "2", "content": "{}"}]
    assert score("tool_order", ["search", "summarize"], parallel) == 1
    assert score("max_tool_calls", 1, parallel) == 0
    assert score("includes", "checking", parallel) == 1


@pytest.mark.parametrize(("ref", "expected_id"), [
    ({"includes": "Brooklyn"}, "includes(Brooklyn)"),
    ({"called_tool": {"name": "get_weather", "times": 2}}, "called_tool(get_weather, times=2)"),
    ({"called_tool": {"name": "get_weather", "times": 1}}, "called_tool(get_weather)"),
    ({"includes": {"value": "x", "ignore_case": False}}, "includes(x, ignore_case=false)"),
    ({"similarity": {"expected": "a b", "threshold": 0.5}}, "similarity(a b, threshold=0.5)"),
    ({"tool_order": ["search", "save"]}, "tool_order([search, save])"),
    ({"max_tool_calls": 3}, "max_tool_calls(3)"),
    ("used_no_tools", "used_no_tools"),
    ({"used_no_tools": None}, "used_no_tools"),
    ({"no_tool_errors": {}}, "no_tool_errors"),
    ({"matches": {"pattern": "a+", "exact": True}}, "matches(a+, exact=true)"),
    ({"includes": 72}, "includes(72)"),
    ({"scorer": {"includes": "x"}, "id": "named"}, "named"),
])
def test_default_ids(ref: Any, expected_id: str) -> None:
    problems: list[Any] = []
    spec = parse_ref(ref, (), Positions("t"), Registry(), problems, gate=False)
    assert not problems
    assert spec is not None and spec.id == expected_id


@pytest.mark.parametrize(("ref", "message"), [
    ({"includes": {"valeu": "x"}}, "unknown key 'valeu' in includes (did you mean 'value'?)"),
    ({"called_tool": {"name": "x", "tims": 2}}, "did you mean 'times'?"),
    ({"matches": "("}, "not a valid regular expression"),
    ({"similarity": {"expected": "x", "threshold": 1.5}}, "less than or equal to 1"),
    ({"used_no_tools": "x"}, "used_no_tools takes no arguments"),
    ({"includs": "x"}, "unknown scorer kind 'includs' (did you mean 'includes'?)"),
    ("includes", "includes needs 'value'"),
    ("weather-jugde", "unknown scorer 'weather-jugde'"),
    ({"max_tool_calls": -1}, "greater than or equal to 0"),
])
def test_bad_check_arguments_are_located_errors(ref: Any, message: str) -> None:
    problems: list[Any] = []
    parse_ref(ref, ("scorers", 0), Positions("d.yaml", values={("scorers", 0): (7, 5)}), Registry(), problems,
              gate=False)
    assert problems, ref
    text = str(DatasetError(problems))
    assert message in text
    assert text.startswith("d.yaml:7:5: ")
