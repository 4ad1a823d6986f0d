"""The demo weather agent written with the OpenAI Agents SDK: ``evalcli run datasets/frameworks/openai_agents.yaml``.

evalcli recognises ``agent`` as an Agents SDK agent and gives each conversation its own session. An
unknown city makes the tool raise: the SDK's default failure handler tells the model the call failed,
and evalcli records that result with ``is_error: true``.
"""

from __future__ import annotations

import json
import os
from typing import Literal

from agents import Agent, OpenAIChatCompletionsModel, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

from examples.frameworks.weather import INSTRUCTIONS, api_key, base_url, forecast, model_name

# the SDK exports traces to OpenAI by default; an eval run sends none unless asked to
set_tracing_disabled(os.environ.get("EVALCLI_AGENT_TRACING") != "1")


@function_tool
def get_weather(city: str, day: Literal["today", "tomorrow"] = "today") -> str:
    """Get the weather forecast for a city.

    Args:
        city: The city name, e.g. "Brooklyn".
        day: "today" or "tomorrow".
    """
    return json.dumps(forecast(city, day))


model = OpenAIChatCompletionsModel(model=model_name(), openai_client=AsyncOpenAI(base_url=base_url(), api_key=api_key()))
agent = Agent(name="weather", instructions=INSTRUCTIONS, model=model, tools=[get_weather])
