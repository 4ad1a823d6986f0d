"""A scripted stand-in for a chat model, to run the framework datasets with no API key and no network.

``python -m examples.frameworks.scripted_model --port 8765`` serves ``POST /v1/chat/completions`` on
127.0.0.1 (OpenAI's Chat Completions format); point an agent at it with
``OPENAI_BASE_URL=http://127.0.0.1:8765/v1``. It plays a weather assistant from each request's own
messages only, so it remembers nothing itself: an answer that needs an earlier turn ("What about
tomorrow?") works only when the agent sent that turn back. It calls ``get_weather`` for a city named in
the user's message (or recalled from earlier ones) and answers from the tool's result.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CITY = re.compile(r"\b(?:in|for|is)\s+([A-Z][\w-]*)")
FAVOURITE = re.compile(r"favou?rite city is\s+([A-Z][\w-]*)", re.IGNORECASE)
CONDITION = re.compile(r"condition['\"]?\s*:\s*['\"](\w+)")
TEMPERATURE = re.compile(r"temperature_f['\"]?\s*:\s*(\d+)")


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def next_message(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant's next message (``content`` or ``tool_calls``) given the conversation so far."""
    if messages and messages[-1].get("role") == "tool":
        return {"role": "assistant", "content": answer(messages)}
    users = [text_of(m) for m in messages if m.get("role") == "user"]
    said = users[-1] if users else ""
    favourite = FAVOURITE.search(said)
    if favourite:
        return {"role": "assistant", "content": f"Got it, {favourite.group(1)} is your favourite city."}
    city = city_in(said, users[:-1])
    if city is None:
        return {"role": "assistant", "content": "Which city do you mean?"}
    day = "tomorrow" if "tomorrow" in said.lower() else "today"
    call_id = f"call_{len(messages)}_{city.lower()}_{day}"
    arguments = json.dumps({"city": city, "day": day})
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": arguments}}]}


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
    call = next((c for m in reversed(messages) for c in m.get("tool_calls") or ()
                 if c.get("id") == messages[-1].get("tool_call_id")), None)
    arguments = json.loads(call["function"]["arguments"]) if call else {}
    city, day = arguments.get("city", "that city"), arguments.get("day", "today")
    condition, temperature = CONDITION.search(result), TEMPERATURE.search(result)
    if not condition or not temperature:
        return f"Sorry, I could not get a forecast for {city}."
    return f"{day.title()} in {city}: {condition.group(1)}, {temperature.group(1)}°F."


def completion(message: dict[str, Any], model: str) -> dict[str, Any]:
    """A Chat Completions response body holding ``message``."""
    return {"id": "chatcmpl-scripted", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        data = json.dumps(completion(next_message(body.get("messages") or []), str(body.get("model", "scripted"))))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data.encode())))
        self.end_headers()
        self.wfile.write(data.encode())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8765)
    port = parser.parse_args().port
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"scripted weather model on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
