"""Reports as plain text, for a front end that prints through someone else's output (pytest's failure texts):
no colour, no markup, lines of text never wrapped.

The same renderings as the terminal's: a conversation as ``evalcli show RUN ITEM`` prints it, and a run's gates,
scores and turn results with its verdict line, as ``evalcli run`` prints them.
"""

from __future__ import annotations

import io
from collections.abc import Iterable

from rich.console import Console, RenderableType

from ..results import ItemResult, RunResult
from .terminal import aggregate_tables, summary_line
from .text import gate_rule
from .transcript import render_item


def plain_text(renderables: Iterable[RenderableType], width: int) -> str:
    """What ``renderables`` print on a terminal ``width`` columns wide, without colour; text is not wrapped."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, force_terminal=False, highlight=False,
                      markup=False, emoji=False, soft_wrap=True)
    for renderable in renderables:
        console.print(renderable)
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines())


def conversation_text(run: RunResult, item: ItemResult, width: int = 100) -> str:
    """One conversation, turn by turn, as ``evalcli show RUN ITEM`` prints it."""
    return plain_text([render_item(run, item)], width)


def verdict_text(run: RunResult, items: Iterable[ItemResult], db_path: str | None, width: int = 100) -> str:
    """The run's gates, scores (with thresholds) and turn results, then its verdict line, as ``evalcli run`` ends."""
    misses: dict[tuple[int, str], list[str]] = {}
    for item in items:
        for turn in item.turns:
            for gate_id, outcome in turn.gate_scores.items():
                if outcome.missed_gate and item.status == "ok":
                    misses.setdefault((turn.index, gate_id), []).append(item.id)
    return plain_text([*aggregate_tables(run.summary, misses, gate_rule(run)), summary_line(run, db_path)], width)
