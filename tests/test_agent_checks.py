"""``answered_by`` and ``structured_output`` (docs/targets/frameworks.md) on hand-made turns, the pending-call rule of interrupts,
options merging, and what custom scorers and the HTML transcript receive of a framework agent's turns."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from evalcli.messages import tool_errors
from evalcli.reports.html.conversation import transcript
from evalcli.results import Interrupt, ItemResult, TurnRecord
from evalcli.scorers.base import ScorerRun, TurnView
from evalcli.scorers.registry import Builder
from evalcli.targets import merge_options
from tests.test_library_checks import call, problems_of, spec


def named(text: Any, name: str | None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if name:
        message["name"] = name
    return message


def score_on(ref: Any, output: list[dict[str, Any]], structured: list[Any] | None = None) -> tuple[float | None, str,
                                                                                                     bool]:
    turns = tuple(TurnView(i, "q", [], structured=value) for i, value in enumerate(structured or [None]))
    outcome = asyncio.run(Builder({}, llm=lambda: None).build(spec(ref)).score(ScorerRun("q", output, turns=turns)))
    return outcome.score, outcome.reason or "", outcome.not_scorable


def test_answered_by_reads_the_last_assistant_message_with_text() -> None:
    output = [named("Routing you.", "Triage Agent"), {**call("transfer_to_seat_booking_agent"), "name": "Triage Agent"},
              named("Seat changed.", "Seat Booking Agent"), {**call("log"), "name": "Logger"}]
    assert score_on({"answered_by": "Seat Booking Agent"}, output)[0] == 1.0
    assert score_on({"answered_by": "Triage Agent"}, output)[:2] == (0.0, "the last answer (\"Seat changed.\") was written "
                                                                         "by 'Seat Booking Agent', which is not "
                                                                         "'Triage Agent'")
    assert score_on({"answered_by": "X"}, [named("Hi", None)])[1].endswith("names no agent (only Agents SDK targets "
                                                                           "name the agent that wrote a message)")
    assert score_on({"answered_by": "X"}, [call("t")])[:2] == (0.0, "no assistant message with text")
    assert spec({"answered_by": "Seat Booking Agent"}).id == "answered_by(Seat Booking Agent)"
    assert problems_of({"answered_by": ""})


@pytest.mark.parametrize(("args", "structured", "expected"), [
    ({"expected": {"risk": 8}}, {"risk": 8.0, "advice": "x"}, 1.0),
    ({"expected": {"risk": 8}, "mode": "exact"}, {"risk": 8, "advice": "x"}, 0.0),
    ({"expected": {"nested": {"a": 1}}}, {"nested": {"a": 1, "b": 2}}, 1.0),
    ({"expected": {"flag": True}}, {"flag": 1}, 0.0),
    ({"schema": {"type": "object", "required": ["risk"]}}, {"risk": 1}, 1.0),
    ({"schema": {"type": "object", "required": ["risk"]}}, {"advice": "x"}, 0.0),
    ({}, ["a list"], 1.0),
    ({"expected": {"a": 1}}, ["a list"], 0.0),
])
def test_structured_output_matches_like_tool_args(args: dict[str, Any], structured: Any, expected: float) -> None:
    assert score_on({"structured_output": args} if args else "structured_output", [], [structured])[0] == expected


def test_structured_output_reads_the_last_turn_and_says_why() -> None:
    ref = {"structured_output": {"expected": {"city": "Paris", "day": "today"}}}
    assert score_on(ref, [], [{"city": "Paris", "day": "today"}, None])[2] is True  # the last turn has none
    value, reason, _ = score_on(ref, [], [None, {"city": "Oslo"}])
    assert value == 0.0 and reason == ("turn 1's structured result \"{city: Oslo}\" does not match {city: Paris, day: "
                                       "today} (partial): missing day; city: Oslo (expected Paris)")
    assert spec(ref).id == "structured_output"
    assert problems_of({"structured_output": {"schema": {"type": "nonsense"}}})
    assert problems_of({"structured_output": {"mode": "fuzzy"}})


def test_a_call_left_pending_by_an_interrupt_is_not_a_tool_error() -> None:
    interrupted = [call("ask_human", {}, "c1"), {"role": "assistant", "content": "Approve?", "interrupt": True}]
    assert tool_errors(interrupted) == []
    assert tool_errors([call("ask_human", {}, "c1")]) == ["ask_human (c1) has no result"]
    later = [*interrupted, call("other", {}, "c2")]
    assert tool_errors(later) == ["other (c2) has no result"]  # only the calls before the interrupt are pending


def test_options_merge_key_by_key_at_every_level() -> None:
    base = {"memory": {"resource": "a", "extra": 1}, "config": {"configurable": {"x": 1}, "tags": ["a"]}, "n": 1}
    over = {"memory": {"resource": "b"}, "config": {"configurable": {"y": 2}, "tags": ["b"]}, "deps": {"k": 1}}
    assert merge_options(base, over) == {"memory": {"resource": "b", "extra": 1},
                                         "config": {"configurable": {"x": 1, "y": 2}, "tags": ["b"]}, "n": 1,
                                         "deps": {"k": 1}}
    assert base["memory"] == {"resource": "a", "extra": 1}  # neither side is changed


def test_the_html_transcript_shows_agents_interrupts_structured_results_and_retries() -> None:
    turns = [TurnRecord(0, "Book", [{**call("ask", {}, "c1"), "name": "Triage"},
                                    {"role": "assistant", "content": "Sure?", "interrupt": True}], 1.0,
                        interrupt=Interrupt("Sure?"), structured={"city": "Paris"}, output_retries=2),
             TurnRecord(1, "yes", [{"role": "tool", "tool_call_id": "c1", "content": "ok"},
                                   named("Booked.", "Booking Agent")], 1.0, resume="yes")]
    item = ItemResult(0, "trip", [], "turns", "ok", "t", "r", turns, metadata={"ticket": 7})
    data = transcript(item)
    first, second = data["turns"]
    assert first["messages"][-1] == {"k": "text", "text": "Sure?", "who": "Assistant (interrupt)", "interrupt": True}
    assert first["structured"] == '{\n  "city": "Paris"\n}' and first["retries"] == 2 and not first["resumed"]
    assert second["resumed"] and second["messages"][0]["name"] == "ask"  # the result of the earlier turn's call
    assert second["messages"][1] == {"k": "text", "text": "Booked.", "who": "Assistant (Booking Agent)"}
    assert data["metadata"] == '{\n  "ticket": 7\n}'
    as_json = item.to_json()
    assert as_json["metadata"] == {"ticket": 7}
    assert [(t["structured"], t["interrupt"], t["resume"], t["output_retries"]) for t in as_json["turns"]] == [
        ({"city": "Paris"}, "Sure?", None, 2), (None, None, "yes", 0)]
