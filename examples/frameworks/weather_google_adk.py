"""The demo weather agent written with Google ADK, as ADK's quick-start writes one (an ``Agent`` with a function
tool): ``evalcli run datasets/frameworks/google_adk.yaml``.

evalcli recognises ``root_agent`` as an ADK agent and runs it with a ``Runner`` and an in-memory session service,
one ADK session per conversation. The model is any OpenAI-compatible endpoint, reached through ADK's ``LiteLlm``.
An unknown city makes the tool raise; ADK would end the run, so the agent reports the error to the model with an
``on_tool_error_callback`` (as ADK's docs show), and evalcli records that result with ``is_error: true``.
"""

from __future__ import annotations

from typing import Any, Literal

from google.adk.agents import Agent
from google.adk.models.lite_llm import LiteLlm

from examples.frameworks.weather import INSTRUCTIONS, api_key, base_url, forecast, model_name


def get_weather(city: str, day: Literal["today", "tomorrow"] = "today") -> dict[str, Any]:
    """Get the weather forecast for a city.

    Args:
        city: The city name, e.g. "Brooklyn".
        day: "today" or "tomorrow".
    """
    return forecast(city, day)


def report_tool_error(tool: Any, args: dict[str, Any], tool_context: Any, error: Exception) -> dict[str, Any]:
    """The tool's failure, told to the model (instead of ending the run)."""
    return {"status": "error", "error_message": str(error)}


root_agent = Agent(name="weather_agent", model=LiteLlm(model=f"openai/{model_name()}", api_base=base_url(),
                                                       api_key=api_key()),
                   description="Answers questions about the weather.", instruction=INSTRUCTIONS, tools=[get_weather],
                   on_tool_error_callback=report_tool_error)
