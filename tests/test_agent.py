"""evalcli.Agent and evalcli.Memory against a real local HTTP server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from evalcli.agent import Agent, AgentError, FunctionTool, Memory
from evalcli.llm.client import LLMClient, LLMSettings
from evalcli.messages import tool_errors, tool_names
from tests.llm_server import LLMServer, text, tool_call, tool_calls

pytestmark = pytest.mark.usefixtures("llm_backend")  # every test on both backends (docs/models.md)


def get_weather(city: str, day: str = "today") -> dict[str, Any]:
    """Look up the weather forecast for a city.

    Longer details that are not part of the description.

    Args:
        city: The city, e.g. Brooklyn.
        day: Which day: "today" or "tomorrow".
    """
    return {"city": city, "day": day, "forecast": "sunny", "celsius": 22}


async def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"kaboom: {reason}")


def make_agent(server: LLMServer, memory: Memory | None = None, **kwargs: Any) -> Agent:
    llm = LLMClient(LLMSettings(retries=0, timeout=10))
    return Agent(model="openai/agent-model", instructions="You are a weather bot.", tools=[get_weather, explode],
                 memory=memory, api_base=server.url, llm=llm, **kwargs)


def test_tool_loop_sends_tool_results_back(llm_server: LLMServer) -> None:
    llm_server.push(tool_call("get_weather", {"city": "Brooklyn"}, "call_a"), text("Sunny, 22C in Brooklyn."))
    out = make_agent(llm_server).generate_sync("Weather in Brooklyn?", temperature=0, max_tokens=50, seed=3)
    assert [m["role"] for m in out] == ["assistant", "tool", "assistant"]
    assert out[0]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert out[1]["tool_call_id"] == "call_a"
    assert json.loads(out[1]["content"]) == {"city": "Brooklyn", "day": "today", "forecast": "sunny", "celsius": 22}
    assert out[2] == {"role": "assistant", "content": "Sunny, 22C in Brooklyn."}
    first, second = llm_server.requests
    assert first.body["temperature"] == 0 and first.body["max_tokens"] == 50 and first.body["seed"] == 3
    assert [t["function"]["name"] for t in first.body["tools"]] == ["get_weather", "explode"]
    assert [m["role"] for m in first.messages] == ["system", "user"]
    assert [m["role"] for m in second.messages] == ["system", "user", "assistant", "tool"]
    assert second.messages[3]["tool_call_id"] == "call_a" and "sunny" in second.messages[3]["content"]
    assert tool_names(out) == ["get_weather"] and not tool_errors(out)


def test_tool_exception_becomes_an_error_result_the_model_sees(llm_server: LLMServer) -> None:
    llm_server.push(
        tool_calls([("explode", {"reason": "test"}, "c1"), ("get_weather", {"city": 5, "bogus": 1}, "c2"),
                    ("nope", {}, "c3")]),
        text("Sorry, tools failed."),
    )
    out = make_agent(llm_server).generate_sync("Do it")
    results = [m for m in out if m["role"] == "tool"]
    assert [r["is_error"] for r in results] == [True, True, True]
    assert "kaboom: test" in results[0]["content"] and "RuntimeError" in results[0]["content"]
    assert "invalid arguments" in results[1]["content"] and "unknown tool 'nope'" in results[2]["content"]
    assert len(tool_errors(out)) == 3
    sent = llm_server.requests[1].messages
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ["c1", "c2", "c3"]
    assert all("is_error" not in m for m in sent)
    assert out[-1]["content"] == "Sorry, tools failed."


def test_max_steps_exhausted_is_an_error(llm_server: LLMServer) -> None:
    llm_server.responder = lambda request: tool_call("get_weather", {"city": "Paris"})
    with pytest.raises(AgentError, match="max_steps=3"):
        make_agent(llm_server, max_steps=3).generate_sync("loop forever")
    assert len(llm_server.requests) == 3


def test_memory_recalls_earlier_turns_of_the_thread(llm_server: LLMServer, tmp_path: Path) -> None:
    memory = Memory(tmp_path / "memory.db")
    agent = make_agent(llm_server, memory)
    assert agent.memory is memory
    llm_server.push(text("Noted: Lisbon."), text("Lisbon it is."))
    scope = {"thread": "t1", "resource": "r1"}
    agent.generate_sync("My favourite city is Lisbon.", memory=scope)
    agent.generate_sync("What is my favourite city?", memory=scope)
    second = llm_server.requests[1].messages
    assert [m["content"] for m in second] == [
        "You are a weather bot.", "My favourite city is Lisbon.", "Noted: Lisbon.", "What is my favourite city?"]
    assert len(Memory(tmp_path / "memory.db").messages("r1", "t1")) == 4


def test_memory_isolated_across_threads_and_resources(llm_server: LLMServer, tmp_path: Path) -> None:
    agent = make_agent(llm_server, Memory(tmp_path / "memory.db"))
    llm_server.responder = lambda request: text("ok")
    agent.generate_sync("secret of thread one", memory={"thread": "t1", "resource": "r1"})
    for scope in ({"thread": "t2", "resource": "r1"}, {"thread": "t1", "resource": "r2"}, {"thread": "t3"}):
        agent.generate_sync("anything?", memory=scope)
    for request in llm_server.requests[1:]:
        assert [m["role"] for m in request.messages] == ["system", "user"]
        assert "secret of thread one" not in json.dumps(request.messages)


def test_no_thread_stores_nothing(llm_server: LLMServer, tmp_path: Path) -> None:
    memory = Memory(tmp_path / "memory.db")
    agent = make_agent(llm_server, memory)
    llm_server.responder = lambda request: text("ok")
    agent.generate_sync("first", memory=None)
    agent.generate_sync("second", memory={"resource": "r1"})
    assert memory.threads("r1") == []
    assert [m["role"] for m in llm_server.requests[1].messages] == ["system", "user"]


def test_failed_turn_is_not_remembered(llm_server: LLMServer, tmp_path: Path) -> None:
    memory = Memory(tmp_path / "memory.db")
    llm_server.responder = lambda request: tool_call("get_weather", {"city": "Paris"})
    with pytest.raises(AgentError):
        make_agent(llm_server, memory, max_steps=1).generate_sync("x", memory={"thread": "t"})
    assert memory.messages("t", "t") == []


def test_tool_schema_from_hints_and_docstring() -> None:
    schema = FunctionTool(get_weather).schema()
    assert schema == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Look up the weather forecast for a city.",
            "parameters": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "city": {"type": "string", "description": "The city, e.g. Brooklyn."},
                    "day": {"type": "string", "default": "today", "description": 'Which day: "today" or "tomorrow".'},
                },
                "required": ["city"],
            },
        },
    }


def test_async_and_sync_tools_are_called_with_converted_arguments() -> None:
    def add(a: int, b: float = 0.5) -> float:
        """Add."""
        return a + b

    tool = FunctionTool(add)
    assert asyncio.run(tool.call(tool.parse('{"a": "2"}'))) == 2.5

    async def shout(word: str) -> str:
        """Shout a word."""
        return word.upper()

    assert asyncio.run(FunctionTool(shout).call({"word": "hi"})) == "HI"
    assert FunctionTool(explode).schema()["function"]["parameters"]["required"] == ["reason"]
