"""A PydanticAI agent that needs per-conversation dependencies: ``evalcli run datasets/frameworks/pydantic_ai_home.yaml``.

Its ``deps`` hold a live ``sqlite3`` connection (the user's saved home city), which no YAML can build: the
dataset names a setup (``examples.frameworks.fixtures:home_user``) that opens a database for each
conversation, seeds it from the item's ``metadata``, yields ``{"deps": HomeDeps(...)}`` and closes it after
the conversation. The answer is structured (a ``Forecast``, checked by an output validator), so every turn
records it as ``structured`` for the ``structured_output`` check. The model is PydanticAI's default OpenAI
model class (the Responses API), which the offline scripted model answers too.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.models.openai import OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

from examples.frameworks.weather import INSTRUCTIONS, api_key, base_url, model_name
from examples.frameworks.weather_pydantic_ai import get_weather  # the same tool as the first example's


@dataclass
class HomeDeps:
    """Who is asking, and the database that knows where they live."""

    user: str
    db: sqlite3.Connection


class Forecast(BaseModel):
    """The structured answer."""

    city: str
    day: Literal["today", "tomorrow"]
    condition: str
    temperature_f: int


model = OpenAIResponsesModel(model_name(), provider=OpenAIProvider(base_url=base_url(), api_key=api_key()))
agent = Agent(model, deps_type=HomeDeps, output_type=Forecast, name="home-weather", retries=2,
              instructions=INSTRUCTIONS + " The user's home city comes from the home_city tool.")


@agent.tool
def home_city(ctx: RunContext[HomeDeps]) -> str:
    """The city the user lives in."""
    row = ctx.deps.db.execute("SELECT city FROM homes WHERE user = ?", (ctx.deps.user,)).fetchone()
    if row is None:
        raise ModelRetry(f"no home city saved for {ctx.deps.user}")
    ctx.deps.db.execute("INSERT INTO lookups (user) VALUES (?)", (ctx.deps.user,))
    return str(row[0])


agent.tool_plain(get_weather)


@agent.output_validator
def plausible(output: Forecast) -> Forecast:
    """A forecast outside what the planet does is sent back to the model."""
    if not -80 <= output.temperature_f <= 140:
        raise ModelRetry(f"{output.temperature_f}°F is not a plausible temperature: check the tool's result")
    return output
