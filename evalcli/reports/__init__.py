"""Every rendering of results (docs/reference/json.md, docs/reference/cli.md, docs/html-report.md): the terminal table,
transcripts, JSON, JUnit and Markdown, run
history, diffs, and the HTML report (``reports.html``, imported only when asked for: it needs jinja2).

Reports are fed a run's conversations once, in dataset order (``deliver``), and never compute what the result
does not hold. This package and ``evalcli.cli`` are the only ones that import rich.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports
from .files import per_dataset
from .json import JsonReport, JsonSpool, JsonStream, Report, deliver
from .terminal import TerminalReport, aggregate_tables, interrupted_line, summary_line, verdict_line
from .text import (
                   NOT_SCORABLE,
                   VERDICT_STYLE,
                   fmt,
                   missed_gates,
                   one_line,
                   plural,
                   threshold_text,
                   titled,
                   verdict_words,
                   why_failed,
)

if TYPE_CHECKING:
    from .ci import JUnitSuite, MarkdownSummary, junit_document
    from .compare import compare_json, compare_markdown, comparison_table, render_comparison
    from .diff import diff_json, diff_markdown, render_diff
    from .history import merge_lines, runs_table
    from .plain import conversation_text, plain_text, verdict_text
    from .transcript import item_document, render_item

# what a run does not use, imported when first asked for (evalcli/lazy.py); the CI files' (JUnit XML and its
# xml.etree, Markdown) only by a run that writes them; transcripts and plain text (and rich) only where shown
__getattr__ = lazy_exports(__name__, {
    ".plain": ("conversation_text", "plain_text", "verdict_text"),
    ".transcript": ("item_document", "render_item"),
    ".ci": ("JUnitSuite", "MarkdownSummary", "junit_document"),
    ".compare": ("compare_json", "compare_markdown", "comparison_table", "render_comparison"),
    ".diff": ("diff_json", "diff_markdown", "render_diff"),
    ".history": ("merge_lines", "runs_table"),
})

__all__ = [
                   "NOT_SCORABLE",
                   "VERDICT_STYLE",
                   "JUnitSuite",
                   "JsonReport",
                   "JsonSpool",
                   "JsonStream",
                   "MarkdownSummary",
                   "Report",
                   "TerminalReport",
                   "aggregate_tables",
                   "compare_json",
                   "compare_markdown",
                   "comparison_table",
                   "conversation_text",
                   "deliver",
                   "diff_json",
                   "diff_markdown",
                   "fmt",
                   "interrupted_line",
                   "item_document",
                   "junit_document",
                   "merge_lines",
                   "missed_gates",
                   "one_line",
                   "per_dataset",
                   "plain_text",
                   "plural",
                   "render_comparison",
                   "render_diff",
                   "render_item",
                   "runs_table",
                   "summary_line",
                   "threshold_text",
                   "titled",
                   "verdict_line",
                   "verdict_text",
                   "verdict_words",
                   "why_failed",
]
