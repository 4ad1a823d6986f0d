"""What the scripted model says next, from a request's own messages and tools (``scripted_model.py`` serves it).

``next_message(messages, tools)`` returns the assistant's next message in Chat Completions form (``content``
or ``tool_calls``). ``tools`` maps each offered tool's name to its parameters' JSON Schema; without it the
model behaves as the weather model of the first examples (``get_weather`` only).
"""

from __future__ import annotations

import json
import re
from typing import Any

CITY = re.compile(r"\b(?:in|for|is|to)\s+([A-Z][\w-]*)")
FAVOURITE = re.compile(r"favou?rite city is\s+([A-Z][\w-]*)", re.IGNORECASE)
CONDITION = re.compile(r"condition['\"]?\s*:\s*['\"](\w+)")
TEMPERATURE = re.compile(r"temperature_f['\"]?\s*:\s*(\d+)")
WEATHER_ONLY = {"get_weather": {}}
NOT_A_WORD = {"transfer", "to", "agent"}


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def next_message(messages: list[dict[str, Any]], tools: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The assistant's next message given the conversation so far and the tools on offer."""
    offered = WEATHER_ONLY if tools is None else tools
    if messages and messages[-1].get("role") == "tool":
        made = call_of(messages, messages[-1].get("tool_call_id"))
        name = made["function"]["name"] if made else ""
        if not name.startswith("transfer_to_"):  # after a handoff the new agent takes the user's message afresh
            return after_tool(messages, name, made, offered)
    return for_user(messages, offered)


def call_of(messages: list[dict[str, Any]], call_id: Any) -> dict[str, Any] | None:
    return next((c for m in reversed(messages) for c in m.get("tool_calls") or () if c.get("id") == call_id), None)


def arguments_of(made: dict[str, Any] | None) -> dict[str, Any]:
    try:
        value = json.loads(made["function"]["arguments"]) if made else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def users(messages: list[dict[str, Any]]) -> list[str]:
    return [text_of(m) for m in messages if m.get("role") == "user"]


def day_of(said: str) -> str:
    return "tomorrow" if "tomorrow" in said.lower() else "today"


def after_tool(messages: list[dict[str, Any]], name: str, made: dict[str, Any] | None,
               tools: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The next message once a tool has answered."""
    result = text_of(messages[-1]).strip()
    said = (users(messages) or [""])[-1]
    if name == "home_city":
        return weather_call(messages, result.strip('"'), day_of(said))
    if name == "confirm_city":
        city = arguments_of(made).get("city", "")
        if result.lower().startswith("confirmed"):
            return weather_call(messages, city, day_of(said))
        return say("Which city should I plan for instead?")
    if name == "book_hotel":
        return say(f"Booked: {result}")
    if "final_result" in tools and name == "get_weather":
        forecast = parse_object(result)
        if forecast is not None:
            wanted = tools["final_result"].get("properties")
            fields = {k: v for k, v in forecast.items() if not isinstance(wanted, dict) or k in wanted}
            return call("final_result", fields, f"call_{len(messages)}_final")
    return say(answer(messages))


def parse_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def weather_call(messages: list[dict[str, Any]], city: str, day: str) -> dict[str, Any]:
    return call("get_weather", {"city": city, "day": day}, f"call_{len(messages)}_{city.lower()}_{day}")


def for_user(messages: list[dict[str, Any]], tools: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The next message for the user's latest words."""
    said_all = users(messages)
    said = said_all[-1] if said_all else ""
    earlier = said_all[:-1]
    lowered = said.lower()
    for name in tools:
        words = [w for w in name.split("_") if w not in NOT_A_WORD] if name.startswith("transfer_to_") else []
        if any(w[:4] in lowered for w in words):
            return call(name, {}, f"call_{len(messages)}_{name}")
    if "book_hotel" in tools and "book" in lowered:
        return call("book_hotel", {"city": city_in(said, earlier) or "", "day": day_of(said)},
                    f"call_{len(messages)}_book")
    favourite = FAVOURITE.search(said)
    if favourite:
        return say(f"Got it, {favourite.group(1)} is your favourite city.")
    if "get_weather" not in tools:
        return say("I can help with forecasts and hotel bookings: what would you like?")
    city = city_in(said, earlier)
    if "home_city" in tools and ("home" in lowered or (CITY.search(said) is None and any("home" in e.lower()
                                                                                        for e in earlier))):
        home = next((text_of(m).strip().strip('"') for m in messages if m.get("role") == "tool"
                     and (c := call_of(messages, m.get("tool_call_id"))) and c["function"]["name"] == "home_city"), None)
        if home is None:
            return call("home_city", {}, f"call_{len(messages)}_home")
        city = home
    if city is None:
        return say("Which city do you mean?")
    if "confirm_city" in tools:
        return call("confirm_city", {"city": city}, f"call_{len(messages)}_confirm_{city.lower()}")
    return weather_call(messages, city, day_of(said))


def city_in(said: str, earlier: list[str]) -> str | None:
    """The city named now; else, for "my favourite city", the one the user named as such; else the last one named."""
    if "favourite" in said.lower() or "favorite" in said.lower():
        named = [m.group(1) for text in earlier for m in [FAVOURITE.search(text)] if m]
        return named[-1] if named else None
    found = CITY.search(said)
    if found:
        return found.group(1)
    named = [m.group(1) for text in earlier for m in CITY.finditer(text)]
    return named[-1] if named else None


def answer(messages: list[dict[str, Any]]) -> str:
    """Words for the latest tool result: the forecast, or an apology when the tool failed."""
    result = text_of(messages[-1])
    made = call_of(messages, messages[-1].get("tool_call_id"))
    arguments = arguments_of(made)
    city, day = arguments.get("city", "that city"), arguments.get("day", "today")
    condition, temperature = CONDITION.search(result), TEMPERATURE.search(result)
    if not condition or not temperature:
        return f"Sorry, I could not get a forecast for {city}."
    return f"{day.title()} in {city}: {condition.group(1)}, {temperature.group(1)}°F."
