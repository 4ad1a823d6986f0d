"""The OpenAI Agents SDK adapter with a real ``agents.Agent`` over real HTTP (Chat Completions) to the loopback
server (no mocks): tool calls, one session per thread, tool errors, errors mid-run and options.

The SDK's package is named ``agents``, like the test agents module that other tests import in-process
(``tests/conftest.py``): it is imported only while this module's tests run, and taken out of ``sys.modules`` after.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from evalcli.errors import TargetError
from evalcli.messages import Message
from evalcli.targets import recognise
from tests.framework_agents import (
    KEY,
    aconverse,
    adapter_for,
    afailed_turn,
    calls_of,
    converse,
    failed_turn,
    request_with,
    results_of,
    texts_of,
    weather,
)
from tests.llm_server import LLMServer, scripted_weather, status, text, tool_call, tool_calls


def _sdk_modules() -> dict[str, Any]:
    return {n: m for n, m in sys.modules.items() if n == "agents" or n.startswith("agents.")}


@pytest.fixture(scope="module", autouse=True)
def sdk() -> Iterator[None]:
    before = _sdk_modules()
    yield
    for name in _sdk_modules():
        del sys.modules[name]
    sys.modules.update(before)


def model(server: LLMServer) -> Any:
    from agents import OpenAIChatCompletionsModel
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=server.url, api_key=KEY, max_retries=0)
    return OpenAIChatCompletionsModel(model="scripted", openai_client=client)


def get_weather(city: str, day: str = "today") -> str:
    """The forecast for a city."""
    return json.dumps(weather(city, day))


def fragile(city: str) -> str:
    """A tool whose exception ends the run."""
    raise RuntimeError("the fragile service is down")


def weather_agent(server: LLMServer, **kwargs: Any) -> Any:
    from agents import Agent, function_tool

    return Agent(name="weather", instructions="You are a weather assistant.", model=model(server),
                 tools=[function_tool(get_weather), function_tool(fragile, failure_error_function=None)], **kwargs)


def test_recognised_by_class_and_turn_is_tool_call_result_and_answer(llm_server: LLMServer) -> None:
    llm_server.responder = scripted_weather
    agent = weather_agent(llm_server)
    assert recognise(agent) == "openai_agents"
    [[turn]] = converse(adapter_for(agent), ["What is the weather in London?"], multi_turn=False)
    assert [m["role"] for m in turn] == ["assistant", "tool", "assistant"]
    [(call_id, name, arguments)] = calls_of(turn)
    assert name == "get_weather" and arguments == {"city": "London", "day": "today"}
    [result] = results_of(turn)
    assert result["tool_call_id"] == call_id and "is_error" not in result
    assert json.loads(result["content"])["condition"] == "rainy"
    assert texts_of(turn) == ["Today in London: rainy, 54°F."]


def test_parallel_calls_join_one_assistant_message(llm_server: LLMServer) -> None:
    llm_server.push(tool_calls([("get_weather", {"city": "Paris"}, "c1"), ("get_weather", {"city": "Tokyo"}, "c2")]),
                    text("Both sunny-ish."))
    [[turn]] = converse(adapter_for(weather_agent(llm_server)), ["Paris and Tokyo?"])
    assert [m["role"] for m in turn] == ["assistant", "tool", "tool", "assistant"]
    assert [c[0] for c in calls_of(turn)] == ["c1", "c2"]
    assert [r["tool_call_id"] for r in results_of(turn)] == ["c1", "c2"]


def test_recall_within_a_thread_and_none_across_threads(llm_server: LLMServer) -> None:
    llm_server.responder = scripted_weather
    adapter = adapter_for(weather_agent(llm_server))
    (first, second), [other] = converse(adapter, ["What is the weather in London?", "What about tomorrow?"],
                                        ["What about tomorrow?"])
    assert calls_of(second)[0][2] == {"city": "London", "day": "tomorrow"}
    assert texts_of(second) == ["Tomorrow in London: cloudy, 57°F."]
    sent = request_with(llm_server, "What about tomorrow?")
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[1]["content"] == "What is the weather in London?" and sent[4]["content"] == texts_of(first)[0]
    assert texts_of(other) == ["Which city do you mean?"]


def test_default_failure_handler_output_is_a_tool_error(llm_server: LLMServer) -> None:
    llm_server.responder = scripted_weather
    [[turn]] = converse(adapter_for(weather_agent(llm_server)), ["What is the weather in Atlantis?"])
    [result] = results_of(turn)
    assert result["is_error"] is True and result["content"].startswith("An error occurred while running the tool")
    assert texts_of(turn) == ["Sorry, I could not get a forecast for Atlantis."]


def test_a_tool_returning_the_same_words_is_told_apart_by_the_formatter(llm_server: LLMServer) -> None:
    """The formatter records which calls failed, and the user's own formatter still writes the text."""
    from agents import RunConfig

    seen: list[str] = []

    def theirs(args: Any) -> str:
        seen.append(args.call_id)
        return f"tool {args.tool_name} failed"

    llm_server.push(tool_calls([("get_weather", {"city": "Paris"}, "c1"), ("get_weather", {"city": "Nowhere"}, "c2")]),
                    text("ok"))
    adapter = adapter_for(weather_agent(llm_server), run_config=RunConfig(tool_error_formatter=theirs))
    [[turn]] = converse(adapter, ["Paris and Nowhere?"])
    first, second = results_of(turn)
    assert "is_error" not in first and second == {"role": "tool", "tool_call_id": "c2",
                                                  "content": "tool get_weather failed", "is_error": True}
    assert seen == ["c2"]


