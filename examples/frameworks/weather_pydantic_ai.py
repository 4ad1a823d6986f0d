"""The demo weather agent written with PydanticAI: ``evalcli run datasets/frameworks/pydantic_ai.yaml``.

evalcli recognises ``agent`` as a PydanticAI agent and keeps each conversation's message history itself.
An unknown city makes the tool raise ``ModelRetry``: PydanticAI tells the model the call failed, and
evalcli records that result with ``is_error: true``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic_ai import Agent, ModelRetry
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from examples.frameworks.weather import INSTRUCTIONS, UnknownCity, api_key, base_url, forecast, model_name

model = OpenAIChatModel(model_name(), provider=OpenAIProvider(base_url=base_url(), api_key=api_key()))
agent = Agent(model, instructions=INSTRUCTIONS, name="weather")


@agent.tool_plain
def get_weather(city: str, day: Literal["today", "tomorrow"] = "today") -> dict[str, Any]:
    """Get the weather forecast for a city.

    Args:
        city: The city name, e.g. "Brooklyn".
        day: "today" or "tomorrow".
    """
    try:
        return forecast(city, day)
    except UnknownCity as exc:
        raise ModelRetry(str(exc)) from exc
