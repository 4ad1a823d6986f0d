"""A plain callable target whose tool is an ``@evalcli.tool`` function (docs/hermetic.md): ``book_flight`` would book a
real seat; under a dataset's ``tools:`` it is answered by a mock, and outside evalcli it is a plain call."""

from __future__ import annotations

from typing import Any

import evalcli


@evalcli.tool
def book_flight(origin: str, destination: str) -> dict[str, Any]:
    """Book a seat (the real one: never called in a hermetic eval)."""
    raise RuntimeError("the booking service is not reachable from here")


def agent(input: str, **options: Any) -> list[dict[str, Any]]:
    """Books the flight the user asks for ("from X to Y") and says how it went."""
    words = input.rstrip("?.!").split()
    origin, destination = words[words.index("from") + 1], words[words.index("to") + 1]
    call = {"id": "call_1", "type": "function",
            "function": {"name": "book_flight", "arguments": f'{{"origin": "{origin}", "destination": "{destination}"}}'}}
    try:
        booked = book_flight(origin=origin, destination=destination)
        result, answer = str(booked), f"Booked: seat {booked['seat']} from {origin} to {destination}."
    except Exception as exc:  # noqa: BLE001 - a failed booking is told to the user
        result, answer = f"Error: {exc}", f"Sorry, I could not book that flight ({exc})."
    return [{"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": result},
            {"role": "assistant", "content": answer}]
