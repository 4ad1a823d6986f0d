"""``evalcli diff``: two stored runs side by side, and whether the second is worse than the first."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .errors import UsageError
from .history import load_run, open_existing
from .report import VERDICT_STYLE, fmt
from .result import ItemResult, RunResult, Summary
from .store import Store

VERDICT_RANK = {None: 0, "passed": 0, "scored": 1, "failed": 2}


@dataclass(frozen=True)
class Change:
    """One figure in run A and run B; ``regressed`` when B is lower than A by more than the tolerance."""

    id: str
    a: float | None
    b: float | None
    regressed: bool

    @property
    def delta(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a


@dataclass
class ItemChange:
    """One conversation matched by item id across the two runs."""

    id: str
    passed_a: bool | None
    passed_b: bool | None
    scores: list[Change]

    @property
    def newly_failing(self) -> bool:
        return self.passed_a is True and self.passed_b is False


@dataclass
class RunDiff:
    """Run B against run A: scorer averages, gate scores, verdicts and per-item scores."""

    a: RunResult
    b: RunResult
    tolerance: float
    scorers: list[Change]
    gates: list[Change]
    items: list[ItemChange]
    regressions: list[str] = field(default_factory=list)
    """Why B is worse than A, one line each (empty when it is not)."""

    @property
    def exit_code(self) -> int:
        return 1 if self.regressions else 0


def item_passed(item: ItemResult) -> bool:
    """Status ok and every scorable gate (top level and per turn) at least 1."""
    return item.passed


def _changes(a: dict[str, float], b: dict[str, float], tolerance: float) -> list[Change]:
    ids = [*a, *(k for k in b if k not in a)]
    return [Change(k, a.get(k), b.get(k), _dropped(a.get(k), b.get(k), tolerance)) for k in ids]


def _dropped(a: float | None, b: float | None, tolerance: float) -> bool:
    if a is None or b is None or math.isnan(a):
        return False
    return math.isnan(b) or b < a - tolerance - 1e-12  # the epsilon keeps "exactly the tolerance" a pass


def _gate_scores(summary: Summary) -> dict[str, float]:
    scores = {g.id: g.score for g in summary.gate_results}
    for turn in summary.turn_results:
        scores.update({f"turn {turn.index}: {g.id}": g.score for g in turn.gate_results})
    return scores


def _item_changes(a: list[ItemResult], b: list[ItemResult], tolerance: float) -> list[ItemChange]:
    by_id_a, by_id_b = {item.id: item for item in a}, {item.id: item for item in b}
    ids = [*by_id_a, *(item_id for item_id in by_id_b if item_id not in by_id_a)]
    changes = []
    for item_id in ids:
        item_a, item_b = by_id_a.get(item_id), by_id_b.get(item_id)
        scores_a = {k: o.score for k, o in (item_a.scores if item_a else {}).items() if o.score is not None}
        scores_b = {k: o.score for k, o in (item_b.scores if item_b else {}).items() if o.score is not None}
        changes.append(ItemChange(item_id, item_passed(item_a) if item_a else None,
                                  item_passed(item_b) if item_b else None,
                                  _changes(scores_a, scores_b, tolerance)))
    return changes


def diff_runs(store: Store, run_a: str, run_b: str, tolerance: float = 0.0, *,
              allow_different: bool = False) -> RunDiff:
    """Compare run B with run A; ``regressions`` says why B is worse beyond ``tolerance`` (empty if not).

    Runs of different datasets are refused unless ``allow_different``; a conversation of A that B lacks
    is a regression.
    """
    if not (tolerance >= 0 and math.isfinite(tolerance)):
        raise UsageError(f"--tolerance {tolerance} must be a finite number >= 0", "write e.g. --tolerance 0.05")
    a, b = load_run(store, run_a), load_run(store, run_b)
    if a.result.dataset_id != b.result.dataset_id and not allow_different:
        raise UsageError(f"run {a.result.run_id} is of {a.result.dataset} but run {b.result.run_id} is of "
                         f"{b.result.dataset}: they are not runs of one dataset",
                         "compare runs of the same dataset, or pass --allow-different")
    diff = RunDiff(a.result, b.result, tolerance,
                   _changes(a.result.summary.scores, b.result.summary.scores, tolerance),
                   _changes(_gate_scores(a.result.summary), _gate_scores(b.result.summary), tolerance),
                   _item_changes(list(a.items()), list(b.items()), tolerance))
    for change in diff.scorers:
        if change.regressed:
            diff.regressions.append(f"scorer {change.id}: average {fmt(change.a)} -> {fmt(change.b)}")
    for change in diff.gates:
        if change.regressed:
            diff.regressions.append(f"gate {change.id}: score {fmt(change.a)} -> {fmt(change.b)}")
    if VERDICT_RANK[b.result.verdict] > VERDICT_RANK[a.result.verdict]:
        diff.regressions.append(f"verdict: {a.result.verdict or 'none'} -> {b.result.verdict}")
    diff.regressions.extend(f"item {item.id}: passed in A, fails in B" for item in diff.items if item.newly_failing)
    diff.regressions.extend(f"item {item.id}: in A, missing from B" for item in diff.items
                            if item.passed_a is not None and item.passed_b is None)
    return diff


def _cell(change: Change) -> Text:
    style = "bold red" if change.regressed else ("green" if (change.delta or 0) > 0 else "")
    return Text(f"{fmt(change.a)} -> {fmt(change.b)}", style=style)


def _pass_text(passed: bool | None) -> Text:
    if passed is None:
        return Text("-", style="dim")
    return Text("pass", style="green") if passed else Text("FAIL", style="bold red")


def render_diff(console: Console, diff: RunDiff, *, verbose: bool = False) -> None:
    """The diff as tables: aggregates side by side, then the items (changed ones unless verbose)."""
    console.print(Text.assemble(("A ", "bold"), (diff.a.run_id, "cyan"), f"  {diff.a.dataset}\n",
                                ("B ", "bold"), (diff.b.run_id, "cyan"), f"  {diff.b.dataset}"))
    for title, changes in (("Scorer averages", diff.scorers), ("Gate scores (each must average >= 1.0)", diff.gates)):
        if not changes:
            continue
        table = Table(title=title, title_justify="left")
        for column in ("id", "A", "B", "delta"):
            table.add_column(column, justify="left" if column == "id" else "right")
        for c in changes:
            delta = "-" if c.delta is None else f"{c.delta:+.3f}"
            table.add_row(c.id, fmt(c.a), fmt(c.b), Text(delta, style="bold red" if c.regressed else ""))
        console.print(table)
    verdict = Text("verdict: ")
    verdict.append(diff.a.verdict or "none", style=VERDICT_STYLE.get(diff.a.verdict or "", ""))
    verdict.append(" -> ")
    verdict.append(diff.b.verdict or "none", style=VERDICT_STYLE.get(diff.b.verdict or "", ""))
    console.print(verdict)
    console.print(_items_table(diff, verbose))
    for line in diff.regressions:
        console.print(Text.assemble(("  regression ", "bold red"), line), soft_wrap=True)
    tolerance = f" (tolerance {fmt(diff.tolerance)})" if diff.tolerance else ""
    console.print(f"B is worse than A{tolerance}: exit 1" if diff.regressions
                  else f"B is not worse than A{tolerance}: exit 0")


def _items_table(diff: RunDiff, verbose: bool) -> Table:
    scorer_ids = [c.id for c in diff.scorers]
    table = Table(title="Conversations (A -> B)", title_justify="left")
    for column in ("item", "A", "B", *scorer_ids):
        table.add_column(column)
    hidden = 0
    for item in diff.items:
        changed = item.passed_a != item.passed_b or any(c.a != c.b for c in item.scores)
        if not (verbose or changed):
            hidden += 1
            continue
        by_id = {c.id: c for c in item.scores}
        table.add_row(Text(item.id, style="bold red" if item.newly_failing else ""), _pass_text(item.passed_a),
                      _pass_text(item.passed_b),
                      *(_cell(by_id[s]) if s in by_id else Text("-", style="dim") for s in scorer_ids))
    if hidden:
        table.caption = f"{hidden} unchanged conversations not shown (--verbose shows all)"
    return table


def diff_command(db: Path, run_a: str, run_b: str, tolerance: float, verbose: bool, out: Console, *,
                 allow_different: bool = False) -> int:
    """``evalcli diff``: print the comparison and return its exit code (1 when B is worse than A)."""
    store = open_existing(db)
    try:
        diff = diff_runs(store, run_a, run_b, tolerance, allow_different=allow_different)
    finally:
        store.close()
    render_diff(out, diff, verbose=verbose)
    return diff.exit_code
