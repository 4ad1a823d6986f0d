"""Rendering a run: the rich tables and the JSON file. Pure functions of a result; nothing is computed here."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .result import ItemResult, RunResult, Summary
from .secrets import Redactor

VERDICT_STYLE = {"passed": "bold green", "scored": "bold yellow", "failed": "bold red"}
MAX_ROWS = 50


def fmt(score: float | None) -> str:
    if score is None:
        return "-"
    if not math.isfinite(score):
        return str(score)
    return f"{score:.3f}".rstrip("0").rstrip(".") if score != int(score) else f"{score:.0f}"


def threshold_text(raw: Any) -> str:
    """``>= 0.8`` for a minimum, ``0.3..0.9`` / ``<= 0.9`` for bounds."""
    if isinstance(raw, dict):
        low, high = raw.get("min"), raw.get("max")
        if low is not None and high is not None:
            return f"{fmt(low)}..{fmt(high)}"
        return f">= {fmt(low)}" if low is not None else f"<= {fmt(high)}"
    return f">= {fmt(raw)}"


def _mark(passed: bool) -> Text:
    return Text("pass", style="green") if passed else Text("FAIL", style="bold red")


def items_table(items: Iterable[ItemResult], scorer_ids: list[str], gate_ids: list[str], *, verbose: bool,
                total: int) -> tuple[Table, int]:
    """One row per conversation (at most ``MAX_ROWS`` unless verbose, errors and gate failures always shown)."""
    table = Table(title="Conversations", title_justify="left", show_lines=False)
    for name, justify in (("item", "left"), ("form", "left"), ("turns", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for scorer_id in scorer_ids:
        table.add_column(_short(scorer_id), justify="right")
    if gate_ids:
        table.add_column("gates", justify="right")
    table.add_column("status")
    shown = 0
    for item in items:
        if not verbose and shown >= MAX_ROWS and item.passed:
            continue
        shown += 1
        cells: list[Any] = [item.id, item.form, str(len(item.turns))]
        for scorer_id in scorer_ids:
            outcome = item.scores.get(scorer_id)
            cells.append("n/s" if outcome is not None and outcome.not_scorable else fmt(outcome.score if outcome else None))
        if gate_ids:
            scorable = sum(1 for o in item.gate_scores.values() if not o.not_scorable)
            passed = scorable - sum(1 for o in item.gate_scores.values() if o.missed_gate)
            cells.append(Text(f"{passed}/{scorable}", style="green" if passed == scorable else "red"))
        cells.append(Text("ok", style="green") if item.status == "ok" else Text("error", style="bold red"))
        table.add_row(*cells)
    return table, total - shown


def _short(text: str, width: int = 28) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def aggregate_tables(summary: Summary) -> list[Table]:
    tables = []
    if summary.gate_results:
        gates = Table(title="Gates (each must average >= 1.0)", title_justify="left")
        for column in ("gate", "score", ""):
            gates.add_column(column)
        for gate in summary.gate_results:
            gates.add_row(gate.id, fmt(gate.score), _mark(gate.passed))
        tables.append(gates)
    if summary.threshold_results or summary.scores:
        scores = Table(title="Scores (mean over conversations)", title_justify="left")
        for column in ("scorer", "mean", "threshold", ""):
            scores.add_column(column)
        thresholds = {t.id: t for t in summary.threshold_results}
        for scorer_id, mean in summary.scores.items():
            result = thresholds.get(scorer_id)
            scores.add_row(scorer_id, fmt(mean), threshold_text(result.threshold) if result else "",
                           _mark(result.passed) if result else "")
        tables.append(scores)
    if summary.turn_results:
        turns = Table(title="Turn results (mean per turn index across conversations)", title_justify="left")
        for column in ("turn", "gates", "thresholds", "scores"):
            turns.add_column(column)
        for turn in summary.turn_results:
            gates_text = Text()
            for g in turn.gate_results:
                gates_text.append(f"{g.id}={fmt(g.score)} ", style="green" if g.passed else "bold red")
            thresholds_text = Text()
            for t in turn.threshold_results:
                thresholds_text.append(f"{t.id}={fmt(t.average_score)} ({threshold_text(t.threshold)}) ",
                                       style="green" if t.passed else "bold red")
            turns.add_row(str(turn.index), gates_text, thresholds_text,
                          " ".join(f"{k}={fmt(v)}" for k, v in turn.scores.items()))
        tables.append(turns)
    return tables


def render_run(console: Console, result: RunResult, items: Iterable[ItemResult], *, scorer_ids: list[str],
               gate_ids: list[str], verbose: bool = False, db_path: str | None = None) -> None:
    """The whole terminal report of one run."""
    summary = result.summary
    console.print()
    console.print(Text.assemble(("Run ", "bold"), (result.run_id, "cyan"), f"  {result.dataset}  ->  {result.target}"))
    errors: list[ItemResult] = []
    gate_errors: list[str] = []

    def remember_errors(stream: Iterable[ItemResult]) -> Iterable[ItemResult]:
        for item in stream:
            if item.status != "ok":
                errors.append(item)
            gate_errors.extend(f"{item.id}: gate {gate_id} raised (scored 0): {o.error}"
                               for gate_id, o in item.gate_scores.items() if o.error)
            gate_errors.extend(f"{item.id} turn {t.index}: gate {gate_id} raised (scored 0): {o.error}"
                               for t in item.turns for gate_id, o in t.gate_scores.items() if o.error)
            yield item

    table, hidden = items_table(remember_errors(items), scorer_ids, gate_ids, verbose=verbose, total=result.completed)
    console.print(table)
    if hidden > 0:
        console.print(f"  ... {hidden} more passing conversations (--verbose shows all; "
                      f"'evalcli show {result.run_id}' later)")
    for item in errors[:20]:
        console.print(Text.assemble(("  error ", "bold red"), (f"{item.id}: ", "bold"), item.error or ""))
    for line in gate_errors[:20]:
        console.print(Text.assemble(("  gate error ", "bold yellow"), line))
    for table in aggregate_tables(summary):
        console.print(table)
    console.print(summary_line(result, db_path))


def summary_line(result: RunResult, db_path: str | None) -> Text:
    summary = result.summary
    text = Text()
    if result.status == "interrupted":
        text.append("INTERRUPTED ", style="bold red")
        text.append(f"after {result.completed} of {result.selected} conversations; "
                    f"continue with: evalcli run {result.dataset} --resume {result.run_id}\n")
    text.append("verdict: ")
    text.append(summary.verdict or "none (no gate or threshold results)", style=VERDICT_STYLE.get(summary.verdict or "", ""))
    text.append(f"   conversations: {summary.total_items}   errors: {summary.errors}")
    if summary.not_scorable:
        text.append(f"   not scorable: {sum(summary.not_scorable.values())}")
    if result.pass_at_k:
        text.append("\npass@k (share of conversations where a gate passed in at least one of the --repeat plays): " +
                    ", ".join(f"{g}={fmt(v)}" for g, v in result.pass_at_k.items()))
    usage = result.usage
    if usage.get("calls"):
        text.append(f"\nLLM calls: {usage['calls']} (cache hits: {usage['cache_hits']})   tokens: "
                    f"{usage['prompt_tokens']} in / {usage['completion_tokens']} out   cost: ${usage['cost']:.4f}")
    if db_path:
        text.append(f"\nstored in {db_path} (run {result.run_id})", style="dim")
    text.append(f"   exit code {result.exit_code}", style="dim")
    return text


def write_json(result: RunResult, items: Iterable[ItemResult], destination: str, redact: Redactor) -> None:
    """The JSON result of SPEC §7 to a file, or to stdout for ``-``; items are streamed, not held."""
    head = result.to_json(items=[])
    head.pop("items")
    out: TextIO = sys.stdout if destination == "-" else Path(destination).open("w", encoding="utf-8")
    try:
        body = json.dumps(head, ensure_ascii=False, indent=2)
        out.write(redact(body[:-2]) + ',\n  "items": [')
        for n, item in enumerate(items):
            out.write(("," if n else "") + "\n    " + redact(json.dumps(item.to_json(), ensure_ascii=False, default=str)))
        out.write("\n  ]\n}\n")
    finally:
        if out is not sys.stdout:
            out.close()
