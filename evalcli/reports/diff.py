"""``evalcli diff`` for people: two runs side by side, the conversations that changed, and each regression."""

from __future__ import annotations

from typing import Any

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from ..results import finite_or_none
from ..store import Change, RunDiff
from .ci import markdown_text
from .paired import stats_markdown, stats_renderable
from .text import DATASETS_DIFFER, MAX_FAILING, MAX_TABLE, fmt, plural, titled, verdict_style, verdict_words


def _cell(change: Change) -> Text:
    style = "bold red" if change.regressed else ("green" if (change.delta or 0) > 0 else "")
    return Text(f"{fmt(change.a)} -> {fmt(change.b)}", style=style)


def _pass_text(passed: bool | None, status: str | None) -> Text:
    """``pass``/``FAIL``, the status of a conversation that did not play out (``error``, ``limited``), ``-`` when
    the run lacks it."""
    if passed is None:
        return Text("-", style="dim")
    if status not in (None, "ok"):
        return Text(str(status), style="bold red")
    return Text("pass", style="green") if passed else Text("FAIL", style="bold red")


def render_diff(console: Console, diff: RunDiff, *, verbose: bool = False) -> None:
    """The diff as tables: aggregates side by side, then the items (changed ones unless verbose)."""
    if diff.datasets_differ:
        console.print(DATASETS_DIFFER, style="yellow", soft_wrap=True)
    console.print(Text.assemble(("A ", "bold"), (diff.a.run_id, "cyan"), f"  {diff.a.dataset_path}\n",
                                ("B ", "bold"), (diff.b.run_id, "cyan"), f"  {diff.b.dataset_path}"))
    for title, changes in (("Scorer averages", diff.scorers), ("Gate scores (each must average >= 1.0)", diff.gates)):
        if not changes:
            continue
        table = Table()
        table.add_column("id", no_wrap=True)
        for column in ("A", "B", "delta"):
            table.add_column(column, justify="right")
        for c in changes:
            delta = "-" if c.delta is None else f"{c.delta:+.3f}"
            table.add_row(c.id, fmt(c.a), fmt(c.b), Text(delta, style="bold red" if c.regressed else ""))
        console.print(titled(title, table))
    verdict = Text("verdict: ")  # the one verdict label: "passed on 3 of 4 conversations; 1 errored"
    verdict.append(verdict_words(diff.a), style=verdict_style(diff.a))
    verdict.append(" -> ")
    verdict.append(verdict_words(diff.b), style=verdict_style(diff.b))
    console.print(verdict, soft_wrap=True)
    console.print(_items_table(diff, verbose, console.width))
    if diff.stats is not None:
        console.print(stats_renderable(diff.stats), soft_wrap=True)
    judged = diff.judged_by_significance
    shown, cut = capped_regressions(diff.regressions)
    for line in shown:
        label = "  change " if judged else "  regression "
        console.print(Text.assemble((label, "yellow" if judged else "bold red"), line), soft_wrap=True)
    if cut:
        console.print(f"  ... {plural(cut, 'more conversation')} passed in A and fail in B or are missing from B, not "
                      "listed (--json - lists every one)", soft_wrap=True)
    for line in diff.significant:
        console.print(Text.assemble(("  significant regression ", "bold red"), line), soft_wrap=True)
    console.print(verdict_line(diff), soft_wrap=True)


def capped_regressions(lines: list[str]) -> tuple[list[str], int]:
    """The regression lines the terminal prints: every figure's and the verdict's, and the first ``MAX_FAILING``
    conversations' (two runs of 100,000 may have tens of thousands: docs/history.md#big-runs); and how many it cut."""
    items = [line for line in lines if line.startswith("item ")]
    kept = set(items[:MAX_FAILING])
    return [line for line in lines if not line.startswith("item ") or line in kept], max(0, len(items) - MAX_FAILING)


def verdict_line(diff: RunDiff) -> str:
    """The last line: whether B is worse than A and the exit code that says so."""
    if diff.judged_by_significance:
        alpha = f"(alpha {diff.alpha:g})"
        if diff.exit_code:
            return f"B is worse than A beyond the noise {alpha}: exit 1"
        better = diff.stats is not None and diff.alpha is not None and diff.stats.improved(diff.alpha)
        return f"B is {'better than A beyond the noise' if better else 'not significantly worse than A'} {alpha}: exit 0"
    tolerance = f" (tolerance {fmt(diff.tolerance)})" if diff.tolerance else ""
    return f"B is worse than A{tolerance}: exit 1" if diff.regressions else f"B is not worse than A{tolerance}: exit 0"


