"""The simulated user's driver (docs/simulated-users.md): an LLM plays the user toward a goal.

The driver sends the opening (if any), then asks the simulator (``simulator``) for each next user
message, and ends the conversation on the first stop rule that applies:

- ``user_stop``: the simulator's message contains ``###STOP###`` or a look-alike (that message is not sent); before any message
  was sent, that is the conversation's error (there is nothing to score);
- ``max_turns``: ``max_turns`` user messages (the opening included) have been answered;
- ``loop``: the simulator repeats the previous user message (the repeat is not sent);
- ``error``: the agent or the simulator failed (the conversation's error).

The agent only ever receives the user's messages: never the goal, persona, facts or expected outcome.
"""

from __future__ import annotations

from ..dataset import Simulation
from ..records import record
from .play import ConversationFailed, LimitReached, PlayContext, Send, TurnAssertions
from .simulator import STOP_MARKER, Simulator, agent_words, fenced, simulator_messages, stops


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


@record(frozen=True)
class SimulatedUser:
    """The driver of a ``simulate`` item: an LLM writes the user's side, turn after turn."""

    simulation: Simulation
    calls_target = True

    def assertions(self, index: int) -> TurnAssertions | None:
        return None

    async def play(self, send: Send, context: PlayContext) -> str:
        """Play until a stop rule applies; returns the stop reason (``user_stop``, ``max_turns`` or ``loop``)."""
        simulation = self.simulation
        simulator = Simulator(context.llm(), simulation.model, context.use_cache)
        said: list[str] = []
        heard: list[str] = []
        for turn in range(simulation.max_turns):
            if turn == 0 and simulation.opening:
                text, simulated = simulation.opening, False
            else:
                if context.before_turn is not None:
                    context.before_turn()  # a limit that ended the conversation: the simulator is not asked
                if context.ready is not None:
                    await context.ready()
                text = await simulator.next_message(simulator_messages(simulation, said, heard), turn)
                if stops(text):
                    if not said:  # nothing was said: an empty conversation is no conversation to score
                        raise ConversationFailed(f"turn {turn}: the simulated user (model {simulation.model}) stopped "
                                                 f"({STOP_MARKER}) before its first message, so the agent was never "
                                                 "asked anything: give the item an 'opening', or a simulator model "
                                                 "that plays the user", stop_reason="error")
                    return "user_stop"
                if said and _same(text, said[-1]):
                    return "loop"
                simulated = True
            try:
                output = await send(text, simulated)
            except LimitReached:
                raise
            except ConversationFailed as exc:
                raise ConversationFailed(exc.message, exc.cause, stop_reason="error") from None
            said.append(text)
            heard.append(fenced(agent_words(output)))
        return "max_turns"
