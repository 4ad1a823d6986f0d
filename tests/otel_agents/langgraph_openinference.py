"""A LangGraph weather agent (``langchain.agents.create_agent``) hidden behind a plain function, seen only through
OpenInference spans: the dataset's ``instrument: [openinference]`` has evalcli call the installed
``LangChainInstrumentor`` (``openinference-instrumentation-langchain``; docs/otel.md)."""

from __future__ import annotations

import os
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import ToolException, tool
from langchain_openai import ChatOpenAI

from examples.weather_agent import FORECASTS


@tool
def get_weather(city: str, day: str = "today") -> dict[str, Any]:
    """The forecast for a city."""
    found = FORECASTS.get(city.lower())
    if found is None:
        raise ToolException(f"no forecast for {city}")
    condition, temperature = found[day]
    return {"city": city, "day": day, "condition": condition, "temperature_f": temperature}


get_weather.handle_tool_error = True  # the failure goes back to the model as an error result

AGENT = create_agent(ChatOpenAI(model="scripted", base_url=os.environ["OPENAI_BASE_URL"],
                                api_key=os.environ["OPENAI_API_KEY"], max_retries=0, use_responses_api=False),
                     tools=[get_weather], system_prompt="You are a weather assistant.")


async def ask(input: str) -> str:
    """The app's own entry point: text in, text out (evalcli sees no graph, no thread, no tool call)."""
    state = await AGENT.ainvoke({"messages": [HumanMessage(input)]})
    return str(state["messages"][-1].content)
