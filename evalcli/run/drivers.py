"""Conversation drivers: who writes the user's side of a conversation.

The conversation opens a session on the target and hands a driver a ``send`` function; the driver decides
what the user says, turn after turn, and when the conversation ends. ``input``, ``inputs`` and ``turns``
items are scripted; a ``simulate`` item's driver asks an LLM playing the user (docs/simulated-users.md); a ``transcript``
item's plays back a recorded conversation and calls no target (docs/recorded.md): its ``send`` carries the recorded
answer, and the conversation opens no session for it. A driver also says which of its turns carry their own
gates and scorers (the protocol they all follow is ``play``'s). Nothing else in a run knows a form by name.
"""

from __future__ import annotations

from ..dataset import Item, RecordedTurn, Turn
from ..records import record
from .play import Driver, PlayContext, Send, TurnAssertions


@record(frozen=True)
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


@record(frozen=True)
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
        from .simulated import SimulatedUser  # a simulated user's LLM loop: only a run with such an item imports it

        return SimulatedUser(item.simulation)
    return Scripted(tuple(item.inputs), tuple(item.turns or ()))
