"""The LangGraph adapter with real compiled graphs (``create_agent``, ``create_react_agent``, a hand-built
``StateGraph``) and ``ChatOpenAI`` over real HTTP to the loopback server (no mocks): threads in a checkpointer,
new messages by id, tool errors, errors mid-run, options and the user's own checkpointer."""

from __future__ import annotations

import asyncio
import warnings
from dataclasses import dataclass
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import RemoveMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import ToolException, tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

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
from tests.llm_server import LLMServer, scripted_weather, text, tool_call


def chat(server: LLMServer) -> ChatOpenAI:
    return ChatOpenAI(model="scripted", base_url=server.url, api_key=KEY, use_responses_api=False,  # type: ignore[arg-type]
                      max_retries=0)


@tool
def get_weather(city: str, day: str = "today") -> dict[str, Any]:
    """The forecast for a city."""
    try:
        return weather(city, day)
    except LookupError as exc:
        raise ToolException(str(exc)) from exc


get_weather.handle_tool_error = True


@tool
def where_am_i(config: RunnableConfig) -> str:
    """The thread and user this call runs for."""
    configurable = config["configurable"]
    return f"thread={configurable['thread_id']} user={configurable['user_id']}"


@tool
def crash(city: str) -> str:
    """A tool whose exception ends the run (no error handling)."""
    raise RuntimeError("the crash service is down")


def weather_graph(server: LLMServer, **kwargs: Any) -> Any:
    return create_agent(chat(server), tools=[get_weather, where_am_i, crash], system_prompt="Be a weather assistant.",
                        **kwargs)


def test_create_agent_turn_is_tool_call_result_and_answer(llm_server: LLMServer) -> None:
    llm_server.responder = scripted_weather
    graph = weather_graph(llm_server)
    assert recognise(graph) == "langgraph"
    [[turn]] = converse(adapter_for(graph), ["What is the weather in London?"], multi_turn=False)
    assert [m["role"] for m in turn] == ["assistant", "tool", "assistant"]  # no user message, no system prompt
    [(call_id, name, arguments)] = calls_of(turn)
    assert name == "get_weather" and arguments == {"city": "London", "day": "today"} and turn[0]["content"] is None
    [result] = results_of(turn)
    assert result["tool_call_id"] == call_id and "is_error" not in result and '"rainy"' in result["content"]
    assert texts_of(turn) == ["Today in London: rainy, 54°F."]


def test_create_react_agent_graph_is_taken_too(llm_server: LLMServer) -> None:
    from langgraph.prebuilt import create_react_agent

    llm_server.responder = scripted_weather
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated in favour of langchain.agents.create_agent, still in use
        graph = create_react_agent(chat(llm_server), tools=[get_weather])
    assert recognise(graph) == "langgraph"
    [[first, second]] = converse(adapter_for(graph), ["What is the weather in Paris?", "What about tomorrow?"])
    assert texts_of(first) == ["Today in Paris: sunny, 68°F."] and texts_of(second) == ["Tomorrow in Paris: sunny, 70°F."]


def test_recall_within_a_thread_and_none_across_threads(llm_server: LLMServer) -> None:
    llm_server.responder = scripted_weather
    graph = weather_graph(llm_server)
    adapter = adapter_for(graph)
    (first, second), [other] = converse(adapter, ["What is the weather in London?", "What about tomorrow?"],
                                        ["What about tomorrow?"])
    assert calls_of(second)[0][2] == {"city": "London", "day": "tomorrow"}
    assert texts_of(second) == ["Tomorrow in London: cloudy, 57°F."]
    sent = request_with(llm_server, "What about tomorrow?")
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[1]["content"] == "What is the weather in London?" and sent[4]["content"] == texts_of(first)[0]
    assert texts_of(other) == ["Which city do you mean?"]
    assert graph.checkpointer is None  # the user's graph was not touched: evalcli ran a copy
    assert not adapter.saver.storage  # type: ignore[attr-defined]  # each thread was deleted when its conversation closed


def test_thread_and_resource_reach_the_config(llm_server: LLMServer) -> None:
    llm_server.push(tool_call("where_am_i", {}, "c1"), text("here"), tool_call("where_am_i", {}, "c2"), text("here"))

    async def play() -> tuple[str | None, list[Any], list[Any]]:
        from evalcli.targets.calls import TargetCalls, TargetThreads

        adapter = adapter_for(weather_graph(llm_server), memory={"resource": "user-42"})
        session = adapter.open(multi_turn=True, calls=TargetCalls(TargetThreads()))
        turn = (await session.send("Where am I?")).messages
        await session.close()
        unpinned = await aconverse(adapter_for(weather_graph(llm_server)), ["Where am I?"])
        return session.thread_id, turn, unpinned[0]

    thread, pinned, unpinned = asyncio.run(play())
    assert results_of(pinned)[0]["content"] == f"thread={thread} user=user-42"
    thread_of_other = results_of(unpinned)[0]["content"].split()[0].removeprefix("thread=")
    assert results_of(unpinned)[0]["content"] == f"thread={thread_of_other} user={thread_of_other}"


