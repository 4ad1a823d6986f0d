"""Runs side by side for people (``evalcli compare``, ``evalcli run`` with several ``--target``s): a row per
scorer and gate, a column per run, then the conversations whose gates differ."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..llm import PURPOSES
from ..results import finite_or_none
from ..store import Cell, Column, Comparison, PairedStats
from .ci import markdown_text
from .paired import stats_markdown, stats_renderable
from .text import DATASETS_DIFFER, fmt, threshold_text, verdict_style, verdict_words

STATE_STYLE = {"pass": "green", "FAIL": "bold red", "error": "bold red", "ok": "green", "n/a": "dim", "-": "dim"}
MAX_DIFFERENCES = 50


def cell_text(cell: Cell, role: str) -> Text:
    """A scorer's mean (``pass``/``FAIL`` against its threshold), or a gate's passes of its scorable conversations."""
    if role == "gate":
        if not cell.scorable:
            return Text("n/a", style="dim")
        text = Text(f"{cell.passes}/{cell.scorable}")
    else:
        if cell.value is None:
            return Text("-", style="dim")
        text = Text(fmt(cell.value))
    if cell.passed is not None:
        text.append(" pass" if cell.passed else " FAIL", style="green" if cell.passed else "bold red")
    return text


def seconds_text(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:.1f} s" if seconds < 600 else f"{seconds / 60:.1f} min"


def cost_text(cost: float) -> str:
    return f"${cost:.4f}"


def usage_rows(columns: list[Column]) -> list[tuple[str, list[str]]]:
    """Tokens and cost per purpose (target always; simulator and judge when a run made such calls), then all."""
    rows = []
    for purpose in PURPOSES:
        figures = [c.purpose(purpose) for c in columns]
        if purpose == "target" or any(tokens or cost for tokens, cost in figures):
            rows.append((f"{purpose} tokens", [f"{tokens:,}" for tokens, _ in figures]))
            rows.append((f"{purpose} cost", [cost_text(cost) for _, cost in figures]))
    rows.append(("all LLM cost", [cost_text(c.cost) for c in columns]))
    return rows


def comparison_table(comparison: Comparison) -> Table:
    """The table: scorers (means) and gates (passes), then verdict, conversations, errors, tokens, cost, wall time."""
    count = len(comparison.columns)
    table = Table(title=f"Comparison of {count} runs of {comparison.dataset}", title_justify="left")
    table.add_column("", no_wrap=True)
    for column in comparison.columns:
        table.add_column(Text.assemble((column.label, "bold"), "\n", (column.run.run_id, "dim")), justify="right",
                         overflow="fold")
    for row in comparison.rows:
        label = f"{row.role} {row.id}" + (f" ({threshold_text(row.threshold)})" if row.threshold is not None else "")
        table.add_row(label, *(cell_text(cell, row.role) for cell in row.cells))
    table.add_section()
    columns = comparison.columns
    table.add_row("verdict", *(_verdict(c) for c in columns))
    table.add_row("conversations", *(str(c.run.summary.total_items) for c in columns))
    table.add_row("errors", *(Text(str(c.run.summary.errors), style="bold red" if c.run.summary.errors else "")
                              for c in columns))
    for label, texts in usage_rows(columns):
        table.add_row(label, *texts)
    table.add_row("wall time", *(seconds_text(c.seconds) for c in columns))
    return table


def _verdict(column: Column) -> Text:
    return Text(verdict_words(column.run), style=verdict_style(column.run))


def changed_line(comparison: Comparison) -> str:
    """The conversations whose id names other content in some run, listed apart from the gates that differ."""
    shown = ", ".join(comparison.changed[:MAX_DIFFERENCES]) + (", ..." if len(comparison.changed) > MAX_DIFFERENCES
                                                               else "")
    return f"changed (the same id, other content; neither regressed nor fixed): {shown}"


def differences_table(comparison: Comparison) -> Table | None:
    """Per conversation, the gates (and statuses) that read differently across the runs; ``None`` when none do."""
    if not comparison.differences:
        return None
    table = Table(title="Conversations whose gates differ", title_justify="left")
    table.add_column("item", no_wrap=True)
    table.add_column("gate")
    for column in comparison.columns:
        table.add_column(column.run.run_id[:10], justify="center")
    for difference in comparison.differences[:MAX_DIFFERENCES]:
        table.add_row(difference.name, difference.gate,
                      *(Text(state, style=STATE_STYLE.get(state, "")) for state in difference.states))
    hidden = len(comparison.differences) - MAX_DIFFERENCES
    if hidden > 0:
        table.caption = f"{hidden} more not shown (evalcli compare ... --html PATH shows every conversation)"
    return table


def render_comparison(console: Console, comparison: Comparison, *, differences: bool = True) -> None:
    """The comparison table, (with ``differences``) the conversations whose gates differ, and with statistics
    each later run against the first."""
    if comparison.datasets_differ:
        console.print(DATASETS_DIFFER, style="yellow", soft_wrap=True)
    console.print(comparison_table(comparison))
    if comparison.changed:
        console.print(changed_line(comparison), style="yellow", soft_wrap=True)
    if differences:
        table = differences_table(comparison)
        if table is None:
            console.print("No conversation's gates differ between these runs.")
        else:
            console.print(table)
    for title, stats in paired_sections(comparison):
        console.print(stats_renderable(stats, title) if stats is not None
                      else Text(f"{title}: no conversation in both runs", style="dim"), soft_wrap=True)
    for line in comparison.significant():
        console.print(Text.assemble(("  significant regression ", "bold red"), line), soft_wrap=True)
    if comparison.alpha is not None:
        alpha = comparison.alpha
        better = [c.run.run_id for c, stats in zip(comparison.columns[1:], comparison.paired, strict=False)
                  if stats is not None and stats.improved(alpha)]
        console.print(f"a later run is worse than the first beyond the noise (alpha {alpha:g}): exit 1"
                      if comparison.significant() else
                      f"no later run is significantly worse than the first (alpha {alpha:g})"
                      f"{'; better beyond the noise: ' + ', '.join(better) if better else ''}: exit 0")


def paired_sections(comparison: Comparison) -> list[tuple[str, PairedStats | None]]:
    """(title, statistics) of each later run against the first."""
    first = comparison.columns[0]
    return [(f"Paired statistics: {c.label} ({c.run.run_id}) - {first.label} ({first.run.run_id})", stats)
            for c, stats in zip(comparison.columns[1:], comparison.paired, strict=False)]


def compare_json(comparison: Comparison) -> dict[str, Any]:
    """``evalcli compare --json``: the runs, a row per scorer and gate (one value per run), the conversations whose
    gates differ, and each later run's paired statistics against the first."""
    first = comparison.columns[0].run.run_id
    return {
        "dataset": comparison.dataset,
        "runs": [{"run_id": c.run.run_id, "target": c.label, "verdict": c.run.verdict,
                  "conversations": c.run.summary.total_items, "errors": c.run.summary.errors} for c in comparison.columns],
        "rows": [{"role": r.role, "id": r.id, "values": [finite_or_none(cell.value) for cell in r.cells],
                  "passed": [cell.passed for cell in r.cells]} for r in comparison.rows],
        "differences": [{"item": d.name, "identity": d.identity, "gate": d.gate, "states": d.states}
                        for d in comparison.differences],
        "statistics": [{"a": first, "b": c.run.run_id, **(stats.to_json(comparison.alpha) if stats else {})}
                       for c, stats in zip(comparison.columns[1:], comparison.paired, strict=False)],
        "alpha": comparison.alpha, "significant_regressions": comparison.significant(),
        "exit_code": comparison.regression_exit_code,
    }


