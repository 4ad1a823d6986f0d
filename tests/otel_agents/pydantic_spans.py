"""A PydanticAI weather agent instrumented with OpenTelemetry (its ``Instrumentation`` capability: GenAI semantic
convention spans), hidden behind a plain function: evalcli's callable adapter sees only the text it returns, so its
tool calls and tokens reach the record only through the spans (docs/otel.md)."""

from __future__ import annotations

import os
import threading
from typing import Any

from pydantic_ai import Agent, ModelRetry
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from examples.weather_agent import FORECASTS


def _agent() -> Agent[Any, str]:
    model = OpenAIChatModel("scripted", provider=OpenAIProvider(base_url=os.environ["OPENAI_BASE_URL"],
                                                                api_key=os.environ["OPENAI_API_KEY"]))
    agent: Agent[Any, str] = Agent(model, instructions="You are a weather assistant.",
                                   capabilities=[Instrumentation()])

    @agent.tool_plain
    def get_weather(city: str, day: str = "today") -> dict[str, Any]:
        found = FORECASTS.get(city.lower())
        if found is None:
            raise ModelRetry(f"no forecast for {city}")
        condition, temperature = found[day]
        return {"city": city, "day": day, "condition": condition, "temperature_f": temperature}

    return agent


AGENT = _agent()


async def ask(input: str) -> str:
    """The app's own entry point: text in, text out (a new agent run per message, no memory)."""
    return (await AGENT.run(input)).output


def ask_sync(input: str) -> str:
    """The same, as a sync function evalcli runs in its worker threads (a new agent each time: one agent's
    ``run_sync`` is bound to the event loop it first ran on)."""
    with _BUILDING:  # PydanticAI does not build agents safely in several threads at once
        agent = _agent()
    return agent.run_sync(input).output


_BUILDING = threading.Lock()
