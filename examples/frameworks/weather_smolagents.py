"""The demo weather agent written with smolagents: ``evalcli run datasets/frameworks/smolagents.yaml``.

``agent`` is a ``ToolCallingAgent`` whose ``get_weather`` tool raises for an unknown city: smolagents tells the model
the call failed, and evalcli records that result with ``is_error: true``. Each conversation runs on a copy of the
agent with a fresh memory (docs/targets/smolagents.md).
"""

from __future__ import annotations

from smolagents import OpenAIServerModel, ToolCallingAgent, tool

from examples.frameworks.weather import INSTRUCTIONS, api_key, base_url, forecast, model_name


@tool
def get_weather(city: str, day: str = "today") -> dict:  # type: ignore[type-arg]
    """Get the weather forecast for a city.

    Args:
        city: The city name, e.g. "Brooklyn".
        day: "today" or "tomorrow".
    """
    return forecast(city, day)


model = OpenAIServerModel(model_id=model_name(), api_base=base_url(), api_key=api_key())
agent = ToolCallingAgent(tools=[get_weather], model=model, instructions=INSTRUCTIONS)
