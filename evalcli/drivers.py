"""Conversation drivers: who writes the user's side of a conversation.

The runner opens a session on the target and hands a driver a ``send`` function; the driver decides
what the user says, turn after turn, and when the conversation ends. ``input``, ``inputs`` and
``turns`` items are scripted; a ``simulate`` item's driver asks an LLM playing the user (SPEC §13).
The runner schedules drivers and knows no form by name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from .messages import Message

Send = Callable[[str, bool], Awaitable[list[Message]]]
"""``send(text, simulated)``: one user turn; returns the agent's response messages for it."""


class ConversationFailed(Exception):
    """The conversation cannot go on: the agent or the simulated user failed. ``message`` is what the
    conversation's error says; ``cause`` the exception behind it (its traceback is stored);
    ``stop_reason`` what the item records as its stop reason (simulated conversations say ``error``)."""

    def __init__(self, message: str, cause: BaseException | None = None, stop_reason: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.cause = cause
        self.stop_reason = stop_reason


@dataclass
class PlayContext:
    """What a driver may use besides the session: the run's LLM client and cache setting."""

    llm: Callable[[], Any]
    """Returns the run's ``LLMClient`` (made on first call)."""
    use_cache: bool = True


class Driver(Protocol):
    """Plays the user's side of one conversation."""

    @property
    def multi_turn(self) -> bool:
        """Whether the conversation owns a thread (everything but single-turn ``input`` items)."""
        ...

    @property
    def first_input(self) -> str:
        """The first user message if known before playing (for ``--filter``), else ``""``."""
        ...

    async def play(self, send: Send, context: PlayContext) -> str | None:
        """Play the conversation; return its stop reason (``None`` for scripted conversations)."""
        ...


@dataclass(frozen=True)
class Scripted:
    """The user's messages are written in the dataset: sent in order, one turn each."""

    inputs: tuple[str, ...]
    multi_turn: bool

    @property
    def first_input(self) -> str:
        return self.inputs[0]

    async def play(self, send: Send, context: PlayContext) -> str | None:
        for text in self.inputs:
            await send(text, False)
        return None
