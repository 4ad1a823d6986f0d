"""The eleven deterministic checks (SPEC §4). No LLM; each is a pure function of the run.

Each check is declared once in ``CHECKS`` with a strict pydantic model of its arguments, the name
of its main argument (what ``{check: ARG}`` sets) and its scoring function.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..messages import assistant_texts, tool_error_count, tool_names
from .base import Outcome, ScorerRun


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False)


class TextArgs(_Args):
    value: str
    """The text to look for."""
    ignore_case: bool = True
    """Lower-case both sides before comparing."""


class MatchesArgs(_Args):
    pattern: str
    """A Python regular expression."""
    exact: bool = False
    """Require the whole text to match (``re.fullmatch``) rather than a match anywhere."""

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
        return pattern


class SimilarityArgs(_Args):
    expected: str
    """The text to compare the response with."""
    threshold: float | None = Field(default=None, ge=0, le=1)
    """If set, score 1 when the similarity is >= threshold, else 0."""
    ignore_case: bool = True
    """Lower-case both sides before comparing."""


class CalledToolArgs(_Args):
    name: str
    """The tool's name."""
    times: int = Field(default=1, ge=1)
    """The minimum number of calls."""


class ToolNameArgs(_Args):
    name: str
    """The tool's name."""


class ToolOrderArgs(_Args):
    names: list[str]
    """Tool names that must occur in this order (others may come between)."""


class MaxToolCallsArgs(_Args):
    max: int = Field(ge=0)
    """The largest number of tool calls allowed."""


class NoArgs(_Args):
    pass


def _joined(run: ScorerRun, separator: str, ignore_case: bool) -> str:
    text = separator.join(assistant_texts(run.output))
    return text.lower() if ignore_case else text


def _fold(value: str, ignore_case: bool) -> str:
    return value.lower() if ignore_case else value


def dice_similarity(a: str, b: str) -> float:
    """Dice coefficient of character bigrams, whitespace removed, bigrams counted with multiplicity."""
    a = re.sub(r"\s+", "", a)
    b = re.sub(r"\s+", "", b)
    if a == b:
        return 1.0
    if len(a) < 2 or len(b) < 2:
        return 0.0
    bigrams = Counter(a[i : i + 2] for i in range(len(a) - 1))
    shared = 0
    for i in range(len(b) - 1):
        bigram = b[i : i + 2]
        if bigrams[bigram] > 0:
            bigrams[bigram] -= 1
            shared += 1
    return 2.0 * shared / (len(a) + len(b) - 2)


def _includes(run: ScorerRun, a: TextArgs) -> float:
    return float(_fold(a.value, a.ignore_case) in _joined(run, " ", a.ignore_case))


def _excludes(run: ScorerRun, a: TextArgs) -> float:
    return float(_fold(a.value, a.ignore_case) not in _joined(run, " ", a.ignore_case))


def _equals(run: ScorerRun, a: TextArgs) -> float:
    return float(_joined(run, "", a.ignore_case) == _fold(a.value, a.ignore_case))


def _matches(run: ScorerRun, a: MatchesArgs) -> float:
    text = _joined(run, "", False)
    found = re.fullmatch(a.pattern, text) if a.exact else re.search(a.pattern, text)
    return float(found is not None)


def _similarity(run: ScorerRun, a: SimilarityArgs) -> float:
    similarity = dice_similarity(_joined(run, " ", a.ignore_case), _fold(a.expected, a.ignore_case))
    if a.threshold is None:
        return similarity
    return float(similarity >= a.threshold)


def _called_tool(run: ScorerRun, a: CalledToolArgs) -> float:
    return float(tool_names(run.output).count(a.name) >= a.times)


def _did_not_call(run: ScorerRun, a: ToolNameArgs) -> float:
    return float(a.name not in tool_names(run.output))


def _tool_order(run: ScorerRun, a: ToolOrderArgs) -> float:
    position = 0
    for name in tool_names(run.output):
        if position < len(a.names) and name == a.names[position]:
            position += 1
    return float(position == len(a.names))


def _max_tool_calls(run: ScorerRun, a: MaxToolCallsArgs) -> float:
    return float(len(tool_names(run.output)) <= a.max)


def _used_no_tools(run: ScorerRun, a: NoArgs) -> float:
    return float(not tool_names(run.output))


def _no_tool_errors(run: ScorerRun, a: NoArgs) -> float:
    return float(tool_error_count(run.output) == 0)


@dataclass(frozen=True)
class CheckDef:
    """A check: its argument model, its main argument, and how it scores."""

    name: str
    args: type[_Args]
    main: str | None
    fn: Callable[[ScorerRun, Any], float]
    summary: str


CHECKS: dict[str, CheckDef] = {
    c.name: c
    for c in [
        CheckDef("includes", TextArgs, "value", _includes, "1 if the text contains value"),
        CheckDef("excludes", TextArgs, "value", _excludes, "1 if the text does not contain value"),
        CheckDef("equals", TextArgs, "value", _equals, "1 if the text equals value exactly"),
        CheckDef("matches", MatchesArgs, "pattern", _matches, "1 if the regex matches (anywhere, or whole with exact)"),
        CheckDef("similarity", SimilarityArgs, "expected", _similarity, "Dice bigram similarity to expected"),
        CheckDef("called_tool", CalledToolArgs, "name", _called_tool, "1 if the tool was called at least `times` times"),
        CheckDef("did_not_call", ToolNameArgs, "name", _did_not_call, "1 if the tool was never called"),
        CheckDef("tool_order", ToolOrderArgs, "names", _tool_order, "1 if the tools occur in this order"),
        CheckDef("max_tool_calls", MaxToolCallsArgs, "max", _max_tool_calls, "1 if there are at most `max` tool calls"),
        CheckDef("used_no_tools", NoArgs, None, _used_no_tools, "1 if no tool was called"),
        CheckDef("no_tool_errors", NoArgs, None, _no_tool_errors, "1 if no tool call failed"),
    ]
}


class CheckScorer:
    """A check bound to its validated arguments."""

    def __init__(self, check: CheckDef, args: _Args) -> None:
        self.check = check
        self.args = args

    async def score(self, run: ScorerRun) -> Outcome:
        return Outcome(score=self.check.fn(run, self.args))

    def score_now(self, run: ScorerRun) -> Outcome:
        """Checks need no waiting: the runner calls this directly, skipping a coroutine."""
        return Outcome(score=self.check.fn(run, self.args))


def format_arg(value: Any) -> str:
    """How an argument reads inside a default id: ``includes(Brooklyn)``, ``times=2``, ``ignore_case=false``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(format_arg(v) for v in value) + "]"
    return repr(value) if isinstance(value, float) else str(value)
