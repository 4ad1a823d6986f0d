"""A Strands weather agent with Strands' own telemetry on (``StrandsTelemetry()`` sets the tracer provider; its agent,
cycle, ``chat`` and ``execute_tool`` spans speak the GenAI semantic conventions), hidden behind a plain function: no
adapter runs it, evalcli's callable adapter sees only the text it returns, so its tool calls and tokens reach the
record only through the spans (docs/otel.md). Its model is Strands' ``OpenAIModel`` at ``$OPENAI_BASE_URL``."""

from __future__ import annotations

import os
from typing import Any, Literal

from strands import Agent, tool
from strands.models.openai import OpenAIModel
from strands.telemetry import StrandsTelemetry

from examples.frameworks.weather import INSTRUCTIONS, forecast

TELEMETRY = StrandsTelemetry()  # the app's own set-up: a tracer provider (its exporters would be added here)


@tool
def get_weather(city: str, day: Literal["today", "tomorrow"] = "today") -> dict[str, Any]:
    """Get the weather forecast for a city.

    Args:
        city: The city name, e.g. "Brooklyn".
        day: "today" or "tomorrow".
    """
    return forecast(city, day)


def _agent() -> Agent:
    model = OpenAIModel(client_args={"base_url": os.environ["OPENAI_BASE_URL"], "api_key": os.environ["OPENAI_API_KEY"],
                                     "max_retries": 0, "timeout": 120}, model_id="scripted")
    return Agent(model=model, system_prompt=INSTRUCTIONS, tools=[get_weather], callback_handler=None)


async def ask(input: str) -> str:
    """The app's own entry point: text in, text out (a new agent per message: a Strands agent runs one invocation
    at a time)."""
    return str(await _agent().invoke_async(input)).strip()
