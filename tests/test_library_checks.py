"""The scorer library's checks (docs/reference/scorers.md) on hand-made transcripts: exact scores for every mode and edge case."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from evalcli.dataset import parse_ref
from evalcli.dataset.yamlsrc import Positions
from evalcli.results import Outcome
from evalcli.scorers.base import ScorerRun
from evalcli.scorers.checks.matching import Call, maximum_matching, values_match
from evalcli.scorers.registry import Builder, Registry, ScorerSpec


def call(name: str, arguments: Any = None, call_id: str = "c") -> dict[str, Any]:
    """An assistant message calling one tool; ``arguments`` is JSON-encoded unless it is already a string."""
    raw = arguments if isinstance(arguments, str) else json.dumps({} if arguments is None else arguments)
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}]}


def say(text: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def spec(ref: Any) -> ScorerSpec:
    problems: list[Any] = []
    parsed = parse_ref(ref, (), Positions("t.yaml"), Registry(), problems, gate=False)
    assert not problems, problems
    assert parsed is not None
    return parsed


def problems_of(ref: Any) -> list[str]:
    problems: list[Any] = []
    parse_ref(ref, (), Positions("t.yaml"), Registry(), problems, gate=False)
    return [p.message for p in problems]


def outcome(ref: Any, output: list[dict[str, Any]]) -> Outcome:
    scorer = Builder({}, llm=lambda: None).build(spec(ref))
    return asyncio.run(scorer.score(ScorerRun("question", output)))


def score(ref: Any, output: list[dict[str, Any]]) -> float | None:
    return outcome(ref, output).score


# --- JSON value matching ---------------------------------------------------------------------------

@pytest.mark.parametrize(("expected", "actual", "mode", "matches"), [
    (1, 1.0, "partial", True),
    (1.5, 1.5, "exact", True),
    (1, True, "partial", False),
    (True, 1, "partial", False),
    (False, 0, "exact", False),
    (True, True, "exact", True),
    ("1", 1, "partial", False),
    ("Paris", "paris", "partial", False),
    (None, None, "exact", True),
    (None, "null", "partial", False),
    ({"a": 1}, {"a": 1, "b": 2}, "partial", True),
    ({"a": 1}, {"a": 1, "b": 2}, "exact", False),
    ({"a": {"b": 1}}, {"a": {"b": 1.0, "c": 3}}, "partial", True),
    ({"a": {"b": 1}}, {"a": {"b": 1, "c": 3}}, "exact", False),
    ({"a": None}, {}, "partial", False),
    ([1, 2], [1, 2], "partial", True),
    ([1, 2], [2, 1], "partial", False),
    ([1, 2], [1, 2, 3], "partial", False),
    ([{"a": 1}], [{"a": 1, "b": 2}], "partial", True),
    ([{"a": 1}], [{"a": 1, "b": 2}], "exact", False),
    ([], [], "exact", True),
    ({}, {"anything": 1}, "partial", True),
    ({}, {"anything": 1}, "exact", False),
    ({}, [], "partial", False),
])
def test_values_match(expected: Any, actual: Any, mode: Any, matches: bool) -> None:
    assert values_match(expected, actual, mode) is matches


# --- tool_args -------------------------------------------------------------------------------------

WEATHER = [call("get_weather", {"city": "London"}, "c1"),
           call("get_weather", {"city": "Paris", "units": "C", "days": 2.0, "opts": {"hourly": True, "lang": "fr"}}, "c2"),
           say("Paris: 18C.")]
WEATHER_SECOND = 'get_weather({"city": "Paris", "units": "C", "days": 2.0, "opts": {"hour…)'


@pytest.mark.parametrize(("args", "expected"), [
    ({"name": "get_weather", "args": {"city": "Paris"}}, 1),  # the second of two calls
    ({"name": "get_weather", "args": {"city": "Paris", "days": 2}}, 1),  # 2 equals 2.0
    ({"name": "get_weather", "args": {"days": "2"}}, 0),  # a string is not a number
    ({"name": "get_weather", "args": {"opts": {"hourly": True}}}, 1),  # nested partial
    ({"name": "get_weather", "args": {"opts": {"hourly": 1}}}, 0),  # 1 is not true
    ({"name": "get_weather", "args": {"city": "Berlin"}}, 0),
    ({"name": "get_weather", "args": {"city": "Paris"}, "mode": "exact"}, 0),
    ({"name": "get_weather", "args": {"city": "London"}, "mode": "exact"}, 1),
    ({"name": "get_weather", "args": {}}, 1),
    ({"name": "get_weather", "args": {}, "mode": "exact"}, 0),
    ({"name": "search", "args": {}}, 0),
])
def test_tool_args(args: dict[str, Any], expected: float) -> None:
    assert score({"tool_args": args}, WEATHER) == expected


@pytest.mark.parametrize(("raw", "args", "mode", "expected"), [
    ("{}", {}, "exact", 1),
    ("{}", {}, "partial", 1),
    ("not json", {}, "partial", 0),
    ("", {}, "partial", 0),
    ("[1, 2]", {}, "partial", 0),  # a JSON value that is not an object never matches
    ('"city"', {}, "partial", 0),
    ('{"ids": [1, 2, 3]}', {"ids": [1, 2, 3]}, "partial", 1),
    ('{"ids": [1, 2, 3]}', {"ids": [1, 2]}, "partial", 0),
    ('{"ids": [{"n": 1, "x": 0}]}', {"ids": [{"n": 1}]}, "partial", 1),
    ('{"ids": [{"n": 1, "x": 0}]}', {"ids": [{"n": 1}]}, "exact", 0),
    ('{"a": null}', {"a": None}, "exact", 1),
])
def test_tool_args_raw_arguments(raw: str, args: dict[str, Any], mode: str, expected: float) -> None:
    assert score({"tool_args": {"name": "f", "args": args, "mode": mode}}, [call("f", raw)]) == expected


def test_tool_args_accepts_arguments_already_parsed() -> None:
    message = {"role": "assistant", "tool_calls": [{"id": "x", "function": {"name": "f", "arguments": {"a": 1}}}]}
    assert score({"tool_args": {"name": "f", "args": {"a": 1.0}}}, [message]) == 1


def test_tool_args_reasons() -> None:
    assert outcome({"tool_args": {"name": "get_weather", "args": {"city": "Paris"}}}, WEATHER).reason == (
        f"{WEATHER_SECOND} matches {{city: Paris}} (partial)")
    missing = outcome({"tool_args": {"name": "get_weather", "args": {"city": "Rome"}}}, WEATHER).reason
    assert missing is not None and missing.startswith("no call to get_weather matches {city: Rome} (partial); calls to "
                                                      'get_weather: get_weather({"city": "London"}), ')
    assert outcome({"tool_args": "search"}, WEATHER).reason == ("search was not called; calls: "
                                                                'get_weather({"city": "London"}), ' + WEATHER_SECOND)
    assert outcome({"tool_args": "search"}, [say("hi")]).reason == ("search was not called; calls: none (no tool calls "
                                                                   "were reported)")



# --- trajectory ------------------------------------------------------------------------------------

SEARCH_X = call("search", {"q": "x", "page": 1}, "s1")
SEARCH_Y = call("search", {"q": "y"}, "s2")
LOOKUP = call("lookup", "not json", "l1")
BOOK = call("book", {"date": "today"}, "b1")
TRIP = [SEARCH_X, LOOKUP, say("Booking now."), BOOK]  # calls: search, lookup, book


@pytest.mark.parametrize(("expected", "results"), [
    # expected                   strict in_order unordered superset subset
    (["search", "lookup", "book"], (1, 1, 1, 1, 1)),
    (["search", "book"], (0, 1, 0, 1, 0)),
    (["book", "search", "lookup"], (0, 0, 1, 1, 1)),
    (["book", "search"], (0, 0, 0, 1, 0)),
    (["search", "lookup", "book", "pay"], (0, 0, 0, 0, 1)),
    (["search", "search", "lookup", "book"], (0, 0, 0, 0, 1)),  # repeated: one search cannot serve two
    (["pay"], (0, 0, 0, 0, 0)),
    ([], (0, 1, 0, 1, 0)),
])
def test_trajectory_modes(expected: list[str], results: tuple[int, ...]) -> None:
    modes = ("strict", "in_order", "unordered", "superset", "subset")
    got = tuple(score({"trajectory": {"expected": expected, "mode": mode}}, TRIP) for mode in modes)
    assert got == results


@pytest.mark.parametrize(("expected", "results"), [
    ([], (1, 1, 1, 1, 1)),  # both empty
    (["search"], (0, 0, 0, 0, 1)),  # no calls: an empty set of calls is a subset of anything
])
def test_trajectory_without_calls(expected: list[str], results: tuple[int, ...]) -> None:
    modes = ("strict", "in_order", "unordered", "superset", "subset")
    got = tuple(score({"trajectory": {"expected": expected, "mode": mode}}, [say("No tools needed.")]) for mode in modes)
    assert got == results


def test_trajectory_repeated_tools() -> None:
    calls = [call("a", None, "1"), call("a", None, "2"), call("b", None, "3")]
    assert score({"trajectory": {"expected": ["a", "b", "a"], "mode": "unordered"}}, calls) == 1
    assert score({"trajectory": {"expected": ["a", "b", "b"], "mode": "unordered"}}, calls) == 0
    assert score({"trajectory": {"expected": ["a", "a", "b"], "mode": "strict"}}, calls) == 1
    assert score({"trajectory": {"expected": ["a", "b", "a"], "mode": "strict"}}, calls) == 0
    assert score({"trajectory": {"expected": ["a", "a"], "mode": "in_order"}}, calls) == 1
    assert score({"trajectory": {"expected": ["a", "a", "a"], "mode": "superset"}}, calls) == 0
    assert score({"trajectory": {"expected": ["a", "b"], "mode": "subset"}}, calls) == 0


@pytest.mark.parametrize(("entry", "args", "expected"), [
    ({"name": "search", "args": {"q": "x"}}, "ignore", 1),
    ({"name": "search", "args": {"q": "zzz"}}, "ignore", 1),  # ignored
    ({"name": "search", "args": {"q": "x"}}, "partial", 1),
    ({"name": "search", "args": {"q": "zzz"}}, "partial", 0),
    ({"name": "search", "args": {"q": "x"}}, "exact", 0),  # the call also has page
    ({"name": "search", "args": {"q": "x", "page": 1.0}}, "exact", 1),
    ({"name": "search"}, "exact", 1),  # a mapping without args is a bare name
    ({"name": "lookup", "args": {}}, "partial", 0),  # lookup's arguments are not JSON
    ({"name": "lookup", "args": {}}, "ignore", 1),
    ("lookup", "exact", 1),  # a bare name matches whatever the arguments
])
def test_trajectory_argument_modes(entry: Any, args: str, expected: int) -> None:
    assert score({"trajectory": {"expected": [entry], "mode": "in_order", "args": args}}, TRIP) == expected


def test_maximum_matching_succeeds_where_first_fit_fails() -> None:
    # the bare name would grab the first search, leaving nothing for search {q: x}
    expected: list[Any] = ["search", {"name": "search", "args": {"q": "x"}}]
    calls = [SEARCH_X, SEARCH_Y]
    for mode in ("superset", "unordered", "subset"):
        ref = {"trajectory": {"expected": expected, "mode": mode, "args": "partial"}}
        assert score(ref, calls) == 1, mode
    fits = {(0, 0), (0, 1), (1, 0)}
    greedy: dict[int, int] = {}
    for i in range(2):
        free = [j for j in range(2) if (i, j) in fits and j not in greedy.values()]
        if free:
            greedy[i] = free[0]
    assert len(greedy) == 1  # first fit pairs only one
    assert maximum_matching(2, 2, lambda i, j: (i, j) in fits) == {0: 1, 1: 0}


def test_maximum_matching_on_a_larger_graph() -> None:
    edges = {0: {0, 1}, 1: {0}, 2: {1, 2}, 3: {2}}
    pairs = maximum_matching(4, 3, lambda i, j: j in edges[i])
    assert len(pairs) == 3 and len(set(pairs.values())) == 3
    assert all(j in edges[i] for i, j in pairs.items())


def test_trajectory_reasons_name_what_found_no_partner() -> None:
    reason = outcome({"trajectory": {"expected": ["search", {"name": "book", "args": {"date": "tomorrow"}}, "pay"],
                                     "mode": "unordered", "args": "partial"}}, TRIP).reason
    assert reason == ("unordered: does not fit (matched 1 pair; expected with no partner: book {date: tomorrow}, pay; "
                      "calls with no partner: lookup(not json), book({\"date\": \"today\"})); expected [search, "
                      "book {date: tomorrow}, pay] (args partial); calls: search({\"q\": \"x\", \"page\": 1}), "
                      "lookup(not json), book({\"date\": \"today\"})")
    strict = outcome({"trajectory": {"expected": ["search", "book", "lookup"], "mode": "strict"}}, TRIP).reason
    assert strict is not None and strict.startswith('strict: does not fit (call 2 is lookup(not json), expected book)')
    in_order = outcome({"trajectory": ["book", "search"]}, TRIP).reason
    assert in_order is not None and in_order.startswith(
        "in_order: does not fit (matched 1 of 2 in order; no call for search after those)")
    fits = outcome({"trajectory": ["search", "book"]}, TRIP).reason
    assert fits is not None and fits.startswith("in_order: fits; expected [search, book] (args ignore); calls: ")


# --- tool_f1 ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("names", "output", "expected"), [
    (["search", "lookup", "book"], TRIP, 1.0),
    (["search", "book"], TRIP, 0.8),  # precision 2/3, recall 1
    (["search", "pay"], TRIP, 0.4),  # 2*1/(3+2)
    (["pay"], TRIP, 0.0),
    ([], TRIP, 0.0),
    ([], [say("hi")], 1.0),  # both empty
    (["search"], [say("hi")], 0.0),
    (["a"], [call("a", None, "1"), call("a", None, "2")], 1.0),  # a set: repeats count once
])
def test_tool_f1(names: list[str], output: list[dict[str, Any]], expected: float) -> None:
    got = score({"tool_f1": names}, output)
    assert got == pytest.approx(expected)


def test_tool_f1_reason() -> None:
    assert outcome({"tool_f1": ["search", "pay"]}, TRIP).reason == (
        "F1 0.400 (precision 1/3, recall 1/2): matched search; missing pay; extra book, lookup")


# --- json_output -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ('{"city": "Paris"}', 1),
    ('  \n{"city": "Paris"}\n ', 1),  # trimmed
    ("[1, 2]", 1),
    ('"just a string"', 1),
    ("42", 1),
    ("null", 1),
    ('```json\n{"city": "Paris"}\n```', 1),
    ('```\n{"city": "Paris"}\n```', 1),
    ('```JSON\n[1]\n```', 1),
    ('Here it is:\n```json\n{"city": "Paris"}\n```', 0),  # not only the block
    ('```json\n{"a": 1}\n```\n```json\n{"b": 2}\n```', 0),  # two blocks
    ('```python\n{"a": 1}\n```', 0),
    ('```json\n{a: 1}\n```', 0),
    ("{city: Paris}", 0),
    ("NaN", 0),
    ('{"a": Infinity}', 0),
    ("The weather is fine.", 0),
])
def test_json_output(text: str, expected: int) -> None:
    assert score("json_output", [say(text)]) == expected


def test_json_output_reads_the_last_assistant_message_with_text() -> None:
    assert score("json_output", [say('{"a": 1}'), say("done!")]) == 0
    assert score("json_output", [say("thinking..."), say('{"a": 1}'), call("f"), say("   ")]) == 1
    assert score("json_output", [say([{"type": "text", "text": "no"}, {"type": "text", "text": "[true]"}])]) == 1
    assert score("json_output", [call("f")]) == 0
    assert outcome("json_output", [call("f")]).reason == "no assistant text"
    assert outcome("json_output", []).score == 0


SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "temp": {"type": "number"}},
          "required": ["city", "temp"]}


def test_json_output_with_a_schema() -> None:
    ref = {"json_output": {"schema": SCHEMA}}
    assert score(ref, [say('{"city": "Paris", "temp": 18}')]) == 1
    assert score(ref, [say('```json\n{"city": "Paris", "temp": 18.5}\n```')]) == 1
    bad = outcome(ref, [say('{"city": "Paris", "temp": "warm"}')])
    assert bad.score == 0 and bad.reason == ("the text is JSON but not valid against the schema: 'warm' is not of type "
                                             "'number' (at $.temp)")
    assert score(ref, [say('{"city": "Paris"}')]) == 0
    assert score(ref, [say("[]")]) == 0
    assert outcome("json_output", [say("[]")]).reason == "the text is JSON (array)"


def test_json_output_rejects_an_invalid_schema_at_load_time() -> None:
    messages = problems_of({"json_output": {"schema": {"type": "objet"}}})
    assert len(messages) == 1 and "not a valid JSON Schema" in messages[0] and "schema" in messages[0]
    assert problems_of({"json_output": {"schema": {"type": "object", "minProperties": -1}}})
    assert problems_of({"json_output": {"type": "object"}})  # the schema goes under `schema:`


# --- arguments and default ids ---------------------------------------------------------------------

@pytest.mark.parametrize(("ref", "expected"), [
    ({"tool_args": {"name": "get_weather", "args": {"city": "Paris"}}}, "tool_args(get_weather, {city: Paris})"),
    ({"tool_args": {"name": "get_weather", "args": {"n": "1"}}}, 'tool_args(get_weather, {n: "1"})'),
    ({"tool_args": {"name": "get_weather", "args": {"n": 1}}}, "tool_args(get_weather, {n: 1})"),
    ({"tool_args": {"name": "f", "args": {"city": "Paris, France"}, "mode": "exact"}},
     'tool_args(f, {city: "Paris, France"}, mode=exact)'),
    ({"tool_args": "get_weather"}, "tool_args(get_weather)"),
    ({"trajectory": {"expected": ["search", "book"], "mode": "strict"}}, "trajectory(strict: search, book)"),
    ({"trajectory": ["search", "book"]}, "trajectory(in_order: search, book)"),
    ({"trajectory": {"expected": ["search", {"name": "book", "args": {"date": "today"}}], "args": "partial"}},
     "trajectory(in_order: search, book {date: today}; args=partial)"),
    ({"trajectory": {"expected": [], "mode": "subset"}}, "trajectory(subset: [])"),
    ({"tool_f1": ["search", "book"]}, "tool_f1([search, book])"),
    ({"tool_f1": []}, "tool_f1([])"),
    ("json_output", "json_output"),
    ({"json_output": {"schema": {"type": "object", "required": ["city"]}}},
     "json_output(schema: {type: object, required: [city]})"),
])
def test_default_ids(ref: Any, expected: str) -> None:
    assert spec(ref).id == expected


def test_long_schema_ids_stay_unique() -> None:
    one = {"type": "object", "properties": {f"field_{i}": {"type": "string"} for i in range(10)}}
    two = {**one, "required": ["field_9"]}
    first, second = spec({"json_output": {"schema": one}}).id, spec({"json_output": {"schema": two}}).id
    assert first != second and len(first) <= 100 and first.startswith("json_output(schema: {type: object")


@pytest.mark.parametrize(("ref", "fragment"), [
    ({"trajectory": {"expected": ["a"], "mode": "sideways"}}, "mode"),
    ({"trajectory": {"expected": ["a"], "args": "loose"}}, "args"),
    ({"trajectory": {"expected": [{"name": "a", "arguments": {}}]}}, "arguments"),
    ({"tool_args": {"name": "f", "args": [1, 2]}}, "args"),
    ({"tool_args": {"name": "f", "mode": "ignore"}}, "mode"),
    ({"tool_f1": "search"}, "tool_f1"),
    ({"json_output": "strict"}, "json_output"),
])
def test_invalid_arguments_are_load_errors(ref: Any, fragment: str) -> None:
    messages = problems_of(ref)
    assert messages and any(fragment in m for m in messages), messages


def test_call_describe_shortens_long_arguments() -> None:
    text = Call("f", json.dumps({"x": "y" * 200}), "1", None).describe()
    assert text.startswith('f({"x": "yyy') and text.endswith("…)") and len(text) < 70
