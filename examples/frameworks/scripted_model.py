"""A scripted stand-in for a chat model, to run the framework datasets with no API key and no network.

``python -m examples.frameworks.scripted_model --port 8765`` serves, on 127.0.0.1, both OpenAI APIs the
frameworks call: ``POST /v1/chat/completions`` (Chat Completions) and ``POST /v1/responses`` (the Responses
API, what PydanticAI's ``openai:`` models and the Agents SDK call by default). Point an agent at it with
``OPENAI_BASE_URL=http://127.0.0.1:8765/v1``.

It plays the assistant of the examples from each request's own messages and tools only, so it remembers
nothing itself: an answer that needs an earlier turn ("What about tomorrow?") works only when the agent sent
that turn back. The rules (``examples.frameworks.scripted_rules``): it calls ``get_weather`` for a city named
in the user's message (or recalled from earlier ones) and answers from the tool's result; with a
``home_city`` tool it looks the user's home up first; with a ``confirm_city`` tool it asks for confirmation
before the forecast; a triage agent's ``transfer_to_*`` tools hand the conversation to the agent whose name
the user's words mention; with a ``final_result`` output tool the forecast is returned as structured output.
"""

from __future__ import annotations

import argparse
import itertools
import time
from http.server import ThreadingHTTPServer
from typing import Any

from examples.frameworks.scripted_rules import next_message
from examples.loopback import json_server

__all__ = ["chat_messages", "completion", "next_message", "response", "serve"]

_IDS = itertools.count(1)


def completion(message: dict[str, Any], model: str) -> dict[str, Any]:
    """A Chat Completions response body holding ``message``."""
    return {"id": "chatcmpl-scripted", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def chat_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A Responses API request's ``instructions`` and ``input`` items as Chat Completions messages."""
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": str(body["instructions"])})
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    for item in items or ():
        kind = item.get("type") or "message"
        if kind == "message" and item.get("role") in ("user", "system", "developer"):
            messages.append({"role": "user" if item["role"] == "user" else "system", "content": _text(item.get("content"))})
        elif kind == "message":
            messages.append({"role": "assistant", "content": _text(item.get("content"))})
        elif kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments") or "{}"}}
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and not last.get("content"):
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": _text(item.get("output"))})
    return messages


def response(message: dict[str, Any], model: str) -> dict[str, Any]:
    """A Responses API response body holding ``message`` (a text message, or one function call per tool call)."""
    n = next(_IDS)
    output: list[dict[str, Any]] = []
    if message.get("content"):
        output.append({"type": "message", "id": f"msg_{n}", "status": "completed", "role": "assistant",
                       "content": [{"type": "output_text", "text": message["content"], "annotations": []}]})
    for i, call in enumerate(message.get("tool_calls") or ()):
        output.append({"type": "function_call", "id": f"fc_{n}_{i}", "call_id": call["id"], "status": "completed",
                       "name": call["function"]["name"], "arguments": call["function"]["arguments"]})
    return {"id": f"resp_{n}", "object": "response", "created_at": int(time.time()), "status": "completed",
            "model": model, "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "error": None, "incomplete_details": None, "instructions": None, "metadata": {}, "temperature": 1.0,
            "top_p": 1.0, "text": {"format": {"type": "text"}},
            "usage": {"input_tokens": 10, "output_tokens": 10, "total_tokens": 20,
                      "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}}}


def tool_names(body: dict[str, Any]) -> list[str]:
    """The names of the tools a request offers (either API's layout)."""
    names = []
    for tool in body.get("tools") or ():
        function = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        if isinstance(function.get("name"), str):
            names.append(function["name"])
    return names


def tool_parameters(body: dict[str, Any], name: str) -> dict[str, Any]:
    """The JSON Schema of one offered tool's parameters (``{}`` when not offered)."""
    for tool in body.get("tools") or ():
        function = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        if function.get("name") == name:
            parameters = function.get("parameters")
            return parameters if isinstance(parameters, dict) else {}
    return {}


def answer(path: str, body: dict[str, Any]) -> dict[str, Any]:
    """The response body for a request to ``path`` (Chat Completions, or the Responses API)."""
    model = str(body.get("model", "scripted"))
    tools = {name: tool_parameters(body, name) for name in tool_names(body)} or None  # none offered: get_weather
    if path.rstrip("/").endswith("/responses"):
        return response(next_message(chat_messages(body), tools), model)
    return completion(next_message(body.get("messages") or [], tools), model)


def serve(port: int = 0) -> ThreadingHTTPServer:
    """The server on 127.0.0.1:``port`` (0: any free port), not yet serving."""
    return json_server(answer, port)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8765)
    server = serve(parser.parse_args().port)
    print(f"scripted model on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