def test_exception_ends_the_run_and_the_turn_keeps_what_the_session_saved(llm_server: LLMServer) -> None:
    llm_server.push(tool_call("get_weather", {"city": "Paris"}, "c1"), tool_call("fragile", {"city": "x"}, "c2"))
    cause, kept = failed_turn(adapter_for(weather_agent(llm_server)), ["Paris, then the fragile one"])
    assert "the fragile service is down" in str(cause)
    # the call of the tool that raised was made (the tool ran): it is kept, with no result (docs/targets/frameworks.md)
    assert [c[0] for c in calls_of(kept)] == ["c1", "c2"] and [r["tool_call_id"] for r in results_of(kept)] == ["c1"]


def test_provider_error_mid_run_keeps_the_earlier_steps(llm_server: LLMServer) -> None:
    llm_server.responder = scripted_weather
    adapter = adapter_for(weather_agent(llm_server))
    llm_server.push(text("Hello!"), tool_call("get_weather", {"city": "Paris"}, "c1"), status(500))
    cause, kept = failed_turn(adapter, ["Hi", "Weather in Paris?"])
    assert "500" in str(cause)
    assert [m["role"] for m in kept] == ["assistant", "tool"] and calls_of(kept)[0][0] == "c1"  # not turn 1's "Hello!"


def test_context_and_max_turns_reach_the_run_call(llm_server: LLMServer) -> None:
    from agents import Agent, RunContextWrapper, function_tool
    from agents.exceptions import MaxTurnsExceeded

    def whoami(ctx: Any) -> str:
        """Who is asking."""
        return f"you are {ctx.context['name']}"

    whoami.__annotations__ = {"ctx": RunContextWrapper[Any], "return": str}  # the SDK passes the run's context
    agent = Agent(name="w", model=model(llm_server), tools=[function_tool(whoami)])
    llm_server.push(tool_call("whoami", {}, "c1"), text("done"), tool_call("whoami", {}, "c2"), text("never reached"))

    async def both() -> tuple[list[list[Message]], tuple[BaseException, list[Message]]]:
        return (await aconverse(adapter_for(agent, context={"name": "Ada"}), ["Who am I?"]),
                await afailed_turn(adapter_for(agent, context={"name": "Ada"}, max_turns=1), ["Who am I?"]))

    [turn], (cause, kept) = asyncio.run(both())
    assert results_of(turn)[0]["content"] == "you are Ada"
    assert isinstance(cause, MaxTurnsExceeded) and calls_of(kept)[0][0] == "c2"


def test_unknown_option_names_what_runner_run_takes(llm_server: LLMServer) -> None:
    with pytest.raises(TargetError) as failed:
        adapter_for(weather_agent(llm_server), deps={"x": 1})
    message = failed.value.message
    assert "'deps' is not an option of the Agents SDK's Runner.run" in message
    assert "context" in message and "max_turns" in message and "session" not in message


def test_run_config_as_a_mapping_reaches_the_model(llm_server: LLMServer) -> None:
    llm_server.push(text("Hello."))
    adapter = adapter_for(weather_agent(llm_server), run_config={"model_settings": {"temperature": 0.25}})
    [[turn]] = converse(adapter, ["Hi"])
    assert texts_of(turn) == ["Hello."] and llm_server.requests[0].body["temperature"] == 0.25
    with pytest.raises(TargetError, match=r"run_config: .*model_setings"):
        adapter_for(weather_agent(llm_server), run_config={"model_setings": {}})
