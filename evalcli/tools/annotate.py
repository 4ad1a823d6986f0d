"""A turn's tool calls as recorded (docs/hermetic.md): what the target reported, set beside what evalcli's plan saw.

Every tool result of the turn is matched with the plan's record of the turn's calls, by call id, else by tool and
arguments, else by tool, in order (tools compared by ``same_tool``). A matched result gets the record's ``source``
(and ``is_error`` when a mock or tape failed it); a result no record explains ran in the agent itself: it is
``live`` and listed in ``outside``, for the plan to say whether that is the conversation's error. A handoff's result
(``handoff: true``) is not a tool's and gets no source. A call of the record that no message reports (a wrapper that
returns only text) is added to the turn's messages, before its last answer, as an assistant tool call and its
result, each ``observed: true``: checks see every call evalcli saw.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import field
from typing import Any

from ..messages import Message
from ..records import record
from .plan import ToolCall, ToolPlan, same_tool
from .spec import SOURCES, as_text, canonical


@record
class Outside:
    """A tool result in the turn's messages that did not pass through evalcli's plan."""

    tool: str
    call_id: Any
    error: bool = False
    """Whether the result is an error (a framework that refused a call it could not run reports one too)."""


@record
class TurnTools:
    """The turn's messages as recorded, and the tool results no plan record explains."""

    messages: list[Message]
    outside: list[Outside] = field(default_factory=list)


def recorded_turn(messages: list[Message], plan: ToolPlan, turn: int, *, service_sources: bool = False) -> TurnTools:
    """The turn's messages with each tool result's ``source`` (when the plan controls tools) and the calls evalcli
    saw that the reply did not report; messages are copied, never changed. ``service_sources``: the target's service
    was sent the plan (``{{ tools }}``), so a result it says came from a ``mock`` or ``replay`` is taken at its
    word."""
    pending = [c for c in plan.calls if c.turn == turn]
    if not plan.controls and not pending and not any(m.get("role") == "tool" for m in messages):
        return TurnTools(messages)  # nothing to label, add or explain: the common case costs one pass
    asked: dict[Any, tuple[str, str | None]] = {}
    for message in messages:
        for entry in message.get("tool_calls") or ():
            function = entry.get("function") if isinstance(entry, dict) else None
            if isinstance(function, dict):
                # arguments only matter to match a pending record: none pending (no mock ran), none parsed
                asked[entry.get("id")] = (str(function.get("name")),
                                          _arguments(function.get("arguments")) if pending else None)
    out: list[Message] = []
    outside: list[Outside] = []
    for message in messages:
        if message.get("role") != "tool" or message.get("handoff") is True:
            out.append(message)
            continue
        call_id = message.get("tool_call_id")
        name, arguments = asked.get(call_id, (str(message.get("name")), None))
        found = _take(pending, call_id, name, arguments)
        claimed = message.get("source") if service_sources else None
        if found is not None:
            source = found.source
        elif claimed in SOURCES and claimed != "live":
            source = str(claimed)
        else:
            source = "live"
            outside.append(Outside(name, call_id, message.get("is_error") is True))
        if not plan.controls:
            out.append(message)
            continue
        annotated = {**message, "source": source}
        if found is not None and found.error is not None and found.source != "live":
            annotated["is_error"] = True
        if found is not None and found.fault is not None:
            annotated["fault"] = found.fault
        out.append(annotated)
    return TurnTools(with_unreported(out, pending), outside)


def with_unreported(messages: list[Message], calls: Iterable[ToolCall]) -> list[Message]:
    """The messages with each call no message reported, as an assistant tool call and its result, before the turn's
    last answer (the last assistant message with text and no tool calls), else at the end."""
    added: list[Message] = []
    for call in calls:
        call_id = call.call_id or f"evalcli_{call.turn}_{call.index}"
        added.append({"role": "assistant", "content": None, "observed": True, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": call.tool, "arguments": json.dumps(call.arguments, ensure_ascii=False, default=str)}}]})
        result: Message = {"role": "tool", "tool_call_id": call_id, "name": call.tool, "source": call.source,
                           "observed": True, **({"fault": call.fault} if call.fault else {})}
        if call.error is not None:
            result.update(content=f"Error: {call.error}", is_error=True)
        else:
            result["content"] = as_text(call.result)
        added.append(result)
    if not added:
        return messages
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "assistant"
                 and messages[i].get("content") and not messages[i].get("tool_calls")), len(messages))
    return [*messages[:last], *added, *messages[last:]]


def _take(pending: list[ToolCall], call_id: Any, name: Any, arguments: str | None) -> ToolCall | None:
    if not pending:
        return None  # no plan record waits (no mock ran this turn): nothing to match, the common case
    def same_call(c: ToolCall) -> bool:
        return call_id is not None and bool(c.call_id == call_id)

    def same_arguments(c: ToolCall) -> bool:
        return same_tool(c.tool, name) and arguments is not None and canonical(c.arguments) == arguments

    def same_name(c: ToolCall) -> bool:
        return same_tool(c.tool, name)

    for test in (same_call, same_arguments, same_name):
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
