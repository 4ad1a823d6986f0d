"""The demo weather agent written with Strands Agents, as its quick-start writes one (an ``Agent`` with ``@tool``
functions): ``evalcli run datasets/frameworks/strands.yaml``.

evalcli recognises ``agent`` as a Strands agent and runs each conversation on its own copy (the model and tools
kept, fresh messages and state). The model is Strands' ``OpenAIModel`` pointed at any OpenAI-compatible endpoint
(Strands' default is a Bedrock model, which needs AWS). An unknown city makes the tool raise: Strands tells the model
the call failed (a ``toolResult`` with ``status: error``), which evalcli records with ``is_error: true``.
"""

from __future__ import annotations

from typing import Any, Literal

from strands import Agent, tool
from strands.models.openai import OpenAIModel

from examples.frameworks.weather import INSTRUCTIONS, api_key, base_url, forecast, model_name


@tool
def get_weather(city: str, day: Literal["today", "tomorrow"] = "today") -> dict[str, Any]:
    """Get the weather forecast for a city.

    Args:
        city: The city name, e.g. "Brooklyn".
        day: "today" or "tomorrow".
    """
    return forecast(city, day)


model = OpenAIModel(client_args={"base_url": base_url(), "api_key": api_key()}, model_id=model_name())
agent = Agent(model=model, system_prompt=INSTRUCTIONS, tools=[get_weather], callback_handler=None)
