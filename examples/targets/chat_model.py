"""A scripted chat model for the ``model`` target's offline example (docs/targets/http.md): an OpenAI-compatible server.

``python -m examples.targets.chat_model --port 8766`` serves ``POST /v1/chat/completions`` on 127.0.0.1.
It plays a weather assistant with no tools, from each request's own messages only (it remembers nothing
itself): the city named in the last user message, else the favourite city the user named earlier in the
request, else the city talked about last; an answer in °F, or in °C when the system prompt asks for
Celsius. So the system prompt changes what a scorer sees, and "What about tomorrow?" works only because
evalcli sends the conversation's history with every turn. ``--port 0`` picks a free port; it prints
``PORT <n>`` once it listens.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from examples.loopback import json_server
from examples.weather_agent import FORECASTS

FAVOURITE = re.compile(r"favou?rite city is\s+(\w+)", re.IGNORECASE)


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def city_in(text: str) -> str | None:
    lowered = text.lower()
    return next((city for city in FORECASTS if city in lowered), None)


def answer(messages: list[dict[str, Any]]) -> str:
    """The assistant's next words, given the conversation so far."""
    system = " ".join(text_of(m) for m in messages if m.get("role") == "system").lower()
    said = next((text_of(m) for m in reversed(messages) if m.get("role") == "user"), "")
    earlier = [text_of(m) for m in messages[:-1] if m.get("role") in ("user", "assistant")]
    favourite = FAVOURITE.search(said)
    if favourite:
        return f"Noted: {favourite.group(1).title()} is your favourite city."
    city = city_in(said)
    if city is None and re.search(r"favou?rite", said, re.IGNORECASE):
        named = [m.group(1).lower() for text in earlier for m in [FAVOURITE.search(text)] if m]
        city = named[-1] if named and named[-1] in FORECASTS else None
    if city is None:
        mentioned = [c for text in earlier if (c := city_in(text))]
        city = mentioned[-1] if mentioned else None
    if city is None:
        return "Which city do you mean?"
    day = "tomorrow" if "tomorrow" in said.lower() else "today"
    condition, fahrenheit = FORECASTS[city][day]
    degrees = f"{round((fahrenheit - 32) * 5 / 9)}°C" if "celsius" in system else f"{fahrenheit}°F"
    return f"{day.title()} in {city.title()}: {condition}, {degrees}."


def completion(path: str, body: dict[str, Any]) -> dict[str, Any]:
    """The response body for a chat completion request: the answer, with words counted as tokens."""
    messages = body.get("messages") or []
    words = answer(messages)
    prompt_tokens = sum(len(text_of(m).split()) for m in messages)
    return {"id": "chatcmpl-scripted", "object": "chat.completion", "created": int(time.time()),
            "model": str(body.get("model", "scripted")),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": words}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(words.split()),
                      "total_tokens": prompt_tokens + len(words.split())}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8766)
    server = json_server(completion, parser.parse_args().port)
    print(f"PORT {server.server_address[1]}", flush=True)
    print(f"scripted chat model on http://127.0.0.1:{server.server_address[1]}/v1", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
