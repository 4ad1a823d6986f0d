"""The ``simulate:`` item form (SPEC §13): an LLM plays the user toward a goal.

``SimulateFile`` is the strict model of the YAML block; ``parse_simulation`` validates it with located
errors and returns a ``SimulatedUser``, the conversation driver. The driver sends the opening (if
any), then asks the simulator (``evalcli.simulator``) for each next user message, and ends the
conversation on the first stop rule that applies:

- ``user_stop``: the simulator's message contains ``###STOP###`` (that message is not sent);
- ``max_turns``: ``max_turns`` user messages (the opening included) have been answered;
- ``loop``: the simulator repeats the previous user message (the repeat is not sent);
- ``error``: the agent or the simulator failed (the conversation's error).

The agent only ever receives the user's messages: never the goal, persona, facts or expected outcome.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .drivers import ConversationFailed, PlayContext, Send
from .errors import Problem
from .simulator import STOP_MARKER, Character, Simulator, agent_words, fenced, render_fact, simulator_messages
from .yamlsrc import Path, Positions, problems_from_pydantic

SIMULATOR_MODEL_ENV = "EVALCLI_SIMULATOR_MODEL"


class SimulateFile(BaseModel):
    """A simulated user: the ``simulate:`` block of an item."""

    model_config = ConfigDict(extra="forbid")
    goal: str = Field(description="What the simulated user wants from the conversation (required; the agent never "
                                  "sees it).")
    persona: str | None = Field(default=None, description="Who the user is and how they write.")
    facts: dict[str, Any] | None = Field(default=None, description="What the user knows, shared only when the agent "
                                                                   "asks (name: value).")
    opening: str | None = Field(default=None, description="A scripted first user message; it counts toward "
                                                          "max_turns.")
    max_turns: int = Field(default=8, ge=1, le=50, strict=True,
                           description="User messages at most, the opening included (1..50).")
    model: str | None = Field(default=None, min_length=1,
                              description="The simulator's litellm model (default: $EVALCLI_SIMULATOR_MODEL, else the "
                                          "judge default).")

    @field_validator("goal")
    @classmethod
    def _goal_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("goal must not be empty: write what the simulated user wants")
        return value

    @field_validator("opening")
    @classmethod
    def _opening_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("opening must not be empty: write the first message, or leave 'opening' out")
        return value


def simulator_model(configured: str | None) -> str:
    """``simulate.model``, else ``$EVALCLI_SIMULATOR_MODEL``, else the judge default."""
    if configured:
        return configured
    from .scorers.judge import default_judge_model

    return os.environ.get(SIMULATOR_MODEL_ENV) or default_judge_model()


def parse_simulation(raw: Any, path: Path, pos: Positions, label: str, problems: list[Problem]) -> SimulatedUser | None:
    """The driver of a ``simulate`` block, or ``None`` after adding every mistake in it to ``problems``."""
    if not isinstance(raw, dict):
        problems.append(pos.problem(path, f"{label}: 'simulate' must be a mapping with at least 'goal'",
                                    "write 'simulate: {goal: what the user wants}'"))
        return None
    try:
        block = SimulateFile.model_validate(raw)
    except ValidationError as exc:
        problems.extend(problems_from_pydantic(exc, path, pos, f"{label} simulate", list(SimulateFile.model_fields)))
        return None
    facts = tuple((str(name), render_fact(value)) for name, value in (block.facts or {}).items())
    return SimulatedUser(Character(block.goal.strip(), block.persona, facts), block.opening, block.max_turns,
                         simulator_model(block.model))


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


@dataclass(frozen=True)
class SimulatedUser:
    """The driver of a ``simulate`` item: an LLM writes the user's side, turn after turn."""

    character: Character
    opening: str | None
    max_turns: int
    model: str
    """The simulator's model (read by preflight checks)."""

    @property
    def multi_turn(self) -> bool:
        return True

    @property
    def first_input(self) -> str:
        return self.opening or ""

    @property
    def goal(self) -> str:
        return self.character.goal

    async def play(self, send: Send, context: PlayContext) -> str:
        """Play until a stop rule applies; returns the stop reason (``user_stop``, ``max_turns`` or ``loop``)."""
        simulator = Simulator(context.llm(), self.model, context.use_cache)
        said: list[str] = []
        heard: list[str] = []
        for turn in range(self.max_turns):
            if turn == 0 and self.opening:
                text, simulated = self.opening, False
            else:
                text = await simulator.next_message(simulator_messages(self.character, said, heard), turn)
                if STOP_MARKER in text:
                    return "user_stop"
                if said and _same(text, said[-1]):
                    return "loop"
                simulated = True
            try:
                output = await send(text, simulated)
            except ConversationFailed as exc:
                raise ConversationFailed(exc.message, exc.cause, stop_reason="error") from None
            said.append(text)
            heard.append(fenced(agent_words(output)))
        return "max_turns"
