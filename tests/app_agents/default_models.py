"""The weather agent with each framework's default model class, named by a string: PydanticAI's ``openai:`` (the
Responses API in v2) and the Agents SDK's default (the Responses API), both reaching ``$OPENAI_BASE_URL``."""

from __future__ import annotations

import json
from typing import Any

from agents import Agent as SdkAgent
from agents import function_tool, set_tracing_disabled
from pydantic_ai import Agent

from examples.frameworks.weather import forecast

set_tracing_disabled(True)


def get_weather(city: str, day: str = "today") -> dict[str, Any]:
    """Get the weather forecast for a city ("today" or "tomorrow")."""
    return forecast(city, day)


@function_tool(name_override="get_weather")
def sdk_weather(city: str, day: str = "today") -> str:
    """Get the weather forecast for a city ("today" or "tomorrow")."""
    return json.dumps(forecast(city, day))


pydantic_agent = Agent("openai:responses-model", tools=[get_weather], instructions="Weather assistant.")
sdk_agent = SdkAgent(name="Weather", model="responses-model", instructions="Weather assistant.", tools=[sdk_weather])
