"""What a conversation driver is, and what it plays with: the ``Driver`` protocol, the ``send`` function the
conversation hands it, the run's ``PlayContext``, and ``ConversationFailed``, which ends a conversation.

The conversation (``conversation``) and every driver (``drivers``, ``simulated``) import these; this module imports
none of them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..dataset import Turn
from ..messages import Message
from ..records import record

if TYPE_CHECKING:
    from ..llm import LLMClient


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


class LimitReached(ConversationFailed):
    """The conversation reached one of its ``limits`` (docs/budgets.md): ``limit`` is which (``turns``, ``tokens``, ``cost``,
    ``seconds``); it stops there, ``limited`` (or scored on what was played, with ``on_limit: score``)."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message, None, stop_reason=limit)
        self.limit = limit


@record
class PlayContext:
    """What a driver may use besides the session: the run's LLM client and cache setting."""

    llm: Callable[[], LLMClient]
    """Returns the run's LLM client (made on first call)."""
    use_cache: bool = True
    ready: Callable[[], Awaitable[None]] | None = None
    """Waits until the run's LLM layer is imported (off the event loop); await it before a model call."""
    before_turn: Callable[[], None] | None = None
    """This conversation's check before its next turn: raises ``LimitReached`` (or ``ConversationFailed`` for a spent
    budget) when that turn will not be played. ``send`` checks it too; a driver that asks a model for the user's next
    message calls it first, so that model is never asked for a turn a limit ended (docs/simulated-users.md)."""

    def with_check(self, before_turn: Callable[[], None]) -> PlayContext:
        """This context for one conversation, with its check before each turn (``dataclasses.replace`` without its
        look at every field, once a conversation; docs/performance.md)."""
        return PlayContext(self.llm, self.use_cache, self.ready, before_turn)


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
