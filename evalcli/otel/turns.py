"""The spans of one turn, read as one (docs/otel.md): its model calls and tool calls, each counted once, and the
turn's response messages rebuilt from them.

A span of the same kind nested in another (an OpenInference ``LLM`` span around the GenAI ``chat`` span of the same
request, an agent's tool span around the framework's) is the same call described twice: only the outermost counts.
Two tool spans with the same call id are one call.
"""

from __future__ import annotations

import json
from dataclasses import field
from typing import Any

from ..messages import Message
from ..records import record
from .readers import ModelCall, ToolUse, read
from .spans import Span


@record
class TurnSpans:
    """What a turn's spans say, in the order they started."""

    spans: list[Span]
    models: list[ModelCall] = field(default_factory=list)
    tools: list[ToolUse] = field(default_factory=list)

    @classmethod
    def of(cls, spans: list[Span], *, messages: bool = True, parents: dict[str, str | None] | None = None) -> TurnSpans:
        """The turn's calls (``messages``: with each model call's messages read, which ingest needs and capture
        does not; ``parents``: every span's parent, when ``spans`` are only some of the turn's)."""
        ordered = sorted(spans, key=lambda s: s.start_ns)
        turn = cls(ordered)
        read_by_id: dict[str, ModelCall | ToolUse] = {}
        parents = parents if parents is not None else {s.span_id: s.parent_id for s in ordered}
        for span in ordered:
            found = read(span, messages=messages)
            if found is not None:
                read_by_id[span.span_id] = found
        seen_calls: set[str] = set()
        for span_id, found in read_by_id.items():
            outer = _outermost_same_kind(span_id, found, parents, read_by_id)
            if outer is not None:  # the same call described twice: what only the inner span says is the call's
                _fill(outer, found)
                continue
            if isinstance(found, ModelCall):
                turn.models.append(found)
            elif found.call_id is None or found.call_id not in seen_calls:
                if found.call_id is not None:
                    seen_calls.add(found.call_id)
                turn.tools.append(found)
        return turn

    def messages(self, final: str | None = None) -> list[Message]:
        """The turn's response messages (OpenAI format): each model call's answer and each tool call's result, in the
        order they happened; a tool call no model answer asked for gets its own assistant message. ``final`` (the
        turn's answer from its root span) ends it when no model answer said it."""
        events: list[tuple[int, ModelCall | ToolUse]] = [(m.span.start_ns, m) for m in self.models]
        events += [(t.span.start_ns, t) for t in self.tools]
        out: list[Message] = []
        asked: set[Any] = set()
        unnamed: list[dict[str, Any]] = []
        """The model's tool calls that gave no id, for the tool span that ran them to answer (never a second call)."""
        answered: set[Any] = {t.call_id or f"span_{t.span.span_id}" for t in self.tools}
        for _, found in sorted(events, key=lambda e: e[0]):
            if isinstance(found, ModelCall):
                for message in found.input:  # a result no tool span gave: what the model was sent back (a trace
                    call_id = message.get("tool_call_id")  # of model calls only, as the OpenAI instrumentation writes)
                    if message.get("role") == "tool" and call_id in asked and call_id not in answered:
                        answered.add(call_id)
                        content = message.get("content")
                        out.append({"role": "tool", "tool_call_id": call_id, "content": content if isinstance(
                            content, str) else json.dumps(content, ensure_ascii=False, default=str)})
                for message in found.output:
                    if message.get("role") == "assistant":
                        calls = [dict(c) for c in message.get("tool_calls") or ()]
                        out.append({**message, "tool_calls": calls} if calls else message)
                        asked.update(c.get("id") for c in calls)
                        unnamed.extend(c for c in calls if c.get("id") is None)
                continue
            call_id = found.call_id or f"span_{found.span.span_id}"
            if call_id not in asked and (call := _unnamed(unnamed, found.name)) is not None:
                call["id"] = call_id
                asked.add(call_id)
            if call_id not in asked:
                out.append({"role": "assistant", "content": None, "tool_calls": [{
                    "id": call_id, "type": "function",
                    "function": {"name": found.name, "arguments": json.dumps(found.arguments, ensure_ascii=False)}}]})
            out.append(tool_result(found, call_id))
        if final and not any(m.get("role") == "assistant" and m.get("content") == final for m in out):
            out.append({"role": "assistant", "content": final})
        return out

    def user_text(self) -> str | None:
        """What the user said on this turn: the last user message the turn's first model call was sent."""
        for call in self.models[:1]:
            for message in reversed(call.input):
                if message.get("role") == "user" and isinstance(message.get("content"), str):
                    return str(message["content"])
        return None


def _unnamed(calls: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    """The first of the model's id-less tool calls of tool ``name`` (taken off the list), or ``None``."""
    for n, call in enumerate(calls):
        if (call.get("function") or {}).get("name") == name:
            return calls.pop(n)
    return None


def tool_result(use: ToolUse, call_id: str) -> Message:
    """A tool call's result as a ``tool`` message (``is_error`` when the span failed)."""
    message: Message = {"role": "tool", "tool_call_id": call_id, "name": use.name}
    if use.error is not None:
        message.update(content=f"Error: {use.error}", is_error=True)
    else:
        result = use.result
        message["content"] = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
    return message


def _outermost_same_kind(span_id: str, found: ModelCall | ToolUse, parents: dict[str, str | None],
                         read_by_id: dict[str, ModelCall | ToolUse]) -> ModelCall | ToolUse | None:
    """The outermost call of the same kind the span is nested in (the one that counts), or ``None``."""
    parent = parents.get(span_id)
    hops = 0
    outermost = None
    while parent is not None and hops < 64:
        outer = read_by_id.get(parent)
        if outer is not None and type(outer) is type(found):
            outermost = outer
        parent, hops = parents.get(parent), hops + 1
    return outermost


def _fill(outer: ModelCall | ToolUse, inner: ModelCall | ToolUse) -> None:
    """What the outer span of a call left out and the inner one says (a tool's result only the MCP client's span under
    the framework's holds, the tokens only the GenAI ``chat`` span under an OpenInference ``LLM`` span holds)."""
    if isinstance(outer, ToolUse) and isinstance(inner, ToolUse):
        if outer.result is None and outer.error is None:
            outer.result, outer.error = inner.result, inner.error
        outer.arguments = outer.arguments or inner.arguments
        outer.call_id = outer.call_id or inner.call_id
    elif isinstance(outer, ModelCall) and isinstance(inner, ModelCall):
        outer.model = outer.model or inner.model
        if not (outer.prompt_tokens or outer.completion_tokens):
            outer.prompt_tokens, outer.completion_tokens = inner.prompt_tokens, inner.completion_tokens
            outer.cached_tokens = outer.cached_tokens or inner.cached_tokens
        outer.input = outer.input or inner.input
        outer.output = outer.output or inner.output
