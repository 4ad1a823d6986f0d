"""What the three framework weather agents share: the tool's logic, the instructions and the model settings.

The forecasts are the demo agent's (``examples/weather_agent.py``). The model is any OpenAI-compatible
chat-completions endpoint: ``EVALCLI_AGENT_MODEL`` names it (default ``gpt-4o-mini``; a litellm-style
``openai/`` prefix is dropped), ``OPENAI_BASE_URL`` points at a server other than OpenAI's (a local
vLLM, Ollama, or ``python -m examples.frameworks.scripted_model``) and ``OPENAI_API_KEY`` is the key.
"""

from __future__ import annotations

import os
from typing import Any

from examples.weather_agent import FORECASTS

INSTRUCTIONS = ("You are a concise weather assistant. Always call get_weather for every forecast you give; never "
                "guess. Give temperatures in °F. Remember what the user told you earlier in the conversation.")


class UnknownCity(ValueError):
    """The tool has no forecast for this city."""


def forecast(city: str, day: str = "today") -> dict[str, Any]:
    """The forecast for a known city on ``today`` or ``tomorrow``; ``UnknownCity`` for any other city."""
    found = FORECASTS.get(city.strip().lower())
    if found is None:
        raise UnknownCity(f"no forecast for {city!r}; known cities: {', '.join(c.title() for c in FORECASTS)}")
    if day not in found:
        raise ValueError(f"day must be 'today' or 'tomorrow', not {day!r}")
    condition, temperature = found[day]
    return {"city": city.strip().title(), "day": day, "condition": condition, "temperature_f": temperature}


def model_name() -> str:
    return os.environ.get("EVALCLI_AGENT_MODEL", "gpt-4o-mini").removeprefix("openai/")


def base_url() -> str | None:
    return os.environ.get("OPENAI_BASE_URL") or None


def api_key() -> str:
    # a placeholder lets the agent be imported (and the dataset validated) without a key; calls then fail with 401
    return os.environ.get("OPENAI_API_KEY") or "no-key-set"
