"""How results read as text, for every report: thresholds, plurals, one-line excerpts, why a conversation failed."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..results import ItemResult, RunResult, Summary, fmt, reaches_gate
from ..thresholds import GATE, within
from ..words import plural

if TYPE_CHECKING:  # rich is imported where a report is drawn, after the run (docs/performance.md)
    from rich.console import Console, RenderableType
    from rich.table import Table
    from rich.text import Text

__all__ = [
    "DATASETS_DIFFER",
    "ERROR",
    "MAX_FAILING",
    "MAX_ROWS",
    "MAX_TABLE",
    "NOT_SCORABLE",
    "VERDICT_STYLE",
    "budget_words",
    "fits",
    "fmt",
    "mark",
    "missed_gates",
    "one_line",
    "plural",
    "threshold_text",
    "titled",
    "verdict_style",
    "verdict_words",
    "why_failed",
]

VERDICT_STYLE = {"passed": "bold green", "scored": "bold yellow", "failed": "bold red"}
MAX_ROWS = 50
MAX_FAILING = 10
MAX_TABLE = 200
"""Rows of the conversations table at most (``MAX_ROWS`` of any, then failing ones), and ``MAX_TABLE * 5`` with
``--verbose``: a table of 100,000 rows takes minutes to lay out and nobody reads it (docs/history.md)."""
NOT_SCORABLE = "n/s"
ERROR = "error"
"""A score cell of the scorer whose failure made its conversation an error."""
DATASETS_DIFFER = ("the runs are of different dataset contents (their dataset hashes differ): conversations are "
                   "matched by identity (their id, else their content)")
"""The first line of ``diff`` and ``compare`` when the runs' datasets differ (docs/identity.md)."""


def fmt_against(score: float | None, low: Any, high: Any = None) -> str:
    """``fmt(score)`` beside its bound (a gate's 1, a threshold's ``min``/``max``), with the decimals it takes for the
    text to be decided as the score is: a gate's 0.9999999 reads ``0.9999999 FAIL``, never ``1 FAIL``; a threshold's
    0.49999999 against 0.5 reads ``0.49999999`` (docs/scorers.md "Thresholds compare with a tolerance")."""
    text = fmt(score)
    if isinstance(low, dict):
        low, high = low.get("min"), low.get("max")
    bounds = [b if isinstance(b, (int, float)) and not isinstance(b, bool) else None for b in (low, high)]
    if score is None or not math.isfinite(score) or bounds == [None, None]:
        return text
    decided = within(score, *bounds)
    for digits in range(4, 18):
        if within(float(text), *bounds) == decided:
            return text
        text = f"{score:.{digits}f}".rstrip("0").rstrip(".")
    return repr(score)


def threshold_text(raw: Any) -> str:
    """``>= 0.8`` for a minimum, ``0.3..0.9`` / ``<= 0.9`` for bounds."""
    if isinstance(raw, dict):
        low, high = raw.get("min"), raw.get("max")
        if low is not None and high is not None:
            return f"{fmt(low)}..{fmt(high)}"
        return f">= {fmt(low)}" if low is not None else f"<= {fmt(high)}"
    return f">= {fmt(raw)}"


def mark(passed: bool) -> Text:
    from rich.text import Text

    return Text("pass", style="green") if passed else Text("FAIL", style="bold red")


def one_line(text: str, width: int = 1000) -> str:
    """The text on one line, its secrets redacted, cut to ``width`` characters (``secrets.cut``)."""
    from ..secrets import cut

    return cut(text, width)


def missed_gates(item: ItemResult) -> list[str]:
    """Every gate the conversation missed, top level first, then turn by turn: ``gate ID scored S: REASON``
    (``turn N gate ...`` per turn)."""
    lines = []
    levels = [("", item.gate_scores), *((f"turn {t.index} ", t.gate_scores) for t in item.turns)]
    for where, gates in levels:
        for gate_id, outcome in gates.items():
            if outcome.missed_gate:
                detail = outcome.error or outcome.reason
                # over --repeat plays the mean may reach 1 (2.0 and 0.5: 1.25) while a play missed: say so
                mean = " on average over the plays, missed in a play" if reaches_gate(outcome.score) else ""
                lines.append(f"{where}gate {gate_id} scored {fmt_against(outcome.score, GATE)}{mean}"
                             + (f": {detail}" if detail else ""))
    return lines


def why_failed(item: ItemResult) -> str:
    """The first reason a conversation failed: its error, or its first missed gate (with the gate's reason). A limited
    conversation's is what stopped it (``limited by the budget after 0 turn(s): ...``), never called an error
    (docs/budgets.md)."""
    if item.status == "limited":
        return item.error or "limited"
    if item.status != "ok":
        return f"error: {item.error or 'unknown error'}"
    missed = missed_gates(item)
    return missed[0] if missed else "failed"


