"""Conversation drivers: who writes the user's side of a conversation.

The conversation opens a session on the target and hands a driver a ``send`` function; the driver decides
what the user says, turn after turn, and when the conversation ends. ``input``, ``inputs`` and ``turns``
items are scripted; a ``simulate`` item's driver asks an LLM playing the user (SPEC §13); a ``transcript``
item's plays back a recorded conversation and calls no target (SPEC §19): its ``send`` carries the recorded
answer, and the conversation opens no session for it. A driver also says which of its turns carry their own
gates and scorers. Nothing else in a run knows a form by name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..dataset import Item, RecordedTurn, Turn
from ..llm import LLMClient
from ..messages import Message


class Send(Protocol):
    """``send(text, simulated, resume=None, recorded=None)``: one user turn; returns the agent's response messages
    for it. A ``resume`` value answers the interrupt the previous turn ended in (``text`` is what the turn records).
    With ``recorded`` (a recorded conversation's answer), the turn is recorded with those messages and nothing is
    asked."""

    def __call__(self, text: str, simulated: bool, resume: Any = None,
                 recorded: list[Message] | None = None) -> Awaitable[list[Message]]: ...


TurnAssertions = Turn
"""A turn's own gates and scorers (``gates``, ``scorers``)."""


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

    llm: Callable[[], LLMClient]
    """Returns the run's LLM client (made on first call)."""
    use_cache: bool = True
    ready: Callable[[], Awaitable[None]] | None = None
    """Waits until the run's LLM layer is imported (off the event loop); await it before a model call."""


class Driver(Protocol):
    """Plays the user's side of one conversation."""

    @property
    def calls_target(self) -> bool:
        """Whether the conversation is played against the target (a recorded one is not: no session is opened)."""
        ...

    def assertions(self, index: int) -> TurnAssertions | None:
        """The gates and scorers of turn ``index`` itself, when the form has per-turn ones."""
        ...

    async def play(self, send: Send, context: PlayContext) -> str | None:
        """Play the conversation; return its stop reason (``None`` for scripted conversations)."""
        ...


@dataclass(frozen=True)
class Scripted:
    """The user's messages are written in the dataset: sent in order, one turn each."""

    inputs: tuple[str, ...]
    turns: tuple[Turn, ...] = ()
    """A ``turns`` item's turns, with their own gates and scorers (empty for ``input`` and ``inputs``)."""
    calls_target = True

    def assertions(self, index: int) -> TurnAssertions | None:
        return self.turns[index] if index < len(self.turns) else None

    async def play(self, send: Send, context: PlayContext) -> str | None:
        for index, text in enumerate(self.inputs):
            resume = self.turns[index].resume if index < len(self.turns) else None
            await send(text, False, resume)
        return None


@dataclass(frozen=True)
class Recorded:
    """A recorded conversation: each turn is played back as it was; the target is never called."""

    turns: tuple[RecordedTurn, ...]
    calls_target = False

    def assertions(self, index: int) -> TurnAssertions | None:
        return None

    async def play(self, send: Send, context: PlayContext) -> str | None:
        for turn in self.turns:
            await send(turn.input, False, recorded=list(turn.output))
        return None


def driver_for(item: Item) -> Driver:
    """The driver of an item: its recording, its simulated user, or its scripted messages."""
    if item.transcript is not None:
        return Recorded(item.transcript)
    if item.simulation is not None:
        from .simulated import SimulatedUser

        return SimulatedUser(item.simulation)
    return Scripted(tuple(item.inputs), tuple(item.turns or ()))
