"""How results read as text, for every report: thresholds, plurals, one-line excerpts, why a conversation failed."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from ..results import ItemResult, fmt

__all__ = ["MAX_FAILING", "MAX_ROWS", "NOT_SCORABLE", "VERDICT_STYLE", "fmt", "mark", "missed_gates", "one_line",
           "plural", "short", "threshold_text", "why_failed"]

VERDICT_STYLE = {"passed": "bold green", "scored": "bold yellow", "failed": "bold red"}
MAX_ROWS = 50
MAX_FAILING = 10
NOT_SCORABLE = "n/s"


def threshold_text(raw: Any) -> str:
    """``>= 0.8`` for a minimum, ``0.3..0.9`` / ``<= 0.9`` for bounds."""
    if isinstance(raw, dict):
        low, high = raw.get("min"), raw.get("max")
        if low is not None and high is not None:
            return f"{fmt(low)}..{fmt(high)}"
        return f">= {fmt(low)}" if low is not None else f"<= {fmt(high)}"
    return f">= {fmt(raw)}"


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 conversation``, ``2 conversations``."""
    return f"{count} {word if count == 1 else many or word + 's'}"


def mark(passed: bool) -> Text:
    return Text("pass", style="green") if passed else Text("FAIL", style="bold red")


def short(text: str, width: int = 28) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def one_line(text: str, width: int = 1000) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def missed_gates(item: ItemResult) -> list[str]:
    """Every gate the conversation missed, top level first, then turn by turn: ``gate ID scored S: REASON``
    (``turn N gate ...`` per turn)."""
    lines = []
    levels = [("", item.gate_scores), *((f"turn {t.index} ", t.gate_scores) for t in item.turns)]
    for where, gates in levels:
        for gate_id, outcome in gates.items():
            if outcome.missed_gate:
                detail = outcome.error or outcome.reason
                lines.append(f"{where}gate {gate_id} scored {fmt(outcome.score)}" + (f": {detail}" if detail else ""))
    return lines


def why_failed(item: ItemResult) -> str:
    """The first reason a conversation failed: its error, or its first missed gate (with the gate's reason)."""
    if item.status != "ok":
        return f"error: {item.error or 'unknown error'}"
    missed = missed_gates(item)
    return missed[0] if missed else "failed"
