"""What every scorer receives and returns.

A scorer is a ``Scorer`` (``evalcli.scorers.kinds``): ``async def score(run: ScorerRun) -> Outcome``
(``Outcome`` is in ``evalcli.results``). Checks, the LLM judges and custom Python scorers all end up behind
that one method, so the runner treats them alike.
"""

from __future__ import annotations

import copy
import math
import numbers
from typing import Any

from ..messages import Message, tool_names
from ..records import record

# A TurnView is built for every turn and a ScorerRun for every scored run of every conversation: their __init__ is the
# one a frozen dataclass generates (same parameters, defaults and values; still frozen: assigning a field raises), but
# it writes the instance's fields directly instead of calling object.__setattr__ once per field, several times slower
# (docs/performance.md). tests/test_play_cuts.py holds them to the generated ones.


@record(frozen=True, init=False)
class TurnView:
    """One turn as scorers see it: the user's message and this turn's response messages."""

    index: int
    input: str
    """What the user said (scripted, or written by the simulated user)."""
    output: list[Message]
    """This turn's response messages (assistant and tool), in OpenAI chat format."""
    simulated: bool = False
    """Whether a simulated user wrote ``input`` (docs/simulated-users.md)."""
    structured: Any = None
    """The turn's structured result as JSON (docs/targets/frameworks.md): a framework agent's output that is not text, LangGraph's
    final state without ``messages``; ``None`` when there is none."""
    interrupt: Any = None
    """The value of the interrupt this turn ended in (LangGraph ``interrupt()``), if it did."""
    resume: Any = None
    """What this turn resumed a pending interrupt with, if it did."""
    output_retries: int = 0
    """How many times the agent's output was rejected and asked for again on this turn."""
    guardrail: dict[str, str] | None = None
    """The guardrail that tripped on this turn (``{name, kind}``, kind ``input`` or ``output``), if one did."""

    def __init__(self, index: int, input: str, output: list[Message], simulated: bool = False,
                 structured: Any = None, interrupt: Any = None, resume: Any = None, output_retries: int = 0,
                 guardrail: dict[str, str] | None = None) -> None:
        # the generated __init__ of a frozen dataclass, writing the fields directly (the note above)
        fields = self.__dict__
        fields["index"], fields["input"], fields["output"], fields["simulated"] = index, input, output, simulated
        fields["structured"], fields["interrupt"], fields["resume"] = structured, interrupt, resume
        fields["output_retries"], fields["guardrail"] = output_retries, guardrail


@record(frozen=True, init=False)
class ScorerRun:
    """What a scorer sees: the input, the response messages, every turn, and the item's expectations."""

    input: str
    """The item's input; for multi-turn items the FIRST input (per-turn: that turn's)."""
    output: list[Message]
    """Response messages (assistant and tool), in OpenAI chat format: all turns' (per-turn: that turn's)."""
    ground_truth: Any = None
    """The item's ``ground_truth``, unchanged."""
    turn_index: int | None = None
    """The turn's index for per-turn scorers; ``None`` for whole-conversation scorers."""
    turns: tuple[TurnView, ...] = ()
    """The turns being scored, in order: every turn of the conversation (per-turn: just that one)."""
    expected_outcome: str | None = None
    """The item's ``expected_outcome``, if it has one (docs/reference/scorers.md)."""
    goal: str | None = None
    """The simulated user's goal for ``simulate`` items (docs/simulated-users.md), else ``None``."""

    def __init__(self, input: str, output: list[Message], ground_truth: Any = None,
                 turn_index: int | None = None, turns: tuple[TurnView, ...] = (), expected_outcome: str | None = None,
                 goal: str | None = None) -> None:
        # as TurnView's (the note above it)
        fields = self.__dict__
        fields["input"], fields["output"], fields["ground_truth"] = input, output, ground_truth
        fields["turn_index"], fields["turns"] = turn_index, turns
        fields["expected_outcome"], fields["goal"] = expected_outcome, goal

    @property
    def user_messages(self) -> list[str]:
        """What the user said on each scored turn, in order."""
        return [turn.input for turn in self.turns]

    @property
    def tool_names(self) -> list[str]:
        """Names of every tool called in ``output``, in order (``messages.tool_names``): read once per run, however
        many checks count them (docs/performance.md). Read it, never change it."""
        names: list[str] | None = self.__dict__.get("_tool_names")
        if names is None:
            names = tool_names(self.output)
            object.__setattr__(self, "_tool_names", names)  # a cache beside the fields (functools.cached_property locks)
        return names


@record(frozen=True)
class Score:
    """A score with an optional human-readable reason (custom scorers may return this)."""

    score: float
    reason: str | None = None


@record(frozen=True)
class NotScorable:
    """Returned when a scorer cannot judge this run; it is left out of every average."""

    reason: str | None = None


def not_scorable(reason: str | None = None) -> NotScorable:
    """Mark a run as not scorable (it is counted in ``summary.not_scorable``, not averaged)."""
    return NotScorable(reason)


def own_copy(run: ScorerRun) -> ScorerRun:
    """The run as a scorer evalcli did not write gets it: its own deep copy, so what it changes (the messages, the
    turns, ``ground_truth``) no other scorer sees, nor the next conversation (docs/scorers.md "Custom Python
    scorers", docs/extending.md); the run as is when a value in it cannot be copied (a structured result's object)."""
    try:
        return copy.deepcopy(run)
    except Exception:  # noqa: BLE001 - any failure to copy leaves the run as it is
        return run


def finite_score(value: numbers.Real, who: str, instead: str) -> float:
    """``value`` as a float, or a ``ValueError`` when it is not finite (``nan``, ``inf``, an int beyond any float):
    JSON and SQLite have no infinity or NaN, so stored, such a score would read back as another one (docs/scorers.md).
    ``who`` returned it (``scorer polite``); ``instead`` is what to return when there is nothing to score."""
    try:
        score = float(value)
    except OverflowError:  # an int beyond any float
        score = math.inf
    if not math.isfinite(score):
        shown = str(value) if len(str(value)) <= 40 else f"{str(value)[:40]}..."
        raise ValueError(f"{who} returned the score {shown}: a score must be a finite number ({instead} when there is "
                         "nothing to score)")
    return score
