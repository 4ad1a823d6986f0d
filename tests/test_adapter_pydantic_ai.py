"""The PydanticAI adapter with a real ``pydantic_ai.Agent`` over real HTTP to the loopback server (no mocks):
tool calls, threads, tool errors, errors mid-run, the output tool and options."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from evalcli.errors import TargetError
from evalcli.targets import recognise
from tests.framework_agents import KEY, adapter_for, calls_of, converse, failed_turn, request_with, results_of, texts_of, weather
from tests.llm_server import LLMServer, scripted_weather, text, tool_call


def model(server: LLMServer) -> OpenAIChatModel:
    return OpenAIChatModel("scripted", provider=OpenAIProvider(base_url=server.url, api_key=KEY))


def weather_agent(server: LLMServer, **kwargs: Any) -> Agent[Any, Any]:
    agent: Agent[Any, Any] = Agent(model(server), instructions="You are a weather assistant.", **kwargs)

    @agent.tool_plain
    def get_weather(city: str, day: str = "today") -> dict[str, Any]:
        try:
            return weather(city, day)
        except LookupError as exc:
            raise ModelRetry(str(exc)) from exc

    return agent


def test_recognised_by_class_and_turn_is_tool_call_result_and_answer(llm_server: LLMServer) -> None:
    llm_server.responder = scripted_weather
    agent = weather_agent(llm_server)
    assert recognise(agent) == "pydantic_ai"
    [[turn]] = converse(adapter_for(agent), ["What is the weather in London?"], multi_turn=False)
    assert [m["role"] for m in turn] == ["assistant", "tool", "assistant"]  # no user prompt, no instructions
    [(call_id, name, arguments)] = calls_of(turn)
    assert name == "get_weather" and arguments == {"city": "London", "day": "today"}
    assert isinstance(turn[0]["tool_calls"][0]["function"]["arguments"], str) and turn[0]["content"] is None
    [result] = results_of(turn)
    assert result["tool_call_id"] == call_id and "is_error" not in result and '"rainy"' in result["content"]
    assert texts_of(turn) == ["Today in London: rainy, 54°F."]


def test_recall_within_a_thread_and_none_across_threads(llm_server: LLMServer) -> None:
    llm_server.responder = scripted_weather
    adapter = adapter_for(weather_agent(llm_server))
    (first, second), [other] = converse(adapter, ["What is the weather in London?", "What about tomorrow?"],
                                        ["What about tomorrow?"])  # a new conversation on the same agent object
    assert calls_of(second)[0][2] == {"city": "London", "day": "tomorrow"}
    assert texts_of(second) == ["Tomorrow in London: cloudy, 57°F."]
    sent = request_with(llm_server, "What about tomorrow?")  # what the model got on turn 2 carries turn 1
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[1]["content"] == "What is the weather in London?" and sent[4]["content"] == texts_of(first)[0]
    assert texts_of(other) == ["Which city do you mean?"] and calls_of(other) == []
    assert adapter.obj.__dict__.get("history") is None  # nothing was kept on the agent


def test_model_retry_is_a_tool_error_and_the_run_goes_on(llm_server: LLMServer) -> None:
    llm_server.responder = scripted_weather
    [[turn]] = converse(adapter_for(weather_agent(llm_server)), ["What is the weather in Atlantis?"])
    [result] = results_of(turn)
    assert result["is_error"] is True and "no forecast for Atlantis" in result["content"]
    assert texts_of(turn) == ["Sorry, I could not get a forecast for Atlantis."]


def test_failed_tool_return_is_a_tool_error(llm_server: LLMServer) -> None:
    from pydantic_ai import ToolFailed

    agent: Agent[Any, Any] = Agent(model(llm_server))

    @agent.tool_plain
    def lookup(key: str) -> str:
        raise ToolFailed(f"{key} is gone")

    llm_server.push(tool_call("lookup", {"key": "k1"}, "c1"), text("It is gone."))
    [[turn]] = converse(adapter_for(agent), ["Look up k1"])
    assert results_of(turn) == [{"role": "tool", "tool_call_id": "c1", "content": "k1 is gone", "name": "lookup",
                                 "is_error": True}]


def test_exception_ends_the_run_and_the_turn_keeps_what_came_before(llm_server: LLMServer) -> None:
    agent: Agent[Any, Any] = Agent(model(llm_server))

    @agent.tool_plain
    def get_weather(city: str) -> str:
        if city == "Boom":
            raise RuntimeError("the weather service is down")
        return "sunny"

    llm_server.push(tool_call("get_weather", {"city": "Paris"}, "c1"), tool_call("get_weather", {"city": "Boom"}, "c2"))
    cause, kept = failed_turn(adapter_for(agent), ["Weather in Paris, then Boom?"])
    assert isinstance(cause, RuntimeError) and str(cause) == "the weather service is down"
    assert [c[0] for c in calls_of(kept)] == ["c1", "c2"] and [r["content"] for r in results_of(kept)] == ["sunny"]
    assert all(m["role"] in ("assistant", "tool") for m in kept)


def test_output_tool_is_bookkeeping_and_the_output_becomes_the_text(llm_server: LLMServer) -> None:
    class Forecast(BaseModel):
        city: str
        temperature_f: int

    agent = weather_agent(llm_server, output_type=Forecast)
    llm_server.push(tool_call("get_weather", {"city": "Paris"}, "c1"),
                    tool_call("final_result", {"city": "Paris", "temperature_f": 68}, "c2"))
    [[turn]] = converse(adapter_for(agent), ["Weather in Paris as JSON"])
    assert [name for _, name, _ in calls_of(turn)] == ["get_weather"]
    assert [r["tool_call_id"] for r in results_of(turn)] == ["c1"]
    assert turn[-1] == {"role": "assistant", "content": '{"city": "Paris", "temperature_f": 68}'}


@dataclass
class Caller:
    name: str


def test_deps_and_model_settings_reach_the_run_call(llm_server: LLMServer) -> None:
    agent: Agent[Caller, str] = Agent(model(llm_server), deps_type=Caller)

    @agent.tool
    def whoami(ctx: RunContext[Caller]) -> str:
        return f"you are {ctx.deps.name}"

    llm_server.push(tool_call("whoami", {}, "c1"), text("done"))
    adapter = adapter_for(agent, deps={"name": "Ada"}, model_settings={"temperature": 0.25})
    [[turn]] = converse(adapter, ["Who am I?"])
    assert results_of(turn)[0]["content"] == "you are Ada"  # the mapping became the agent's deps_type
    assert llm_server.requests[0].body["temperature"] == 0.25


def test_unknown_option_names_what_run_takes(llm_server: LLMServer) -> None:
    with pytest.raises(TargetError) as failed:
        adapter_for(weather_agent(llm_server), context={"x": 1})
    assert "'context' is not an option of PydanticAI's agent.run" in failed.value.message
    assert "deps" in failed.value.message and "model_settings" in failed.value.message
    assert "message_history" not in failed.value.message  # evalcli owns the thread's history
    with pytest.raises(TargetError, match="deps"):
        adapter_for(Agent(model(llm_server), deps_type=Caller), deps={"nom": "Ada"})
