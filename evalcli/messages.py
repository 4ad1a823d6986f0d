"""Helpers over response messages in OpenAI chat format: text, tool calls and tool errors."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

Message = dict[str, Any]
RESPONSE_ROLES = ("assistant", "tool")
"""The roles of the messages a turn's response may hold."""


def message_text(message: Message) -> str:
    """The text of one message: a string content, or the last text part of a list content."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        last = texts[-1] if texts else None
        return last if isinstance(last, str) else ""
    return ""


def assistant_texts(messages: Iterable[Message], *, strip: bool = False) -> list[str]:
    """Texts of the assistant messages that have text, in order (tool-call-only turns add nothing).

    With ``strip`` each text is trimmed and whitespace-only ones are dropped (what judges read).
    """
    # a plain text content is taken as it is, without a call (checks read it for every conversation and turn)
    texts = [content if type(content := m.get("content")) is str else message_text(m)
             for m in messages if m.get("role") == "assistant"]
    if strip:
        return [t for t in (text.strip() for text in texts) if t]
    return [t for t in texts if t]


def tool_calls(messages: Iterable[Message]) -> Iterator[tuple[str | None, str]]:
    """(tool_call_id, tool name) for every tool call of every message, in order."""
    for message in messages:
        for call in message.get("tool_calls") or ():
            if (name := call_name(call)) is not None:
                yield call.get("id"), name


def tool_names(messages: Iterable[Message]) -> list[str]:
    """Names of every tool called, in order: the names ``tool_calls`` yields, gathered without its generator (checks
    read them for every conversation and turn; docs/performance.md)."""
    return [name for message in messages for call in message.get("tool_calls") or ()
            if (name := call_name(call)) is not None]


def call_name(call: Any) -> str | None:
    """The name of the tool a tool call calls (``function.name``), or ``None`` when it names none: such a call is no
    tool call to ``tool_calls`` and ``tool_names``."""
    function = call.get("function") if isinstance(call, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) and name else None


def is_error_result(message: Message) -> bool:
    """A tool result is an error when flagged ``is_error`` or its content is a JSON object with a truthy ``error``."""
    if message.get("is_error") is True:
        return True
    content = message.get("content")
    text = content if isinstance(content, str) else message_text(message)
    if not text or not text.lstrip().startswith("{"):
        return False
    try:
        parsed = json.loads(text)
    except ValueError:
        return False
    return isinstance(parsed, dict) and bool(parsed.get("error"))


def retry_note(message: Message) -> str | None:
    """What a tool result says about retries (docs/targets/index.md), in the words ``show`` and the HTML report print: a result
    that asked the model to try again, the one that succeeded after N tries, or a retry nothing recovered from."""
    if message.get("role") != "tool":
        return None
    if message.get("retried") is True:
        return "retried: the tool asked the model to try again, and a later call succeeded"
    if message.get("retries_exhausted") is True:
        return "retried: the tool asked the model to try again, and no later call succeeded"
    retries = message.get("retries")
    if isinstance(retries, int) and not isinstance(retries, bool) and retries > 0:
        return f"succeeded after {retries} {'retry' if retries == 1 else 'retries'}"
    return None


def is_interrupt(message: Message) -> bool:
    """An assistant message that stands for an interrupt: the agent stopped to wait for the user (docs/targets/frameworks.md)."""
    return message.get("interrupt") is True and message.get("role") == "assistant"


def tool_errors(messages: list[Message]) -> list[str]:
    """Every failed tool call, described: an error result, no result at all, or an error result of an unknown call.

    A call with no result that an interrupt message follows is pending, not failed: the agent stopped to wait for
    the user before the tool finished (its result comes once the interrupt is resumed)."""
    results: dict[Any, Message] = {}
    orphans: list[str] = []
    pending: set[Any] = set()
    seen: list[Any] = []
    for message in messages:
        if is_interrupt(message):
            pending.update(seen)
        for call in message.get("tool_calls") or ():
            if isinstance(call, dict):
                seen.append(call.get("id"))
    calls = list(tool_calls(messages))
    call_ids = {call_id for call_id, _ in calls}
    for message in messages:
        if message.get("role") != "tool":
            continue
        call_id = message.get("tool_call_id")
        if call_id in call_ids:
            results.setdefault(call_id, message)
        elif is_error_result(message):
            orphans.append(f"an error result for unknown call {call_id}: {excerpt(message_text(message))}")
    errors = []
    for call_id, name in calls:
        result = results.get(call_id)
        if result is None:
            if call_id not in pending:
                errors.append(f"{name} ({call_id}) has no result")
        elif is_error_result(result):
            errors.append(f"{name} ({call_id}) failed: {excerpt(message_text(result))}")
    return errors + orphans


def excerpt(text: str, width: int = 160) -> str:
    """The text on one line, its secrets redacted, cut to ``width`` characters, quoted (``secrets.cut``)."""
    from .secrets import cut

    return '"' + cut(text, width) + '"'
