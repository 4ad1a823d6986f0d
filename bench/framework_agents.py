"""The weather agent in each framework for the adapter benchmark, and one conversation played directly with the
framework, the way a user would without evalcli: each framework's own way of keeping a thread, and a fresh
per-conversation object (PydanticAI ``deps``, the Agents SDK's typed ``context``, LangGraph's ``context``) as the
app would make it, which evalcli gets from a setup (``setup``, a pytest-style generator).

- PydanticAI: ``agent.run(text, message_history=H, deps=D)``, H = ``result.all_messages()``;
- the Agents SDK: ``Runner.run(agent, text, session=SQLiteSession(...), context=C)``, one session per
  conversation, each later turn to ``result.last_agent`` (what ``continue_with: last_agent`` does);
- LangGraph: ``graph.ainvoke({"messages": [...]}, {"configurable": {"thread_id": ...}}, context=C)`` on a copy of
  the graph with an ``InMemorySaver``, the thread deleted at the end (what the adapter does too);
- LlamaIndex (in its own venv, docs/development.md): a ``FunctionAgent`` (``streaming=False``: the benchmark's
  server answers JSON), ``await agent.run(user_msg=text, ctx=Context(agent))``, one ``Context`` (and memory) per
  conversation (it has no per-conversation object).
- Google ADK: ``runner.run_async(user_id=..., session_id=..., new_message=...)`` on one ``Runner`` with an
  ``InMemorySessionService``, one session per conversation (its ``state`` the per-conversation object), deleted at
  the end;
- Strands: a new ``Agent`` per conversation (the same model and tools), ``invoke_async(text, invocation_state=...)``
  per turn, as an app that serves many users makes one agent per session.
- smolagents: a ``ToolCallingAgent`` serves one conversation at a time (its memory is the conversation): the first
  turn ``agent.run(text, reset=True)``, the others ``reset=False``, in a worker thread (``run`` is synchronous: a
  pool as large as the conversations in flight); idle agents are reused, so as many are built as conversations are
  in flight; its console output off, as the adapter turns it off (it has no per-conversation object).
- CrewAI (in its own venv, docs/development.md): one ``Agent``, each conversation its own message list,
  ``agent.kickoff(history + [user message])`` per turn in a worker thread (``kickoff`` is synchronous), the
  messages the executor added kept for the next turn.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from examples.frameworks.weather import forecast

KEY = "bench-not-a-key"
Conversation = Callable[[list[str]], Awaitable[list[Any]]]


@dataclass
class Traveller:
    """The per-conversation object every framework's agent is given (deps, context)."""

    name: str
    asked: list[str] = field(default_factory=list)


def setup(info: Any) -> Iterator[dict[str, Any]]:
    """evalcli's per-conversation setup for the benchmark: a fresh ``Traveller`` under the framework's option name."""
    traveller = Traveller(str(info.item_id))
    framework = FRAMEWORK[0]
    if framework not in OPTION:
        yield {}
        return
    yield {OPTION[framework]: {"traveller": traveller.name} if framework in WRAPPED else traveller}
    traveller.asked.clear()


WRAPPED = ("google_adk", "strands")
"""The frameworks whose per-conversation option is a mapping (ADK's session state, Strands' invocation state)."""


OPTION = {"pydantic_ai": "deps", "openai_agents": "context", "langgraph": "context", "google_adk": "state",
          "strands": "invocation_state"}
FRAMEWORK = ["pydantic_ai"]
"""The framework being measured (``setup`` names its option after it)."""
API_BASE = [""]
"""The benchmark server's base URL (the direct Strands way builds an agent per conversation)."""


def get_weather(city: str, day: str = "today") -> str:
    """Get the weather forecast for a city ("today" or "tomorrow")."""
    return json.dumps(forecast(city, day))


_hints = {"city": str, "day": str, "return": str}


