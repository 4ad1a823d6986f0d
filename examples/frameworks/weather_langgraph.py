"""The demo weather agent written with LangGraph (``langchain.agents.create_agent``):
``evalcli run datasets/frameworks/langgraph.yaml``.

``agent`` is a compiled graph with no checkpointer: evalcli runs it on a copy with an in-memory one, one
thread per conversation. An unknown city makes the tool raise ``ToolException``; with
``handle_tool_error`` the tool node answers ``ToolMessage(status="error")``, which evalcli records with
``is_error: true``.
"""

from __future__ import annotations

from typing import Any, Literal

from langchain.agents import create_agent
from langchain_core.tools import ToolException, tool
from langchain_openai import ChatOpenAI

from examples.frameworks.weather import INSTRUCTIONS, UnknownCity, api_key, base_url, forecast, model_name


@tool
def get_weather(city: str, day: Literal["today", "tomorrow"] = "today") -> dict[str, Any]:
    """Get the weather forecast for a city.

    Args:
        city: The city name, e.g. "Brooklyn".
        day: "today" or "tomorrow".
    """
    try:
        return forecast(city, day)
    except UnknownCity as exc:
        raise ToolException(str(exc)) from exc


get_weather.handle_tool_error = True  # report the failure to the model as an error result, do not end the run

model = ChatOpenAI(model=model_name(), base_url=base_url(), api_key=api_key(), use_responses_api=False)  # type: ignore[arg-type]
agent = create_agent(model, tools=[get_weather], system_prompt=INSTRUCTIONS)
