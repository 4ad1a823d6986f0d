"""This turn's messages out of a reply that may repeat earlier turns (SPEC §22), for the ``http`` and ``mastra``
targets.

A service may answer each turn with the whole conversation. Only the messages the earlier turns did not record
are this turn's: with ``history: full`` the reply always begins with the earlier turns' response messages; with
``turn`` it holds only this turn's; by default (``detect``) a reply that begins with the earlier turns' messages
has them dropped. Whatever the setting, a tool call (or its result) whose id an earlier turn recorded is never
recorded again: one call, one turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from ..messages import Message

History = Literal["detect", "full", "turn"]
HISTORY_MODES: tuple[str, ...] = ("detect", "full", "turn")


def call_ids(message: Message) -> set[str]:
    """The tool-call ids a message carries: its ``tool_calls``' ids, or the ``tool_call_id`` it answers."""
    found = {str(c.get("id")) for c in message.get("tool_calls") or () if isinstance(c, dict) and c.get("id")}
    if message.get("role") == "tool" and message.get("tool_call_id"):
        found.add(str(message["tool_call_id"]))
    return found


def _key(message: Message) -> tuple[Any, ...]:
    calls = tuple(sorted(call_ids(message)))
    content = message.get("content")
    return message.get("role"), content if isinstance(content, str) or content is None else repr(content), calls


def this_turn(earlier: Sequence[Message], reply: list[Message], history: History = "detect") -> list[Message]:
    """The messages of ``reply`` that are this turn's, given the response messages ``earlier`` turns recorded."""
    seen = {i for m in earlier for i in call_ids(m)}
    if earlier and history != "turn":
        prefix = [_key(m) for m in earlier]
        if history == "full" or [_key(m) for m in reply[:len(prefix)]] == prefix:
            reply = reply[len(prefix):]
        elif reply and call_ids(reply[0]) & seen:  # the earlier turns again, not word for word: their calls tell
            known = set(prefix)
            start = 0
            while start < len(reply) and (call_ids(reply[start]) & seen or _key(reply[start]) in known):
                start += 1
            reply = reply[start:]
    return [kept for m in reply if (kept := _unseen(m, seen)) is not None]


def _unseen(message: Message, seen: set[str]) -> Message | None:
    """The message without the tool calls an earlier turn recorded (``None`` when nothing of it is left)."""
    if not seen:
        return message
    if message.get("role") == "tool":
        return None if str(message.get("tool_call_id")) in seen else message
    calls = message.get("tool_calls")
    if not calls:
        return message
    fresh = [c for c in calls if not (isinstance(c, dict) and str(c.get("id")) in seen)]
    if len(fresh) == len(calls):
        return message
    if fresh:
        return {**message, "tool_calls": fresh}
    rest = {k: v for k, v in message.items() if k != "tool_calls"}
    return rest if rest.get("content") else None
