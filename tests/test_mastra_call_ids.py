"""A Mastra-shaped reply whose tool calls and results carry no ``toolCallId`` (docs/targets/mastra.md): each call
keeps its own result in the record, through the real CLI against a loopback server; before, every call and result
was recorded with the id ``None``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.agent_server import Answer, ScriptedAgent, Seen
from tests.conftest import CliResult


def reply(seen: Seen) -> Answer:
    if seen.path == "/api/agents/weatherAgent":
        return Answer(body={"name": "Weather Agent"})
    if seen.path.startswith("/api/memory/status"):
        return Answer(body={"result": True, "memoryType": "local"})
    if seen.path == "/api/agents/weatherAgent/generate":
        return Answer(body={"text": "done", "response": {"messages": [
            {"role": "assistant", "content": [
                {"type": "tool-call", "toolName": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool-call", "toolName": "get_weather", "input": {"city": "Rome"}}]},
            {"role": "tool", "content": [
                {"type": "tool-result", "toolName": "get_weather", "output": {"type": "json", "value": {"t": 20}}},
                {"type": "tool-result", "toolName": "get_weather",
                 "output": {"type": "error-text", "value": "Rome is down"}}]},
            {"role": "assistant", "content": [{"type": "text", "text": "done"}]}]}})
    return Answer(status=404, body={"error": "Not Found"})


@pytest.fixture
def server() -> Iterator[ScriptedAgent]:
    agent = ScriptedAgent()
    agent.answer = reply
    try:
        yield agent
    finally:
        agent.stop()


def test_calls_without_ids_keep_their_own_results_on_every_turn(server: ScriptedAgent, write: Callable[..., Path],
                                                                cli: Callable[..., CliResult]) -> None:
    write("d.yaml", f"""
        target: {{mastra: {{url: "{server.url}", agent: weatherAgent}}}}
        scorers: [{{includes: done}}, no_tool_errors]
        data: [{{id: one, inputs: [hello, again]}}]
        """)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    turns = result.json["items"][0]["turns"]
    first = turns[0]["output"]
    assert [c["id"] for c in first[0]["tool_calls"]] == ["no-id-call-1", "no-id-call-2"]
    results = {m["tool_call_id"]: m for m in first if m["role"] == "tool"}
    assert set(results) == {"no-id-call-1", "no-id-call-2"}
    assert results["no-id-call-2"].get("is_error") is True and not results["no-id-call-1"].get("is_error")
    # the next turn's calls are its own: renamed as any reused id is, never merged with the first turn's
    again = [c["id"] for c in turns[1]["output"][0]["tool_calls"]]
    assert again == ["no-id-call-1~1", "no-id-call-2~1"]
    assert {m["tool_call_id"] for m in turns[1]["output"] if m["role"] == "tool"} == set(again)
    assert "None" not in result.stdout
