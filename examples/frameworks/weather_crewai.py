"""The demo weather agent written with CrewAI (docs/targets/crewai.md).

``agent`` is a CrewAI ``Agent`` (run with ``kickoff``) on an ``LLM`` at ``$OPENAI_BASE_URL``; its ``get_weather``
tool raises for an unknown city, which CrewAI reports to the model as the tool's error and evalcli records with
``is_error: true``. ``crew`` is the same agent in a one-task ``Crew`` whose ``{question}`` input is the user's
message (``target_options.inputs_from: question``). Each conversation runs on a copy of the agent or crew.
"""

from __future__ import annotations

from typing import Any

from crewai import LLM, Agent, Crew, Task
from crewai.tools import tool

from examples.frameworks.weather import INSTRUCTIONS, api_key, base_url, forecast, model_name


@tool("get_weather")
def get_weather(city: str, day: str = "today") -> dict[str, Any]:
    """Get the weather forecast for a city: day is "today" or "tomorrow"."""
    return forecast(city, day)


llm = LLM(model=f"openai/{model_name()}", base_url=base_url(), api_key=api_key())
agent = Agent(role="Weather assistant", goal=INSTRUCTIONS, backstory="You answer questions about the weather.",
              tools=[get_weather], llm=llm)
crew = Crew(agents=[agent], tasks=[Task(description="Answer the traveller: {question}",
                                        expected_output="The forecast, in °F", agent=agent)])