def verdict_words(result: RunResult | Summary) -> str:
    """The verdict as words, saying what it covers when conversations errored (or were limited: a limit or a spent
    budget stopped them, docs/budgets.md): ``passed``, ``passed on 1 of 4 conversations; 3 errored``, ``passed on 6
    of 8 conversations; 1 errored, 1 limited``, ``none (no gate or threshold results); 3 of 4 conversations
    errored``; and the
    scorers that errored on conversations that did not: ``passed; 1 scorer error: grounded``."""
    summary = result if isinstance(result, Summary) else result.summary
    failing = scorer_errors_words(summary.scorer_errors)
    if not summary.errors:
        words: str = summary.verdict or "none (no gate or threshold results)"
        return f"{words}; {failing}" if failing else words
    total = plural(summary.total_items, "conversation")
    errored = summary.errors - summary.limited  # a limit or a budget stopped the others: limited, never errored
    stopped = ", ".join([*([f"{errored} errored"] if errored else []), *([f"{summary.limited} limited"]
                                                                       if summary.limited else [])])
    if summary.verdict:
        words = f"{summary.verdict} on {summary.total_items - summary.errors} of {total}; {stopped}"
    elif errored and summary.limited:
        words = f"none (no gate or threshold results); {summary.errors} of {total} errored or limited ({stopped})"
    else:
        words = f"none (no gate or threshold results); {summary.errors} of {total} {stopped.split(' ', 1)[1]}"
    return f"{words}; {failing}" if failing else words


def gate_rule(result: RunResult) -> str | None:
    """How a gate passes in ``result``, said above its gates wherever they are listed (terminal, ``show``, Markdown,
    HTML): ``None`` for a run played once (each must average 1.0); under repeats the one rule of
    docs/verdicts.md#repeats-and-the-pass-rate, never a mean: ``each passes when every play of every conversation
    passed it``, or with ``--pass-rate 0.5`` ``each passes when at least 0.5 of each conversation's plays passed it``."""
    if result.repeat <= 1 and not result.repeat_auto:
        return None
    if result.pass_rate >= 1.0:
        return "each passes when every play of every conversation passed it"
    return f"each passes when at least {fmt(result.pass_rate)} of each conversation's plays passed it"


def stability_words(result: RunResult) -> str | None:
    """The run's stability under repeats, as the terminal ends and the HTML report's results say it: ``stability as
    --repeat auto:10 settled it (Wilson 95% interval against pass rate 1): stable-pass 1, flaky 0, stable-fail 7
    plays: 12 (at most 80)``, or over a fixed ``--repeat``; ``None`` for a run played once."""
    if not result.stability:
        return None
    counts = ", ".join(f"{name} {count}" for name, count in result.stability.items())
    if result.repeat_auto:
        return (f"stability as --repeat auto:{result.repeat} settled it (Wilson 95% interval against pass rate "
                f"{fmt(result.pass_rate)}): {counts}   plays: {result.plays} (at most {result.repeat * result.completed})")
    return f"stability over the --repeat plays (every play passed every gate / some did / none did): {counts}"


def plays_words(item: ItemResult) -> str:
    """A repeated conversation's stability and passing plays (``flaky 3/6``); ``""`` played once or errored."""
    return f"{item.stability} {item.plays_passed}/{item.repeats}" if item.stability is not None else ""


def repeat_flags(result: RunResult) -> str:
    """The run's repeat options as typed: ``--repeat 4 --pass-rate 0.5``, ``--repeat auto:10``."""
    flags = f"--repeat auto:{result.repeat}" if result.repeat_auto else f"--repeat {result.repeat}"
    return flags + (f" --pass-rate {fmt(result.pass_rate)}" if result.pass_rate < 1.0 else "")


def scorer_errors_words(scorer_errors: dict[str, int]) -> str:
    """``1 scorer error: grounded``, ``7 scorer errors: fair-judge 6, dead-judge 1``; ``""`` when none."""
    count = sum(scorer_errors.values())
    if not count:
        return ""
    which = next(iter(scorer_errors)) if len(scorer_errors) == 1 else ", ".join(
        f"{key} {n}" for key, n in scorer_errors.items())
    return f"{plural(count, 'scorer error')}: {which}"


def budget_words(result: RunResult) -> str | None:
    """How a run that a budget ended says so, in every report (terminal, Markdown, HTML; the JSON has ``status``
    and ``conversations``): ``budget spent after 4 of 8 conversations, 4 not played``; ``None`` for any other run."""
    if result.status != "budget":
        return None
    counts = result.conversations
    return (f"budget spent after {counts['played']} of {plural(counts['selected'], 'conversation')}, "
            f"{counts['not_played']} not played")


def verdict_style(result: RunResult | Summary) -> str:
    """The style of ``verdict_words``: green only for a verdict that covers every conversation and scorer."""
    summary = result if isinstance(result, Summary) else result.summary
    if summary.errors or summary.scorer_errors:
        return "bold red" if summary.verdict == "failed" else "bold yellow"
    return VERDICT_STYLE.get(summary.verdict or "", "")


def titled(title: str, table: RenderableType, note: str = "") -> RenderableType:
    """A table with its title above it and its note below it, each a line of text of its own: a narrow table never
    wraps its title mid-phrase (a table's own title is wrapped to the table's width)."""
    from rich.console import Group
    from rich.text import Text

    parts: list[RenderableType] = [Text(title, style="italic"), table]
    if note:
        parts.append(Text(note, style="dim"))
    return Group(*parts)


def fits(console: Console, table: Table) -> bool:
    """Whether the table is drawn at its natural width on this console (nothing wrapped or cut)."""
    from rich.measure import Measurement

    natural = Measurement.get(console, console.options.update(max_width=100_000), table).maximum
    return natural <= console.width


def usage_parts(usage: dict[str, Any]) -> list[str]:
    """Each purpose that made calls (target, simulator, judge): its calls, tokens and cost, in words."""
    return [f"{purpose} {plural(u['calls'], 'call')}, {u['prompt_tokens']} in / {u['completion_tokens']} out, "
            f"${u['cost']:.4f}" for purpose, u in (usage.get("purposes") or {}).items() if u.get("calls")]
