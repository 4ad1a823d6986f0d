"""Every recorded tool call says where its result came from (SPEC §25): the turn's tool results get ``source``
from the plan's record of the calls, matched by call id, else by tool and arguments, else by tool, in order; a
result no recorded call explains ran in the agent itself (``live``)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..messages import Message
from .plan import ToolCall
from .spec import canonical


def annotate(messages: list[Message], calls: Iterable[ToolCall]) -> list[Message]:
    """The turn's messages with ``source`` on each tool result (and ``is_error`` on a result a mock failed);
    messages are copied, never changed."""
    pending = list(calls)
    asked: dict[Any, tuple[Any, str | None]] = {}
    for message in messages:
        for entry in message.get("tool_calls") or ():
            function = entry.get("function") if isinstance(entry, dict) else None
            if isinstance(function, dict):
                asked[entry.get("id")] = (str(function.get("name")), _arguments(function.get("arguments")))
    out = []
    for message in messages:
        if message.get("role") != "tool":
            out.append(message)
            continue
        call_id = message.get("tool_call_id")
        name, arguments = asked.get(call_id, (message.get("name"), None))
        found = _take(pending, call_id, name, arguments)
        annotated = {**message, "source": found.source if found is not None else "live"}
        if found is not None and found.error is not None and found.source != "live":
            annotated["is_error"] = True
        out.append(annotated)
    return out


def _take(pending: list[ToolCall], call_id: Any, name: Any, arguments: str | None) -> ToolCall | None:
    def same_call(c: ToolCall) -> bool:
        return call_id is not None and bool(c.call_id == call_id)

    def same_arguments(c: ToolCall) -> bool:
        return c.tool == name and arguments is not None and canonical(c.arguments) == arguments

    def same_tool(c: ToolCall) -> bool:
        return bool(c.tool == name)

    for test in (same_call, same_arguments, same_tool):
        for i, candidate in enumerate(pending):
            if test(candidate):
                return pending.pop(i)
    return None


def _arguments(raw: Any) -> str | None:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw or "{}")
        except ValueError:
            return None
    return canonical(raw) if isinstance(raw, dict) else None