def build(framework: str, api_base: str) -> Any:
    """The framework's agent object, its model the benchmark's server (Chat Completions), taking a ``Traveller``."""
    FRAMEWORK[0] = framework
    API_BASE[0] = api_base
    if framework == "pydantic_ai":
        from pydantic_ai import Agent, RunContext
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        model = OpenAIChatModel("bench", provider=OpenAIProvider(base_url=api_base, api_key=KEY))
        agent = Agent(model, instructions="Weather assistant.", deps_type=Traveller)

        def weather(ctx: Any, city: str, day: str = "today") -> str:
            """Get the weather forecast for a city ("today" or "tomorrow")."""
            ctx.deps.asked.append(city)
            return get_weather(city, day)

        weather.__annotations__ = {**_hints, "ctx": RunContext[Traveller]}  # resolvable: the framework is imported here
        agent.tool(name="get_weather")(weather)
        return agent
    if framework == "openai_agents":
        from agents import Agent, OpenAIChatCompletionsModel, RunContextWrapper, function_tool, set_tracing_disabled
        from openai import AsyncOpenAI

        set_tracing_disabled(True)
        model = OpenAIChatCompletionsModel(model="bench", openai_client=AsyncOpenAI(base_url=api_base, api_key=KEY))

        def sdk_weather(ctx: Any, city: str, day: str = "today") -> str:
            """Get the weather forecast for a city ("today" or "tomorrow")."""
            ctx.context.asked.append(city)
            return get_weather(city, day)

        sdk_weather.__annotations__ = {**_hints, "ctx": RunContextWrapper[Traveller]}
        tool = function_tool(sdk_weather, name_override="get_weather")
        return Agent[Traveller](name="weather", instructions="Weather assistant.", model=model, tools=[tool])
    if framework == "llama_index":
        from llama_index.core.agent.workflow import FunctionAgent
        from llama_index.llms.openai_like import OpenAILike

        llm = OpenAILike(model="bench", api_base=api_base, api_key=KEY, is_chat_model=True,
                         is_function_calling_model=True)
        return FunctionAgent(tools=[get_weather], llm=llm, system_prompt="Weather assistant.", streaming=False)
    if framework == "google_adk":
        from google.adk.agents import Agent as AdkAgent
        from google.adk.models.lite_llm import LiteLlm

        def adk_weather(city: str, day: str = "today") -> dict[str, Any]:
            """Get the weather forecast for a city ("today" or "tomorrow")."""
            return forecast(city, day)  # a mapping: ADK sends the model a function's other returns wrapped

        adk_weather.__name__ = "get_weather"
        return AdkAgent(name="weather", model=LiteLlm(model="openai/bench", api_base=api_base, api_key=KEY),
                        instruction="Weather assistant.", tools=[adk_weather])
    if framework == "strands":
        return strands_agent(api_base)
    if framework == "smolagents":
        return smolagents_agent(api_base)
    if framework == "crewai":
        return crewai_agent(api_base)
    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(model="bench", base_url=api_base, api_key=KEY, use_responses_api=False)  # type: ignore[arg-type]
    return create_agent(chat, tools=[tool(get_weather)], system_prompt="Weather assistant.", context_schema=Traveller)


def direct(framework: str, agent: Any) -> Conversation:
    """One conversation with the framework itself: the outputs of each turn."""
    if framework == "pydantic_ai":
        async def pydantic_ai(turns: list[str]) -> list[Any]:
            history: list[Any] = []
            deps = Traveller("direct")
            out = []
            for text in turns:
                result = await agent.run(text, message_history=history, deps=deps)
                history = result.all_messages()
                out.append(result.new_messages())
            return out

        return pydantic_ai
    if framework == "openai_agents":
        from agents import Runner, SQLiteSession

        async def openai_agents(turns: list[str]) -> list[Any]:
            session = SQLiteSession(str(uuid.uuid4()))
            context = Traveller("direct")
            current, out = agent, []
            try:
                for text in turns:
                    result = await Runner.run(current, text, session=session, context=context)
                    current = result.last_agent
                    out.append(result.new_items)
                return out
            finally:
                session.close()

        return openai_agents
    if framework == "llama_index":
        from llama_index.core.memory import ChatMemoryBuffer
        from workflows import Context

        async def llama_index(turns: list[str]) -> list[Any]:
            context = Context(agent)  # and its memory, which a Context under pydantic 2.14 drops between runs
            memory = ChatMemoryBuffer.from_defaults(llm=agent.llm)
            return [await agent.run(user_msg=text, ctx=context, memory=memory) for text in turns]

        return llama_index
    if framework == "google_adk":
        return adk_direct(agent)
    if framework == "strands":
        async def strands(turns: list[str]) -> list[Any]:
            own = strands_agent(API_BASE[0])  # a new agent per conversation, as apps make one
            state = {"traveller": "direct"}
            return [str(await own.invoke_async(text, invocation_state=state)) for text in turns]

        return strands
    if framework == "smolagents":
        return smolagents_direct()
    if framework == "crewai":
        return crewai_direct(agent)
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    graph = agent.copy(update={"checkpointer": saver})

    async def langgraph(turns: list[str]) -> list[Any]:
        thread = str(uuid.uuid4())
        config = {"configurable": {"thread_id": thread, "user_id": thread}}
        context = Traveller("direct")
        try:
            return [await graph.ainvoke({"messages": [HumanMessage(text)]}, config, context=context) for text in turns]
        finally:
            await saver.adelete_thread(thread)

    return langgraph


def strands_agent(api_base: str) -> Any:
    """The Strands weather agent, its model Strands' ``OpenAIModel`` at the benchmark's server."""
    from strands import Agent as StrandsAgent
    from strands import tool as strands_tool
    from strands.models.openai import OpenAIModel

    model = OpenAIModel(client_args={"base_url": api_base, "api_key": KEY}, model_id="bench")
    return StrandsAgent(model=model, system_prompt="Weather assistant.", tools=[strands_tool(get_weather)],
                        callback_handler=None)


