"""An Agents SDK customer-service triage agent with two handoffs; the seat-booking handoff's ``on_handoff`` reads
and writes the typed context."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from agents import Agent, OpenAIChatCompletionsModel, RunContextWrapper, function_tool, handoff, set_tracing_disabled
from openai import AsyncOpenAI
from pydantic import BaseModel

from tests.app_agents import KEY, URL, record

set_tracing_disabled(True)
model = OpenAIChatCompletionsModel(model="airline-model", openai_client=AsyncOpenAI(base_url=URL, api_key=KEY,
                                                                                     max_retries=0))


class AirlineContext(BaseModel):
    passenger: str
    confirmation: str
    flight_number: str | None = None
    seat: str | None = None


class FaqAnswer(BaseModel):
    topic: str
    answer: str


@function_tool
async def update_seat(context: RunContextWrapper[AirlineContext], seat: str) -> str:
    """Move the passenger to another seat."""
    context.context.seat = seat
    record(event="update_seat", passenger=context.context.passenger, flight=context.context.flight_number, seat=seat)
    return f"{context.context.passenger} is now in {seat} on {context.context.flight_number}"


async def on_seat_booking(context: RunContextWrapper[AirlineContext]) -> None:
    context.context.flight_number = f"FLT-{context.context.confirmation}"


faq_agent = Agent[AirlineContext](name="FAQ Agent", model=model, output_type=FaqAnswer,
                                  instructions="You answer frequently asked questions.")
seat_agent = Agent[AirlineContext](name="Seat Booking Agent", model=model, tools=[update_seat],
                                   instructions="You change seats.")
triage_agent = Agent[AirlineContext](name="Triage Agent", model=model, instructions="You route the customer.",
                                     handoffs=[faq_agent, handoff(seat_agent, on_handoff=on_seat_booking)])
faq_agent.handoffs.append(triage_agent)
seat_agent.handoffs.append(triage_agent)


@dataclass
class ConnectedContext:
    """A context no YAML can build (it holds a database connection)."""

    conn: sqlite3.Connection


connected_agent = Agent[ConnectedContext](name="Connected", model=model)
