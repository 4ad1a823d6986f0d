"""A real LLM weather agent built with ``evalcli.Agent``: one tool, SQLite memory, any litellm model.

Run it with ``evalcli run datasets/weather_llm.yaml``. The model comes from ``EVALCLI_AGENT_MODEL``
(default ``openai/gpt-4o-mini``, which needs ``OPENAI_API_KEY``); any litellm model string works, e.g.
``anthropic/claude-haiku-4-5``, ``ollama/llama3.1`` or ``hosted_vllm/<model>`` with
``EVALCLI_AGENT_API_BASE`` pointing at the server.
"""

from __future__ import annotations

import os
from typing import Any

from evalcli.agent import Agent, Memory
from examples.weather_agent import FORECASTS  # the same forecasts as the deterministic demo agent


def get_weather(city: str, day: str = "today") -> dict[str, Any]:
    """Get the weather forecast for a city.

    Args:
        city: The city name, e.g. "Brooklyn".
        day: "today" or "tomorrow".
    """
    forecast = FORECASTS.get(city.strip().lower())
    if forecast is None:
        raise ValueError(f"no forecast for {city!r}; known cities: {', '.join(c.title() for c in FORECASTS)}")
    if day not in forecast:
        raise ValueError(f"day must be 'today' or 'tomorrow', not {day!r}")
    condition, temperature = forecast[day]
    return {"city": city.title(), "day": day, "condition": condition, "temperature_f": temperature}


agent = Agent(
    model=os.environ.get("EVALCLI_AGENT_MODEL", "openai/gpt-4o-mini"),
    instructions=(
        "You are a concise weather assistant. Always call get_weather for every forecast you give; "
        "never guess. Give temperatures in °F. Remember what the user told you earlier in the conversation."
    ),
    tools=[get_weather],
    memory=Memory(os.environ.get("EVALCLI_AGENT_MEMORY", "evalcli-agent-memory.db")),
    max_steps=6,
    name="llm-weather-agent",
    api_base=os.environ.get("EVALCLI_AGENT_API_BASE") or None,
)