def adk_direct(agent: Any) -> Conversation:
    """ADK's own way: one runner, one session per conversation."""
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService
    from google.genai import types

    sessions = InMemorySessionService()
    runner = Runner(app_name="bench", agent=agent, session_service=sessions)

    async def google_adk(turns: list[str]) -> list[Any]:
        session = str(uuid.uuid4())
        await sessions.create_session(app_name="bench", user_id=session, session_id=session,
                                      state={"traveller": "direct"})
        out = []
        try:
            for text in turns:
                message = types.Content(role="user", parts=[types.Part(text=text)])
                out.append([event.model_dump(mode="json", exclude_none=True) async for event in runner.run_async(
                    user_id=session, session_id=session, new_message=message)])
            return out
        finally:
            await sessions.delete_session(app_name="bench", user_id=session, session_id=session)

    return google_adk


def crewai_agent(api_base: str) -> Any:
    """The CrewAI weather agent, its ``LLM`` at the benchmark's server."""
    from crewai import LLM
    from crewai import Agent as CrewAgent
    from crewai.tools import tool as crewai_tool

    return CrewAgent(role="Weather assistant", goal="Answer questions about the weather.", backstory="Weather assistant.",
                     tools=[crewai_tool("get_weather")(get_weather)],
                     llm=LLM(model="openai/bench", base_url=api_base, api_key=KEY, max_retries=0))


def crewai_direct(agent: Any) -> Conversation:
    """CrewAI's own way: the conversation's messages kept by the app, ``kickoff(messages)`` in a worker thread."""
    import asyncio

    from crewai.events.utils.console_formatter import set_suppress_console_output

    def kickoff(messages: list[Any]) -> Any:
        set_suppress_console_output(True)  # as evalcli does: CrewAI's panels cost time and fill the terminal
        return agent.kickoff(messages)

    async def crewai(turns: list[str]) -> list[Any]:
        history: list[Any] = []
        out = []
        for text in turns:
            sent = [*history, {"role": "user", "content": text}]
            result = await asyncio.to_thread(kickoff, sent)
            history = [*sent, *result.messages[1 + len(sent):]]
            out.append(result.raw)
        return out

    return crewai


def smolagents_agent(api_base: str) -> Any:
    """The smolagents weather agent (a ``ToolCallingAgent``), its model ``OpenAIServerModel`` at the benchmark's
    server, its console output off."""
    from smolagents import LogLevel, OpenAIServerModel, ToolCallingAgent, tool

    def get_weather(city: str, day: str = "today") -> str:
        """Get the weather forecast for a city.

        Args:
            city: The city name, e.g. "Brooklyn".
            day: "today" or "tomorrow".
        """
        return json.dumps(forecast(city, day))

    model = OpenAIServerModel(model_id="bench", api_base=api_base, api_key=KEY)
    return ToolCallingAgent(tools=[tool(get_weather)], model=model, instructions="Weather assistant.",
                            verbosity_level=LogLevel.OFF)


def smolagents_direct() -> Conversation:
    """smolagents' own way: an agent serves one conversation at a time, its first turn ``run(text, reset=True)`` (a
    fresh memory), the others ``reset=False``, each in a worker thread; idle agents are reused (as many are built as
    conversations are in flight: built once, in the warm-up)."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=256, thread_name_prefix="direct")  # threads start as conversations need
    idle: list[Any] = []

    async def smolagents(turns: list[str]) -> list[Any]:
        own = idle.pop() if idle else smolagents_agent(API_BASE[0])
        loop = asyncio.get_running_loop()
        try:
            return [await loop.run_in_executor(pool, lambda t=text, first=i == 0: own.run(t, reset=first))
                    for i, text in enumerate(turns)]
        finally:
            idle.append(own)

    return smolagents


def smolagents_message(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The benchmark model's next message for a smolagents ``ToolCallingAgent``, which sends a tool's result back as a
    user message (``Observation:`` and the result) and each turn's task as ``New task:``, and ends a turn with its
    ``final_answer`` tool: the forecast for the city the task names (else the one an earlier task named), then the
    answer from the observed forecast."""
    from examples.frameworks.scripted_rules import call, city_in, day_of, text_of, weather_call

    said = "\n".join(text_of(m) for m in messages if m.get("role") == "user")  # smolagents merges them too
    tasks = [part.split("Observation:")[0].strip() for part in said.split("New task:")[1:]] or [""]
    observed = said.rsplit("New task:", 1)[-1].split("Observation:")[1:]
    if observed:
        found = json.loads(observed[-1])
        answer = f"{found['day'].title()} in {found['city']}: {found['condition']}, {found['temperature_f']}°F."
        return call("final_answer", {"answer": answer}, f"call_{len(messages)}_final")
    return weather_call(messages, city_in(tasks[-1], tasks[:-1]) or "Brooklyn", day_of(tasks[-1]))
