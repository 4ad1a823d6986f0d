"""An Agents SDK triage agent with two handoffs: ``evalcli run datasets/frameworks/openai_agents_travel.yaml``.

``triage_agent`` hands a weather question to the Weather Agent and a booking to the Booking Agent, whose
``on_handoff`` reads and writes the typed ``TripContext`` (a mapping written in YAML becomes one, a new one
for each conversation). As in the SDK's own multi-turn examples, each later turn goes to the agent that
answered the previous one (``continue_with: last_agent``, evalcli's default), and every assistant message
records which agent wrote it. The agents use the SDK's default model (the Responses API through
``OPENAI_BASE_URL``), which the offline scripted model answers too.
"""

from __future__ import annotations

import os
from typing import Literal

from agents import Agent, RunContextWrapper, function_tool, handoff, set_tracing_disabled
from pydantic import BaseModel

from examples.frameworks.weather import INSTRUCTIONS, model_name
from examples.frameworks.weather_openai_agents import get_weather  # the same tool as the first example's

# the SDK exports traces to OpenAI by default; an eval run sends none unless asked to
set_tracing_disabled(os.environ.get("EVALCLI_AGENT_TRACING") != "1")


class TripContext(BaseModel):
    """What the agents know about the traveller, shared by the turns of one conversation."""

    traveller: str
    booking_ref: str | None = None
    bookings: list[str] = []


@function_tool
def book_hotel(context: RunContextWrapper[TripContext], city: str, day: Literal["today", "tomorrow"] = "today") -> str:
    """Book a hotel room for the traveller.

    Args:
        city: The city of the hotel.
        day: "today" or "tomorrow".
    """
    context.context.bookings.append(f"{city} {day}")
    return f"a room in {city} for {day}, reference {context.context.booking_ref}"


async def start_booking(context: RunContextWrapper[TripContext]) -> None:
    """Runs when the triage hands over to the Booking Agent: a reference for this traveller's bookings."""
    context.context.booking_ref = f"TRIP-{context.context.traveller.upper()}-{len(context.context.bookings) + 1}"


weather_agent = Agent[TripContext](name="Weather Agent", model=model_name(), tools=[get_weather],
                                   handoff_description="Answers questions about the weather.",
                                   instructions=INSTRUCTIONS)
booking_agent = Agent[TripContext](name="Booking Agent", model=model_name(), tools=[book_hotel],
                                   handoff_description="Books hotel rooms.",
                                   instructions="You book hotel rooms with book_hotel. Be brief.")
triage_agent = Agent[TripContext](name="Triage Agent", model=model_name(),
                                  instructions="Hand weather questions to the Weather Agent and bookings to the "
                                               "Booking Agent.",
                                  handoffs=[weather_agent, handoff(booking_agent, on_handoff=start_booking)])
weather_agent.handoffs.append(handoff(booking_agent, on_handoff=start_booking))
booking_agent.handoffs.append(weather_agent)
