"""The eleven deterministic checks (docs/checks.md). No LLM; each is a pure function of the run.

Each check is declared once as a ``Kind`` (its argument model, main argument and summary) and
returns a score with a reason that says what it saw, so a failing gate explains itself.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ...messages import assistant_texts, excerpt, tool_errors
from ...regex_time import search
from ...results import Outcome
from ..base import ScorerRun
from ..kinds import BuildContext, Kind, Scorer


class CheckArgs(BaseModel):
    """Base of every check's arguments: unknown keys are errors. Each model is built when a reference to its kind is
    first validated, not when its module is imported (``defer_build``: a run of three checks builds three of them;
    docs/performance.md "Before the first turn")."""

    model_config = ConfigDict(extra="forbid", defer_build=True)


class TextArgs(CheckArgs):
    value: str = Field(description="The text to look for.")
    ignore_case: bool = Field(default=True, description="Lower-case both sides before comparing.")


EMPTY = ("the empty text is in every response: the check would give every conversation the same score (a ${VAR} "
         "set to the empty text leaves it so); write the text to look for")
"""Why ``includes: ''``, ``excludes: ''`` and ``matches: ''`` are refused (docs/checks.md): a gate that always passes."""


class FindArgs(TextArgs):
    """``includes`` / ``excludes``: the text to look for is never empty (``equals: ''``, an empty reply, is fine)."""

    @field_validator("value")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value:
            raise ValueError(EMPTY)
        return value


class MatchesArgs(CheckArgs):
    pattern: str = Field(description="A Python regular expression.")
    exact: bool = Field(default=False, description="Require the whole text to match (re.fullmatch).")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        if not pattern:  # it matches every text (``exact: true`` with '' would be an empty reply: '^$' says so)
            raise ValueError(EMPTY.replace("text to look for", "pattern (^$ for an empty reply)"))
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
        return pattern


class SimilarityArgs(CheckArgs):
    expected: str = Field(description="The text to compare the response with.")
    threshold: float | None = Field(default=None, ge=0, le=1,
                                    description="If set, score 1 when the similarity is >= threshold, else 0.")
    ignore_case: bool = Field(default=True, description="Lower-case both sides before comparing.")


class CalledToolArgs(CheckArgs):
    name: str = Field(description="The tool's name.")
    times: int = Field(default=1, ge=1, description="The minimum number of calls.")


class ToolNameArgs(CheckArgs):
    name: str = Field(description="The tool's name.")


class ToolOrderArgs(CheckArgs):
    names: list[str] = Field(description="Tool names that must occur in this order (others may come between).")


class MaxToolCallsArgs(CheckArgs):
    max: int = Field(ge=0, description="The largest number of tool calls allowed.")


class NoArgs(CheckArgs):
    pass


def _texts(run: ScorerRun, separator: str, ignore_case: bool) -> str:
    text = separator.join(assistant_texts(run.output))
    return text.lower() if ignore_case else text


def _fold(value: str, ignore_case: bool) -> str:
    return value.lower() if ignore_case else value


def _seen(text: str) -> str:
    if text and not text.strip():
        return _verbatim(text)  # on one line it would read "" (docs/checks.md)
    return excerpt(text) if text else "(no assistant text)"


def _verbatim(text: str) -> str:
    """The text quoted with its whitespace written out (``"Hello\\n"``), where a whole-text comparison turned on it:
    on one line (``excerpt``) ``"Hello\\n"`` reads ``"Hello"``, and ``the text "Hello" is not 'Hello'`` says nothing."""
    if not text:
        return "(no assistant text)"
    if text == text.strip() and not re.search(r"\s{2}|[^\S ]", text):
        return excerpt(text)
    from ...secrets import redact_text

    shown = json.dumps(redact_text(text), ensure_ascii=False)[1:-1]  # redacted as written, then escaped (secrets.cut)
    return f'"{shown}"' if len(shown) <= 160 else f'"{shown[:159]}…"'


NO_CALLS = "none (no tool calls were reported)"
"""What a check that reads tool calls says when the turn's record has none: neither the target's reply nor evalcli's
plan saw one (docs/checks.md)."""


def _calls(names: list[str]) -> str:
    return ", ".join(names) if names else NO_CALLS


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


def includes(run: ScorerRun, a: TextArgs) -> Outcome:
    text = _texts(run, " ", a.ignore_case)
    found = _fold(a.value, a.ignore_case) in text
    return Outcome(score=float(found), reason=f"{a.value!r} {'found' if found else 'not found'} in {_seen(text)}")


def excludes(run: ScorerRun, a: TextArgs) -> Outcome:
    text = _texts(run, " ", a.ignore_case)
    found = _fold(a.value, a.ignore_case) in text
    return Outcome(score=float(not found), reason=f"{a.value!r} {'found' if found else 'not found'} in {_seen(text)}")


def equals(run: ScorerRun, a: TextArgs) -> Outcome:
    text = _texts(run, "", a.ignore_case)
    same = text == _fold(a.value, a.ignore_case)
    return Outcome(score=float(same), reason=f"the text {_verbatim(text)} "
                                             f"{'equals' if same else 'is not'} {a.value!r}")


def matches(run: ScorerRun, a: MatchesArgs) -> Outcome:
    text = _texts(run, "", False)
    found = search(a.pattern, text, whole=a.exact)  # a pattern that backtracks without end is stopped
    if found is not None:
        return Outcome(score=1.0, reason=f"/{a.pattern}/ matched {excerpt(found.group(0))}")
    where = "the whole of" if a.exact else "anywhere in"
    return Outcome(score=0.0, reason=f"/{a.pattern}/ does not match {where} {_verbatim(text) if a.exact else _seen(text)}")


def similarity(run: ScorerRun, a: SimilarityArgs) -> Outcome:
    text = _texts(run, " ", a.ignore_case)
    value = dice_similarity(text, _fold(a.expected, a.ignore_case))
    reason = f"similarity {value:.3f} between {_seen(text)} and {excerpt(a.expected)}"
    if a.threshold is None:
        return Outcome(score=value, reason=reason)
    return Outcome(score=float(value >= a.threshold), reason=f"{reason} (threshold {a.threshold:g})")


def called_tool(run: ScorerRun, a: CalledToolArgs) -> Outcome:
    names = run.tool_names
    count = names.count(a.name)
    return Outcome(score=float(count >= a.times),
                   reason=f"{a.name} called {count} time{'s' if count != 1 else ''} (needs {a.times}); "
                          f"calls: {_calls(names)}")


def did_not_call(run: ScorerRun, a: ToolNameArgs) -> Outcome:
    names = run.tool_names
    count = names.count(a.name)
    return Outcome(score=float(count == 0), reason=f"{a.name} called {count} time{'s' if count != 1 else ''}; "
                                                  f"calls: {_calls(names)}")


def tool_order(run: ScorerRun, a: ToolOrderArgs) -> Outcome:
    names = run.tool_names
    position = 0
    for name in names:
        if position < len(a.names) and name == a.names[position]:
            position += 1
    wanted = " -> ".join(a.names) or "(nothing)"
    if position == len(a.names):
        return Outcome(score=1.0, reason=f"{wanted} found in order; calls: {_calls(names)}")
    return Outcome(score=0.0, reason=f"{wanted} not found in order (matched {position} of {len(a.names)}, "
                                     f"missing {a.names[position]}); calls: {_calls(names)}")


def max_tool_calls(run: ScorerRun, a: MaxToolCallsArgs) -> Outcome:
    names = run.tool_names
    return Outcome(score=float(len(names) <= a.max), reason=f"{len(names)} tool call{'s' if len(names) != 1 else ''} "
                                                            f"(max {a.max}); calls: {_calls(names)}")


def used_no_tools(run: ScorerRun, a: NoArgs) -> Outcome:
    names = run.tool_names
    return Outcome(score=float(not names), reason=f"calls: {_calls(names)}")


def no_tool_errors(run: ScorerRun, a: NoArgs) -> Outcome:
    errors = tool_errors(run.output)
    if errors:
        return Outcome(score=0.0, reason="; ".join(errors))
    count = len(run.tool_names)
    if not count:
        return Outcome(score=1.0, reason=f"no errors: calls: {NO_CALLS}")
    return Outcome(score=1.0, reason=f"{count} tool call{'s' if count != 1 else ''}, no errors")


class ToolRetriesArgs(CheckArgs):
    max: int = Field(default=0, ge=0, description="The most retries any one tool call may need (default 0).")


def tool_retries(run: ScorerRun, a: ToolRetriesArgs) -> Outcome:
    counts = [(str(m.get("name") or m.get("tool_call_id")), int(m.get("retries") or 0)) for m in run.output
              if m.get("role") == "tool" and isinstance(m.get("retries"), int)]
    worst = max((n for _, n in counts), default=0)
    retried = ", ".join(f"{name} {n}" for name, n in counts if n) or "none"
    called = "" if run.tool_names else f"; calls: {NO_CALLS}"
    return Outcome(score=float(worst <= a.max), reason=f"most retries of one tool call: {worst} (max {a.max}); "
                                                       f"retried: {retried}{called}")


class CheckScorer(Scorer):
    """A check bound to its validated arguments."""

    immediate = True

    def __init__(self, fn: Callable[[ScorerRun, Any], Outcome], args: BaseModel) -> None:
        self.fn = fn
        self.args = args

    async def score(self, run: ScorerRun) -> Outcome:
        return self.fn(run, self.args)

    def score_now(self, run: ScorerRun) -> Outcome:
        """Checks need no waiting: the conversation calls this directly, skipping a coroutine."""
        return self.fn(run, self.args)


def check(name: str, args: type[CheckArgs], main: str | None, fn: Callable[[ScorerRun, Any], Outcome],
          summary: str, example: str, *, default_id: Callable[[dict[str, Any]], str] | None = None,
          build: Callable[[Any, BuildContext], CheckScorer] | None = None) -> Kind:
    """Declare a deterministic check: ``fn(run, args)`` scores it; ``default_id`` words its id when the kind's
    default (``name(main, other=...)``) will not do, and ``build`` prepares what it needs once (a schema)."""
    def plain(values: Any, context: BuildContext) -> CheckScorer:
        return CheckScorer(fn, values)

    return Kind(name=name, args=args, main=main, summary=summary, build=build or plain, example=example,
                default_id=default_id)


KINDS = (
    check("includes", FindArgs, "value", includes, "1 if the text contains value", "includes: Brooklyn"),
    check("excludes", FindArgs, "value", excludes, "1 if the text does not contain value", "excludes: error"),
    check("equals", TextArgs, "value", equals, "1 if the text equals value exactly (no trimming)", "equals: Hello!"),
    check("matches", MatchesArgs, "pattern", matches, "1 if the regex matches anywhere (with exact: the whole text)",
          r"matches: '\d+°F'"),
    check("similarity", SimilarityArgs, "expected", similarity,
          "Dice coefficient of character bigrams with expected (with threshold: 1 if >= threshold)",
          "similarity: sunny 72°F"),
    check("called_tool", CalledToolArgs, "name", called_tool, "1 if the tool was called at least `times` times",
          "called_tool: get_weather"),
    check("did_not_call", ToolNameArgs, "name", did_not_call, "1 if the tool was never called",
          "did_not_call: delete_user"),
    check("tool_order", ToolOrderArgs, "names", tool_order, "1 if the tools occur in this order (others may come between)",
          "tool_order: [search, summarize]"),
    check("tool_retries", ToolRetriesArgs, "max", tool_retries,
          "1 if no tool call needed more than `max` retries (PydanticAI ModelRetry; default 0)", "tool_retries: 1",
          default_id=lambda values: f"tool_retries(max={values['max']})" if values.get("max") else "tool_retries"),
    check("max_tool_calls", MaxToolCallsArgs, "max", max_tool_calls, "1 if there are at most `max` tool calls",
          "max_tool_calls: 3"),
    check("used_no_tools", NoArgs, None, used_no_tools, "1 if no tool was called", "used_no_tools"),
    check("no_tool_errors", NoArgs, None, no_tool_errors, "1 if no tool call failed (error result or no result)",
          "no_tool_errors"),
)
"""The checks of this module, in the order ``evalcli scorers`` lists them."""
