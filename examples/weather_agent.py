"""A deterministic weather agent for the demo: a ``get_weather`` tool and real memory of earlier turns.

It speaks the evalcli target protocol: ``generate(input, *, memory=None)`` returns OpenAI-format
response messages (an assistant tool call, the tool's result, then the answer). It remembers, per
(resource, thread), the city last talked about and a favourite city, so "What about tomorrow?" only
works when memory is on. ``forgetful_agent`` is the same agent without memory.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from typing import Any

FORECASTS = {
    "brooklyn": {"today": ("sunny", 72), "tomorrow": ("rainy", 64)},
    "london": {"today": ("rainy", 54), "tomorrow": ("cloudy", 57)},
    "paris": {"today": ("sunny", 68), "tomorrow": ("sunny", 70)},
    "tokyo": {"today": ("cloudy", 61), "tomorrow": ("rainy", 59)},
}


def get_weather(city: str, day: str = "today") -> dict[str, Any]:
    """The forecast for a known city; an error result for an unknown one."""
    forecast = FORECASTS.get(city.lower())
    if forecast is None:
        return {"error": f"no forecast for {city}"}
    condition, temperature = forecast[day]
    return {"city": city.title(), "day": day, "condition": condition, "temperature_f": temperature}


class ThreadMemory:
    """What the agent remembers, per (resource, thread)."""

    def __init__(self) -> None:
        self._facts: dict[tuple[str, str], dict[str, str]] = {}
        self._lock = threading.Lock()

    def facts(self, memory: dict[str, Any] | None) -> dict[str, str]:
        if not memory or not memory.get("thread"):
            return {}  # no thread: nothing is remembered
        key = (str(memory.get("resource")), str(memory["thread"]))
        with self._lock:
            return self._facts.setdefault(key, {})


class WeatherAgent:
    """Answers weather questions about a few cities, calling ``get_weather`` for each forecast."""

    def __init__(self, remember: bool = True) -> None:
        self.memory = ThreadMemory() if remember else None
        self._ids = itertools.count(1)

    def generate(self, input: str, *, memory: dict[str, Any] | None = None, **options: Any) -> list[dict[str, Any]]:
        facts = self.memory.facts(memory) if self.memory else {}
        text = input.lower()
        favourite = re.search(r"favou?rite city is (\w+)", text)
        if favourite:
            facts["favourite"] = favourite.group(1)
            return [{"role": "assistant", "content": f"Got it, {favourite.group(1).title()} is your favourite city."}]
        city = next((c for c in FORECASTS if c in text), None)
        if city is None and re.search(r"favou?rite", text):
            city = facts.get("favourite")
        if city is None and ("tomorrow" in text or "what about" in text):
            city = facts.get("city")
        if city is None:
            return [{"role": "assistant", "content": "Which city do you mean?"}]
        facts["city"] = city
        day = "tomorrow" if "tomorrow" in text else "today"
        call_id = f"call_{next(self._ids)}"
        result = get_weather(city, day)
        answer = (f"{'Tomorrow' if day == 'tomorrow' else 'Today'} in {result['city']}: "
                  f"{result['condition']}, {result['temperature_f']}°F.")
        return [
            {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function", "function": {
                "name": "get_weather", "arguments": json.dumps({"city": city, "day": day})}}]},
            {"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)},
            {"role": "assistant", "content": answer},
        ]


weather_agent = WeatherAgent()
forgetful_agent = WeatherAgent(remember=False)


class BrokenAgent(WeatherAgent):
    """The weather agent with a bug: it crashes on questions about Paris (for the exit-code 4 demo)."""

    def generate(self, input: str, *, memory: dict[str, Any] | None = None, **options: Any) -> list[dict[str, Any]]:
        if "paris" in input.lower():
            raise KeyError("paris")
        return super().generate(input, memory=memory, **options)


broken_agent = BrokenAgent()
