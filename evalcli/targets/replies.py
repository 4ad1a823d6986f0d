"""This turn's messages out of a reply that may repeat earlier turns, for the ``http`` and ``mastra`` targets
(docs/targets/http.md, "Replies that repeat earlier turns").

A service may answer each turn with the whole conversation. With ``history: full`` every reply begins with the
earlier turns' messages, which are dropped; with ``turn`` a reply holds only this turn's messages and nothing is
ever dropped; by default (``detect``) a reply repeats history only when it begins with every earlier turn's
messages, in order, and has something after them: a reply that merely says the previous turn's text again is this
turn's reply. Whatever the setting, a tool-call id is recorded in one turn only: a service that reuses ids across
turns (``call_0`` every turn) has a later turn's ids made unique in the record (``call_0~2`` on turn 2, counted
from 0), its calls kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import Any, Literal

from ..messages import Message
from ..records import record

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


def repeated(earlier: Sequence[Message], reply: Sequence[Message], history: History = "detect") -> int:
    """How many messages at the start of ``reply`` are the earlier turns' (``earlier``: as the service sent them).

    The one rule of history detection: ``full`` drops the earlier turns' count; ``turn`` drops nothing; ``detect``
    drops them only when the reply begins with every one of them, in order, and goes on past them."""
    if not earlier or history == "turn":
        return 0
    if history == "full":
        return min(len(earlier), len(reply))
    if len(reply) <= len(earlier):
        return 0
    return len(earlier) if all(_key(a) == _key(b) for a, b in zip(earlier, reply, strict=False)) else 0


def unique_ids(messages: list[Message], taken: set[str], turn: int) -> list[Message]:
    """``messages`` with every tool-call id in ``taken`` (an earlier turn recorded it) renamed ``ID~TURN`` (``ID~TURN~2``
    if that too is taken), the call and its result alike; ``taken`` gains every id this turn records."""
    own = {i for m in messages for i in call_ids(m)}
    renamed: dict[str, str] = {}
    for old in sorted(own & taken):
        new, n = f"{old}~{turn}", 1
        while new in taken or new in own or new in renamed.values():
            n += 1
            new = f"{old}~{turn}~{n}"
        renamed[old] = new
    taken |= (own - set(renamed)) | set(renamed.values())
    return [_renamed(m, renamed) for m in messages] if renamed else messages


def _renamed(message: Message, renamed: dict[str, str]) -> Message:
    changed = dict(message)
    if message.get("role") == "tool" and str(message.get("tool_call_id")) in renamed:
        changed["tool_call_id"] = renamed[str(message["tool_call_id"])]
    calls = message.get("tool_calls")
    if calls:
        changed["tool_calls"] = [{**c, "id": renamed[str(c.get("id"))]}
                                 if isinstance(c, dict) and str(c.get("id")) in renamed else c for c in calls]
    return changed


@record
class TurnReplies:
    """One conversation's replies so far: what each turn is given as its own."""

    history: History = "detect"
    sent: list[Message] = field(default_factory=list)
    """The messages the earlier turns kept, as the service sent them (what a repeating reply begins with)."""
    ids: set[str] = field(default_factory=set)
    """Every tool-call id recorded so far."""
    turns: int = 0

    def take(self, reply: list[Message]) -> tuple[list[Message], list[Message]]:
        """This turn's messages of ``reply``: as the service sent them, and as recorded (ids made unique)."""
        index, self.turns = self.turns, self.turns + 1
        own = reply[repeated(self.sent, reply, self.history):]
        self.sent = [*self.sent, *own]
        return own, unique_ids(own, self.ids, index)
