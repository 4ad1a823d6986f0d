"""Gemini ``contents`` (what Google ADK's ``gcp.vertex.agent.llm_request`` / ``llm_response`` hold) as OpenAI-format
messages (docs/otel.md): ``text`` parts join into ``content``, ``function_call`` parts are ``tool_calls``, each
``function_response`` part a ``tool`` message."""

from __future__ import annotations

import json
from typing import Any

from ..messages import Message


def gemini_messages(contents: Any) -> list[Message]:
    """Each content of ``contents`` (role ``user`` or ``model``, and its parts) as OpenAI-format messages."""
    out: list[Message] = []
    for content in contents if isinstance(contents, list) else ():
        if not isinstance(content, dict):
            continue
        role = "assistant" if content.get("role") == "model" else "user"
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        for part in content.get("parts") or ():
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("text"), str):
                texts.append(part["text"])
            call = part.get("function_call") or part.get("functionCall")
            if isinstance(call, dict):
                calls.append({"id": call.get("id"), "type": "function", "function": {
                    "name": str(call.get("name")), "arguments": json.dumps(call.get("args") or {}, ensure_ascii=False)}})
            response = part.get("function_response") or part.get("functionResponse")
            if isinstance(response, dict):
                out.append({"role": "tool", "tool_call_id": response.get("id"), "name": response.get("name"),
                            "content": json.dumps(response.get("response"), ensure_ascii=False, default=str)})
        if texts or calls:
            message: Message = {"role": role, "content": "\n".join(texts) if texts else None}
            if calls:
                message["tool_calls"] = calls
            out.append(message)
    return out