def test_tool_message_with_status_error_is_a_tool_error(llm_server: LLMServer) -> None:
    llm_server.responder = scripted_weather
    [[turn]] = converse(adapter_for(weather_graph(llm_server)), ["What is the weather in Atlantis?"])
    [result] = results_of(turn)
    assert result["is_error"] is True and "no forecast for Atlantis" in result["content"]
    assert texts_of(turn) == ["Sorry, I could not get a forecast for Atlantis."]


def test_exception_ends_the_run_and_the_turn_keeps_the_checkpointed_messages(llm_server: LLMServer) -> None:
    llm_server.push(tool_call("get_weather", {"city": "Paris"}, "c1"), tool_call("crash", {"city": "x"}, "c2"))
    cause, kept = failed_turn(adapter_for(weather_graph(llm_server)), ["Paris, then crash"])
    assert isinstance(cause, RuntimeError) and str(cause) == "the crash service is down"
    assert [c[0] for c in calls_of(kept)] == ["c1", "c2"] and [r["tool_call_id"] for r in results_of(kept)] == ["c1"]


def test_new_messages_are_found_by_id_even_when_the_graph_trims_its_history(llm_server: LLMServer) -> None:
    """A graph that removes every earlier message: a slice by length would return nothing on turn 2."""
    model = chat(llm_server)

    async def reply(state: MessagesState) -> dict[str, Any]:
        answer = await model.ainvoke(state["messages"][-1:])
        return {"messages": [*(RemoveMessage(id=m.id) for m in state["messages"][:-1] if m.id), answer]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    llm_server.push(text("one"), text("two"), text("three"))
    [turns] = converse(adapter_for(builder.compile()), ["1", "2", "3"])
    assert [texts_of(t) for t in turns] == [["one"], ["two"], ["three"]]


@dataclass
class Caller:
    name: str


def test_context_and_config_reach_the_run_call(llm_server: LLMServer) -> None:
    @tool
    def whoami(runtime: ToolRuntime[Caller]) -> str:
        """Who is asking."""
        return f"you are {runtime.context.name}"

    graph = create_agent(chat(llm_server), tools=[whoami], context_schema=Caller)
    llm_server.push(tool_call("whoami", {}, "c1"), text("done"), tool_call("whoami", {}, "c2"), text("never"))

    async def both() -> tuple[list[list[Message]], tuple[BaseException, list[Message]]]:
        return (await aconverse(adapter_for(graph, context={"name": "Ada"}), ["Who am I?"]),
                await afailed_turn(adapter_for(graph, context={"name": "Ada"}, config={"recursion_limit": 1}),
                                   ["Who am I?"]))

    [turn], (cause, _) = asyncio.run(both())
    assert results_of(turn)[0]["content"] == "you are Ada"
    assert type(cause).__name__ == "GraphRecursionError"  # the config's recursion_limit reached the run


def test_unknown_option_names_what_ainvoke_takes(llm_server: LLMServer) -> None:
    with pytest.raises(TargetError) as failed:
        adapter_for(weather_graph(llm_server), deps={"x": 1}, keep_checkpointer="yes")
    message = failed.value.message
    assert "'deps' is not an option of LangGraph's graph.ainvoke" in message and "'keep_checkpointer' is true or false" in message
    assert "context" in message and "config" in message and "stream_mode" not in message


class RecordingSaver(InMemorySaver):
    """Stands for a user's persistent checkpointer: every thread written to it stays."""


def test_own_checkpointer_is_not_written_unless_kept(llm_server: LLMServer) -> None:
    llm_server.responder = scripted_weather
    saver = RecordingSaver()
    graph = weather_graph(llm_server, checkpointer=saver)
    kept_adapter = adapter_for(graph, keep_checkpointer=True)

    async def both() -> tuple[list[list[Message]], bool]:
        replaced = await aconverse(adapter_for(graph), ["What is the weather in London?", "What about tomorrow?"])
        written_before = bool(saver.storage)
        await aconverse(kept_adapter, ["What is the weather in Paris?"])
        return replaced, written_before

    (_, second), written_before = asyncio.run(both())
    assert texts_of(second) == ["Tomorrow in London: cloudy, 57°F."]  # memory came from evalcli's in-memory saver
    assert not written_before
    assert kept_adapter.graph is graph and len(saver.storage) == 1  # written, and kept after the conversation