def diff_json(diff: RunDiff) -> dict[str, Any]:
    """``evalcli diff --json``: the two runs, each figure A -> B, the conversations, the regressions, the paired
    statistics and the exit code."""
    def changes(found: list[Change]) -> list[dict[str, Any]]:
        return [{"id": c.id, "a": finite_or_none(c.a), "b": finite_or_none(c.b), "regressed": c.regressed}
                for c in found]

    return {"a": diff.a.run_id, "b": diff.b.run_id, "dataset_a": diff.a.dataset_path,
            "dataset_b": diff.b.dataset_path, "verdict_a": diff.a.verdict, "verdict_b": diff.b.verdict,
            "tolerance": diff.tolerance, "scorers": changes(diff.scorers), "gates": changes(diff.gates),
            "items": [{"id": i.id, "name": i.name, "passed_a": i.passed_a, "passed_b": i.passed_b,
                       "status_a": i.status_a, "status_b": i.status_b, "scores": changes(i.scores)} for i in diff.items],
            "regressions": diff.regressions, "alpha": diff.alpha, "significant_regressions": diff.significant,
            "statistics": diff.stats.to_json(diff.alpha) if diff.stats is not None else None,
            "exit_code": diff.exit_code}


def diff_markdown(diff: RunDiff) -> str:
    """``evalcli diff --markdown``: the verdicts, the regressions and the paired statistics."""
    lines = [f"### evalcli diff `{diff.a.run_id}` -> `{diff.b.run_id}` ({diff.b.dataset_path})", "",
             f"verdict: {verdict_words(diff.a)} -> {verdict_words(diff.b)}", ""]
    judged = diff.judged_by_significance
    lines += [f"- {'change' if judged else 'regression'}: {markdown_text(line)}" for line in diff.regressions]
    lines += [f"- **significant regression**: {markdown_text(line)}" for line in diff.significant]
    if diff.regressions or diff.significant:
        lines.append("")
    if diff.stats is not None:
        lines += stats_markdown(diff.stats)
    lines += [f"**{verdict_line(diff)}**", ""]
    return "\n".join(lines)


def _items_table(diff: RunDiff, verbose: bool, width: int) -> RenderableType:
    """The conversations that changed (all with ``verbose``); only a line when none did: no empty table. An id is
    whole on its line when it fits in the console less 20 columns, else folded into half its width: a
    3,000-character id left A, B and the scores no room."""
    scorer_ids = [c.id for c in diff.scorers]
    table = Table()
    widest = max((len(item.name) for item in diff.items), default=4)
    whole = widest <= width - 20
    room = widest if whole else max(10, width // 2)
    table.add_column("item", no_wrap=whole, overflow="fold", min_width=room, max_width=None if whole else room)
    for column in ("A", "B", *scorer_ids):
        table.add_column(column, overflow="fold")
    hidden = cut = 0
    cap = MAX_TABLE * 5 if verbose else MAX_TABLE
    for item in diff.items:
        changed = (item.changed or item.passed_a != item.passed_b or item.status_a != item.status_b
                   or any(c.moved for c in item.scores))
        if not (verbose or changed):
            hidden += 1
            continue
        if table.row_count >= cap:
            cut += 1
            continue
        by_id = {c.id: c for c in item.scores}
        label = f"{item.name} (changed)" if item.changed else item.name
        table.add_row(Text(label, style="bold red" if item.newly_failing else "yellow" if item.changed else ""),
                      _pass_text(item.passed_a, item.status_a),
                      _pass_text(item.passed_b, item.status_b),
                      *(_cell(by_id[s]) if s in by_id else Text("-", style="dim") for s in scorer_ids))
    notes = [f"{plural(hidden, 'unchanged conversation')} not shown (--verbose shows all)"] if hidden else []
    if cut:
        notes.append(f"{plural(cut, 'more conversation')} not listed: the table stops at {cap} rows (--json - lists "
                     "every one)")
    edited = sum(1 for item in diff.items if item.changed)
    if edited:
        notes.append(f"{plural(edited, 'conversation')} changed: the same id, other content (neither regressed nor "
                     "fixed)")
    note = "; ".join(notes)
    if not table.row_count:
        return Text(f"Conversations (A -> B): {note or 'none'}", style="italic")
    return titled("Conversations (A -> B)", table, note)