def compare_markdown(comparison: Comparison) -> str:
    """``evalcli compare --markdown``: what the terminal prints (docs/history.md#comparing-runs): the figures per run
    (the verdict in the words every report uses, the conversations and errors), the conversations whose gates differ,
    named by id or content, then each later run's paired statistics."""
    columns = comparison.columns
    lines = [f"### evalcli compare: {len(columns)} runs of `{comparison.dataset}`", ""]
    if comparison.datasets_differ:
        lines += [markdown_text(DATASETS_DIFFER), ""]
    lines += ["| | " + " | ".join(f"{c.label} `{c.run.run_id}`" for c in columns) + " |",
              "|---|" + "---:|" * len(columns)]
    for row in comparison.rows:
        cells = [cell_text(cell, row.role).plain for cell in row.cells]
        lines.append(f"| {row.role} {markdown_text(row.id)} | " + " | ".join(cells).replace("\n", " ") + " |")
    lines.append("| verdict | " + " | ".join(markdown_text(verdict_words(c.run)) for c in columns) + " |")
    lines.append("| conversations | " + " | ".join(str(c.run.summary.total_items) for c in columns) + " |")
    lines.append("| errors | " + " | ".join(str(c.run.summary.errors) for c in columns) + " |")
    lines.append("")
    if comparison.changed:
        lines += [markdown_text(changed_line(comparison)), ""]
    if comparison.differences:
        lines += ["#### Conversations whose gates differ", "",
                  "| item | gate | " + " | ".join(f"`{c.run.run_id[:10]}`" for c in columns) + " |",
                  "|---|---|" + ":---:|" * len(columns)]
        lines += [f"| {markdown_text(d.name)} | {markdown_text(d.gate)} | " + " | ".join(d.states) + " |"
                  for d in comparison.differences[:MAX_DIFFERENCES]]
        hidden = len(comparison.differences) - MAX_DIFFERENCES
        lines += ["", f"{hidden} more not shown (evalcli compare ... --html PATH shows every conversation)"] \
            if hidden > 0 else []
        lines.append("")
    else:
        lines += ["No conversation's gates differ between these runs.", ""]
    for title, stats in paired_sections(comparison):
        lines += stats_markdown(stats, f"#### {title}") if stats is not None else [f"#### {title}", "",
                                                                                   "no conversation in both runs", ""]
    lines += [f"- **significant regression**: {markdown_text(line)}" for line in comparison.significant()]
    return "\n".join(lines) + "\n"
