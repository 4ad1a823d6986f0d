"""What an ``http`` target's agent did is what is recorded (docs/targets/index.md): a thread for every conversation, replies that
repeat earlier turns, and the odd values a service or a dataset may hold. The real CLI against loopback agents."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.agent_server import Answer, ScriptedAgent, Seen
from tests.conftest import CliResult


@pytest.fixture
def agent() -> Iterator[ScriptedAgent]:
    server = ScriptedAgent()
    try:
        yield server
    finally:
        server.stop()


def test_every_http_conversation_has_its_thread_single_turn_items_included(
        write: Callable[..., Path], cli: Callable[..., CliResult], agent: ScriptedAgent) -> None:
    said: dict[object, list[str]] = {}

    def answer(seen: Seen) -> Answer:  # a service that keys its history by the session id it is sent
        history = said.setdefault(seen.body["session"], [])
        history.append(seen.body["input"])
        return Answer(body={"text": " | ".join(history)})

    agent.answer = answer
    write("d.yaml", f"""
        target:
          http:
            url: {agent.url}/chat
            body: {{input: "{{{{ input }}}}", session: "{{{{ thread }}}}", user: "{{{{ resource }}}}"}}
        concurrency: 1
        scorers: [{{excludes: "|"}}]
        data:
          - {{id: a, input: apples}}
          - {{id: b, input: bananas}}
          - {{id: c, inputs: [one, two]}}
        """)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    items = {i["id"]: i for i in result.json["items"]}
    assert items["b"]["turns"][0]["output"][0]["content"] == "bananas"  # never item a's message
    bodies = [r.body for r in agent.requests]
    assert all(isinstance(b["session"], str) and b["session"] for b in bodies)
    assert all(b["user"] == b["session"] for b in bodies)
    assert len({b["session"] for b in bodies}) == 3
    assert items["a"]["thread_id"] == bodies[0]["session"] and items["a"]["resource_id"] == bodies[0]["session"]
    assert items["c"]["turns"][1]["output"][0]["content"] == "one | two"


def whole_conversation_agent(agent: ScriptedAgent) -> None:
    """A service that answers every turn with the whole conversation so far: each turn's tool call (ids c0, c1, ...),
    its result and a text."""
    turns: dict[str, list[dict[str, object]]] = {}

    def answer(seen: Seen) -> Answer:
        history = turns.setdefault(seen.body["session"], [])
        n = sum(1 for m in history if m["role"] == "user")
        history += [{"role": "user", "content": seen.body["input"]},
                    {"role": "assistant", "content": None, "tool_calls": [
                        {"id": f"c{n}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": f"c{n}", "content": f"result {n}"},
                    {"role": "assistant", "content": f"answer {n}"}]
        return Answer(body={"messages": history})

    agent.answer = answer


@pytest.mark.parametrize("history", ["", "\n            response: {messages: messages, history: full}"])
def test_a_reply_that_repeats_the_earlier_turns_records_only_this_turns_messages(
        write: Callable[..., Path], cli: Callable[..., CliResult], agent: ScriptedAgent, history: str) -> None:
    whole_conversation_agent(agent)
    reader = history or "\n            response: {messages: messages}"
    write("d.yaml", f"""
        target:
          http:
            url: {agent.url}/chat
            body: {{input: "{{{{ input }}}}", session: "{{{{ thread }}}}"}}{reader}
        scorers: [{{called_tool: {{name: lookup, times: 3}}}}]
        data:
          - id: three
            turns:
              - input: first
              - input: second
                gates: [{{includes: "answer 1"}}, {{excludes: "answer 0"}}, {{called_tool: {{name: lookup, times: 2}}}}]
              - input: third
        """)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 1, result.stderr  # the second turn called lookup once, not twice
    turns = result.json["items"][0]["turns"]
    ids = [[c["id"] for m in t["output"] for c in m.get("tool_calls") or ()] for t in turns]
    assert ids == [["c0"], ["c1"], ["c2"]]
    assert [[m["content"] for m in t["output"] if m["role"] == "assistant" and m["content"]] for t in turns] == [
        ["answer 0"], ["answer 1"], ["answer 2"]]
    outcomes = turns[1]["outcomes"]["gates"]
    assert [o["score"] for o in outcomes.values()] == [1.0, 1.0, 0.0]
    assert result.json["scores"]["called_tool(lookup, times=3)"] == 1.0


def test_a_reply_that_says_the_previous_turns_text_again_is_this_turns_reply(
        write: Callable[..., Path], cli: Callable[..., CliResult], agent: ScriptedAgent) -> None:
    agent.answer = lambda seen: Answer(body={"text": "I can help with that."})  # the same sentence every turn
    write("d.yaml", f"""
        target:
          http:
            url: {agent.url}/chat
            body: {{input: "{{{{ input }}}}", session: "{{{{ thread }}}}"}}
        data:
          - id: polite
            turns:
              - {{input: hello, gates: [{{includes: help}}]}}
              - {{input: again, gates: [{{includes: help}}]}}
              - {{input: "and again", gates: [{{includes: help}}]}}
        """)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr  # old main: turns 1 and 2 recorded as [] (taken as history), exit 1
    turns = result.json["items"][0]["turns"]
    assert [t["output"] for t in turns] == [[{"role": "assistant", "content": "I can help with that."}]] * 3


def call_zero_agent(agent: ScriptedAgent) -> None:
    """A service that names its tool call ``call_0`` on every turn (this turn's messages only)."""
    def answer(seen: Seen) -> Answer:
        city = seen.body["input"]
        return Answer(body={"messages": [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_0", "type": "function", "function": {"name": "weather", "arguments": f'{{"city": "{city}"}}'}}]},
            {"role": "tool", "tool_call_id": "call_0", "content": f"sunny in {city}"},
            {"role": "assistant", "content": f"It is sunny in {city}."}]})

    agent.answer = answer


@pytest.mark.parametrize("history", ["", ", history: turn"])
def test_a_service_reusing_tool_call_ids_keeps_every_turns_calls(
        write: Callable[..., Path], cli: Callable[..., CliResult], agent: ScriptedAgent, history: str) -> None:
    call_zero_agent(agent)
    gates = "gates: [{called_tool: {name: weather, times: 1}}, no_tool_errors]"
    write("d.yaml", f"""
        target:
          http:
            url: {agent.url}/chat
            body: {{input: "{{{{ input }}}}", session: "{{{{ thread }}}}"}}
            response: {{messages: messages{history}}}
        gates: [{{called_tool: {{name: weather, times: 3}}}}]
        data:
          - id: cities
            turns:
              - {{input: Paris, {gates}}}
              - {{input: Rome, {gates}}}
              - {{input: Oslo, {gates}}}
        """)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr  # old main: turns 1 and 2 lost their calls (exit 1)
    turns = result.json["items"][0]["turns"]
    calls = [[c["id"] for m in t["output"] for c in m.get("tool_calls") or ()] for t in turns]
    answered = [[m["tool_call_id"] for m in t["output"] if m["role"] == "tool"] for t in turns]
    assert calls == answered == [["call_0"], ["call_0~1"], ["call_0~2"]]
    assert [t["output"][1]["content"] for t in turns] == ["sunny in Paris", "sunny in Rome", "sunny in Oslo"]


@given(st.lists(st.tuples(st.sampled_from(["full", "turn", "repeat", "same"]), st.lists(st.integers(0, 6), max_size=4)),
                max_size=6), st.sampled_from(["detect", "full", "turn"]))
def test_no_tool_call_id_is_ever_recorded_in_two_turns(turns: list[tuple[str, list[int]]], history: str) -> None:
    from evalcli.targets.replies import TurnReplies, call_ids

    replies = TurnReplies(history)  # type: ignore[arg-type]
    every: list[dict[str, object]] = []
    owner: dict[str, int] = {}
    earlier: list[dict[str, object]] = []  # what the earlier turns kept, as the service sent it
    for index, (shape, ids) in enumerate(turns):
        fresh: list[dict[str, object]] = []
        for n in ids:
            fresh += [{"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{n}", "type": "function", "function": {"name": "t", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": f"c{n}", "content": "r"}]
        fresh.append({"role": "assistant", "content": "same" if shape == "same" else f"text {index}"})
        reply = [*every, *fresh] if shape == "full" or history == "full" else \
            [*every[:2], *fresh] if shape == "repeat" else fresh
        every += fresh
        sent, kept = replies.take(reply)  # type: ignore[arg-type]
        for message in kept:
            for call in call_ids(message):
                assert owner.setdefault(call, index) == index
        # only a whole repeat of the earlier turns, with something after it, is ever dropped (history: turn drops
        # nothing); the record keeps every message and call of this turn's part, ids aside
        dropped = len(reply) - len(sent)
        assert sent == reply[dropped:] and len(kept) == len(sent)
        if history == "turn" or (history == "detect" and (reply[:len(earlier)] != earlier or reply == earlier)):
            assert dropped == 0
        else:
            assert dropped == len(earlier)
        assert [m["content"] for m in kept] == [m["content"] for m in sent]
        earlier += sent


def test_odd_values_in_bodies_and_replies(write: Callable[..., Path], cli: Callable[..., CliResult],
                                          agent: ScriptedAgent) -> None:
    def answer(seen: Seen) -> Answer:
        kind = seen.body["input"]
        replies: dict[str, object] = {
            "number": {"data": {"text": 3}}, "boolean": {"data": {"text": True}},
            "array": {"data": {"text": ["a"]}}, "typed": {"data": {"text": "ok"}, "n": 7},
            "fine": {"data": {"text": "ok"}, "usage": "not an object"}}
        return Answer(body=replies.get(kind, {"data": {"text": "ok"}}))

    agent.answer = answer
    write("d.yaml", f"""
        target:
          http:
            url: {agent.url}/chat
            body: {{input: "{{{{ input }}}}", meta: "{{{{ metadata }}}}", day: "{{{{ metadata.day }}}}"}}
            response: {{text: "data.text", usage: "usage"}}
        scorers: [{{includes: ok}}]
        data:
          - {{id: dated, input: fine, metadata: {{day: 2024-05-01, at: 2024-05-01T10:30:00Z}}}}
          - {{id: number, input: number, metadata: {{day: 2024-05-02}}}}
          - {{id: boolean, input: boolean, metadata: {{day: 2024-05-03}}}}
          - {{id: array, input: array, metadata: {{day: 2024-05-04}}}}
        """)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 4, result.stderr
    items = {i["id"]: i for i in result.json["items"]}
    assert items["dated"]["status"] == "ok", items["dated"]["error"]
    [dated] = [r.body for r in agent.requests if r.body["input"] == "fine"]
    assert dated["meta"] == {"day": "2024-05-01", "at": "2024-05-01T10:30:00+00:00"} and dated["day"] == "2024-05-01"
    assert items["number"]["turns"][0]["output"][0]["content"] == "3"
    assert "it is a boolean (true), not text" in items["boolean"]["error"]
    assert "it is an array, not text" in items["array"]["error"]
    assert result.stderr.count("response.usage found no usage in 4 replies") == 1, result.stderr
    assert result.db().execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0] == 0


def test_a_jmespath_that_fails_at_run_time_is_the_turns_error_in_the_documented_form(
        write: Callable[..., Path], cli: Callable[..., CliResult], agent: ScriptedAgent) -> None:
    agent.answer = lambda seen: Answer(body={"data": {"text": "ok", "n": "seven"}})
    write("d.yaml", f"""
        target:
          http:
            url: {agent.url}/chat
            response: {{text: "to_string(abs(data.n))", usage: "abs(data.n)"}}
        scorers: [{{includes: ok}}]
        data: [{{id: one, input: hi}}]
        """)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 4, result.stderr
    error = result.json["items"][0]["error"]
    assert error.startswith("turn 0: the reply cannot be read at `to_string(abs(data.n))`: "), error
    assert "JMESPathTypeError" not in error and '{"data": {"text": "ok", "n": "seven"}}' in error
    assert "invalid type for value: seven" in error


@pytest.mark.parametrize("name", ["self", "namespace()", "range(3)", "lipsum()", "dict(a=1)", "cycler(1)"])
def test_template_names_that_are_not_its_variables_are_validation_errors(
        write: Callable[..., Path], cli: Callable[..., CliResult], name: str) -> None:
    write("d.yaml", f"""
        target:
          http:
            url: http://127.0.0.1:1/chat
            body: {{input: "{{{{ input }}}}", x: "{{{{ {name} }}}}"}}
        scorers: [{{includes: ok}}]
        data: [{{input: hi}}]
        """)
    result = cli("validate", "d.yaml")
    bare = name.split("(")[0]
    assert result.code == 2 and f"template uses '{bare}', which is not defined" in result.stderr, result.stderr
    assert "d.yaml:4:" in result.stderr


def test_redirects_a_post_is_never_replayed_as_a_get_and_307_308_keep_method_and_body(
        write: Callable[..., Path], cli: Callable[..., CliResult], agent: ScriptedAgent) -> None:
    def answer(seen: Seen) -> Answer:
        if seen.path == "/moved":
            return Answer(302, {"text": "see elsewhere"}, headers={"Location": "/elsewhere"})
        if seen.path in ("/temporary", "/permanent"):
            code = 307 if seen.path == "/temporary" else 308
            return Answer(code, {"text": "go"}, headers={"Location": "/chat"})
        if seen.method != "POST" or not isinstance(seen.body, dict):
            return Answer(body={"text": "a GET without a body"})
        return Answer(body={"text": f"ok {seen.method} {seen.body['input']}"})

    agent.answer = answer
    for path in ("moved", "temporary", "permanent"):
        write(f"{path}.yaml", f"""
            target: {{http: {{url: "{agent.url}/{path}"}}}}
            scorers: [{{includes: ok}}]
            data: [{{id: one, input: hello}}]
            """)
    moved = cli("run", "moved.yaml", "--json", "-")
    assert moved.code == 4
    error = moved.json["items"][0]["error"]
    assert error.startswith(f"turn 0: POST {agent.url}/moved answered 302 Found, a redirect to /elsewhere"), error
    assert [r.path for r in agent.requests] == ["/moved"]
    for path in ("temporary", "permanent"):
        done = cli("run", f"{path}.yaml", "--json", "-")
        assert done.code == 0, done.stderr
        assert done.json["items"][0]["turns"][0]["output"][0]["content"] == "ok POST hello"
    assert [(r.method, r.path) for r in agent.requests[1:]] == [("POST", "/temporary"), ("POST", "/chat"),
                                                              ("POST", "/permanent"), ("POST", "/chat")]
