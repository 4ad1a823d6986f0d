"""The weather agent in each framework for the adapter benchmark, and one conversation played directly with the
framework, the way a user would without evalcli: each framework's own way of keeping a thread.

- PydanticAI: ``agent.run(text, message_history=H)``, H = ``result.all_messages()``;
- the Agents SDK: ``Runner.run(agent, text, session=SQLiteSession(...))``, one session per conversation;
- LangGraph: ``graph.ainvoke({"messages": [...]}, {"configurable": {"thread_id": ...}})`` on a copy of the graph
  with an ``InMemorySaver``, the thread deleted at the end (what the adapter does too).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from examples.frameworks.weather import forecast

KEY = "bench-not-a-key"
Conversation = Callable[[list[str]], Awaitable[list[Any]]]


def get_weather(city: str, day: str = "today") -> str:
    """Get the weather forecast for a city ("today" or "tomorrow")."""
    return json.dumps(forecast(city, day))


def build(framework: str, api_base: str) -> Any:
    """The framework's agent object, its model the benchmark's server (Chat Completions)."""
    if framework == "pydantic_ai":
        from pydantic_ai import Agent
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        model = OpenAIChatModel("bench", provider=OpenAIProvider(base_url=api_base, api_key=KEY))
        return Agent(model, instructions="Weather assistant.", tools=[get_weather])
    if framework == "openai_agents":
        from agents import Agent, OpenAIChatCompletionsModel, function_tool, set_tracing_disabled
        from openai import AsyncOpenAI

        set_tracing_disabled(True)
        model = OpenAIChatCompletionsModel(model="bench", openai_client=AsyncOpenAI(base_url=api_base, api_key=KEY))
        return Agent(name="weather", instructions="Weather assistant.", model=model, tools=[function_tool(get_weather)])
    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(model="bench", base_url=api_base, api_key=KEY, use_responses_api=False)  # type: ignore[arg-type]
    return create_agent(chat, tools=[tool(get_weather)], system_prompt="Weather assistant.")


def direct(framework: str, agent: Any) -> Conversation:
    """One conversation with the framework itself: the outputs of each turn."""
    if framework == "pydantic_ai":
        async def pydantic_ai(turns: list[str]) -> list[Any]:
            history: list[Any] = []
            out = []
            for text in turns:
                result = await agent.run(text, message_history=history)
                history = result.all_messages()
                out.append(result.new_messages())
            return out

        return pydantic_ai
    if framework == "openai_agents":
        from agents import Runner, SQLiteSession

        async def openai_agents(turns: list[str]) -> list[Any]:
            session = SQLiteSession(str(uuid.uuid4()))
            try:
                return [(await Runner.run(agent, text, session=session)).new_items for text in turns]
            finally:
                session.close()

        return openai_agents
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    graph = agent.copy(update={"checkpointer": saver})

    async def langgraph(turns: list[str]) -> list[Any]:
        thread = str(uuid.uuid4())
        config = {"configurable": {"thread_id": thread, "user_id": thread}}
        try:
            return [await graph.ainvoke({"messages": [HumanMessage(text)]}, config) for text in turns]
        finally:
            await saver.adelete_thread(thread)

    return langgraph
