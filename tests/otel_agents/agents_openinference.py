"""An OpenAI Agents SDK weather agent hidden behind a plain function, seen only through OpenInference spans: the
dataset's ``instrument: [openinference]`` has evalcli call the installed ``OpenAIAgentsInstrumentor`` (docs/otel.md)."""

from __future__ import annotations

import os
from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
from openai import AsyncOpenAI

from examples.weather_agent import FORECASTS


@function_tool
def get_weather(city: str, day: str = "today") -> dict[str, Any]:
    """The forecast for a city."""
    found = FORECASTS.get(city.lower())
    if found is None:
        raise LookupError(f"no forecast for {city}")
    condition, temperature = found[day]
    return {"city": city, "day": day, "condition": condition, "temperature_f": temperature}


def _agent() -> Agent[Any]:
    client = AsyncOpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"], max_retries=0)
    return Agent(name="weather", instructions="You are a weather assistant.", tools=[get_weather],
                 model=OpenAIChatCompletionsModel(model="scripted", openai_client=client))


AGENT = _agent()


async def ask(input: str) -> str:
    """The app's own entry point: text in, text out."""
    return str((await Runner.run(AGENT, input)).final_output)
