"""``evalcli compare ... --html PATH``: runs of one dataset side by side as one self-contained page (docs/targets/http.md).

The comparison table as the terminal shows it, the conversations whose gates differ, then every
conversation with each run's transcript in a column of its own (as ``show`` prints them: user messages,
the assistant's words, tool calls and results, gates and scorers with their reasons). Rendered on the
server from autoescaped jinja2 templates; the page runs no script and loads nothing.
"""

from __future__ import annotations

from secrets import token_urlsafe
from typing import Any

from ...secrets import Redactor
from ...store import Comparison
from ...version import __version__
from ..compare import cell_text, changed_line, cost_text, paired_sections, seconds_text, usage_rows
from ..paired import HEADERS, detectable_line, figure_rows, pass_fail_line, status_line
from ..text import DATASETS_DIFFER, threshold_text, verdict_words
from .conversation import status_word, transcript
from .page import asset, environment


def comparison_page(comparison: Comparison, redact: Redactor | None = None) -> str:
    """The page as HTML text (secrets redacted from every value first)."""
    redact = redact or Redactor()
    columns = [{"label": c.label, "run_id": c.run.run_id, "verdict": verdict_words(c.run),
                "outcome": c.run.outcome, "total": c.run.summary.total_items,
                "errors": c.run.summary.errors, "tokens": f"{c.target_tokens:,}", "target_cost": cost_text(c.target_cost),
                "cost": cost_text(c.cost), "seconds": seconds_text(c.seconds)} for c in comparison.columns]
    usage = [{"label": label, "cells": texts} for label, texts in usage_rows(comparison.columns)]
    rows = [{"label": f"{r.role} {r.id}" + (f" ({threshold_text(r.threshold)})" if r.threshold is not None else ""),
             "cells": [_cell(cell_text(cell, r.role).plain) for cell in r.cells]} for r in comparison.rows]
    # a conversation is matched by its identity, never by the id or position it has in one run
    differing = {d.identity for d in comparison.differences}
    anchors = {key: f"c-{n}" for n, key in enumerate(comparison.identities)}
    conversations = []
    for key, results in zip(comparison.identities, comparison.items, strict=True):
        conversations.append({
            "name": comparison.names[key], "anchor": anchors[key], "differs": key in differing,
            "statuses": [status_word(r) if r is not None else "missing" for r in results],
            "transcripts": [transcript(r) if r is not None else None for r in results],
        })
    data: dict[str, Any] = redact.value({
        "dataset": comparison.dataset, "columns": columns, "rows": rows, "usage": usage,
        "differences": [{"item": d.name, "anchor": anchors[d.identity], "gate": d.gate, "states": d.states}
                        for d in comparison.differences],
        "conversations": conversations, "paired": _paired(comparison), "headers": list(HEADERS),
        "significant": comparison.significant(), "alpha": comparison.alpha,
        "datasets_differ": DATASETS_DIFFER if comparison.datasets_differ else "",
        "changed": changed_line(comparison) if comparison.changed else "",
    })
    template = environment().get_template("compare.html.j2")
    return template.render(**data, css=asset("report.css"), nonce=token_urlsafe(16), version=__version__)


def _paired(comparison: Comparison) -> list[dict[str, Any]]:
    """Each later run's paired statistics against the first, as the terminal words them (docs/history.md)."""
    sections = []
    for title, stats in paired_sections(comparison):
        if stats is None:
            sections.append({"title": title, "none": True})
            continue
        figures = [*stats.figures, *([stats.rates] if stats.rates else [])]
        sections.append({
            "title": title, "none": False, "pass_fail": pass_fail_line(stats.pass_fail),
            "rows": [{"cells": list(row), "below": f.difference.below_zero}
                     for row, f in zip(figure_rows(stats), figures, strict=True)],
            "detectable": [detectable_line(d) for d in stats.detectable], "status": status_line(stats) or "",
            "left_out": f"{stats.only_a} conversation(s) only in the first run, {stats.only_b} only in this one"
            if stats.only_a or stats.only_b else "",
        })
    return sections


def _cell(text: str) -> dict[str, str]:
    """A table cell's text and its class (``pass``/``fail`` by its last word)."""
    last = text.rsplit(" ", 1)[-1]
    return {"text": text, "class": "pass" if last == "pass" else "fail" if last == "FAIL" else ""}
