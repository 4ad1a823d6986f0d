"""Run history: list stored runs, load one back as a ``RunResult``, diff two runs, merge shard databases.

Everything here reads what ``Store`` wrote. A stored run's aggregate (``runs.result``) is the SPEC §7
JSON of its summary; a merged run's aggregate is recomputed with ``Aggregator`` from the per-item
results in dataset order, so sharded-then-merged gives exactly what one unsharded run gives.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .aggregate import Aggregator, Plan, exit_code
from .errors import StoreError, UsageError
from .ids import new_run_id
from .report import VERDICT_STYLE, fmt, render_run, write_json
from .result import GateResult, ItemResult, RunResult, Summary, ThresholdResult, TurnResult
from .secrets import Redactor
from .store import Store, now

COPIED_TABLES = ("items", "turns", "scores", "llm_calls")
"""Per-item tables copied into a merged run, parents first (turns and scores reference items)."""
VERDICT_RANK = {None: 0, "passed": 0, "scored": 1, "failed": 2}


def open_existing(path: str | Path) -> Store:
    """Open a database that must already exist (reading history never creates an empty file)."""
    if not Path(path).is_file():
        raise StoreError(f"no database at {path}", "pass --db PATH of a file written by 'evalcli run'")
    return Store(path)


# -- loading a stored run ------------------------------------------------------------------------


def _float(value: Any) -> float:
    """A JSON score back to a float (non-finite scores were written as null)."""
    return math.nan if value is None else float(value)


def summary_from_json(data: dict[str, Any]) -> Summary:
    """Rebuild a ``Summary`` from the aggregate JSON of SPEC §7 (as stored in ``runs.result``)."""
    def gates(rows: list[dict[str, Any]]) -> list[GateResult]:
        return [GateResult(g["id"], g["passed"], _float(g["score"])) for g in rows]

    def thresholds(rows: list[dict[str, Any]]) -> list[ThresholdResult]:
        return [ThresholdResult(t["id"], t["passed"], _float(t["average_score"]), t["threshold"]) for t in rows]

    counts = data["summary"]
    return Summary(
        scores={k: _float(v) for k, v in data["scores"].items()},
        total_items=counts["total_items"], errors=counts["errors"], not_scorable=dict(counts["not_scorable"]),
        gate_results=gates(data["gate_results"]), threshold_results=thresholds(data["threshold_results"]),
        turn_results=[TurnResult(t["index"], gates(t["gate_results"]), thresholds(t["threshold_results"]),
                                 {k: _float(v) for k, v in t["scores"].items()}) for t in data["turn_results"]],
        verdict=data["verdict"],
    )


def aggregate(plan: Plan, items: list[ItemResult]) -> Summary:
    """The summary of these conversations, folded in dataset (item index) order as the runner does."""
    ordered = sorted(items, key=lambda item: item.index)
    aggregator = Aggregator(plan, [item.index for item in ordered])
    for item in ordered:
        aggregator.add(item)
    return aggregator.summary()


@dataclass
class StoredRun:
    """A run read back from a database: its ``RunResult`` (without items), plan and ``runs`` row."""

    store: Store
    result: RunResult
    plan: Plan
    row: dict[str, Any]

    def items(self) -> Iterator[ItemResult]:
        """Its conversations in dataset order (read afresh on every call)."""
        return self.store.load_items(self.result.run_id)


def load_run(store: Store, run_id: str) -> StoredRun:
    """A stored run by id or unique id prefix; a run that never finished gets its summary recomputed."""
    row = store.require_run(run_id)
    plan = store.plan(row["id"])
    if row["result"]:
        summary = summary_from_json(json.loads(row["result"]))
    else:
        summary = aggregate(plan, list(store.load_items(row["id"])))
    usage = {"calls": row["llm_calls"], "cache_hits": row["cache_hits"], "prompt_tokens": row["prompt_tokens"],
             "completion_tokens": row["completion_tokens"], "cost": row["cost"]}
    completed = row["completed_items"] or summary.total_items
    result = RunResult(row["id"], row["dataset"], row["target"], summary, row["status"],
                       row["exit_code"] if row["exit_code"] is not None else 0, None, usage,
                       completed=completed, selected=max(completed, row["total_items"] or 0))
    return StoredRun(store, result, plan, row)


def show_run(db: Path, run_id: str, json_out: str | None, verbose: bool, out: Console) -> None:
    """``evalcli show``: the stored run as the table ``evalcli run`` prints, and optionally its JSON."""
    store = open_existing(db)
    try:
        run = load_run(store, run_id)
        render_run(out, run.result, run.items(), scorer_ids=run.plan.scorer_ids, gate_ids=run.plan.gate_ids,
                   verbose=verbose, db_path=str(db))
        if json_out:
            write_json(run.result, run.items(), json_out, Redactor())
    finally:
        store.close()


# -- listing runs --------------------------------------------------------------------------------


def runs_table(store: Store, limit: int = 20) -> Table:
    """``evalcli runs``: the most recent runs, newest first."""
    table = Table(title=f"Runs in {store.path} (newest first)", title_justify="left")
    table.add_column("run", no_wrap=True, min_width=26)
    for column in ("when", "dataset", "target", "status", "verdict", "items", "scores", "LLM use"):
        table.add_column(column, justify="right" if column == "items" else "left")
    for row in store.runs(limit):
        options = json.loads(row["options"] or "{}")
        dataset = row["dataset"] + (f" (shard {options['shard'][0]}/{options['shard'][1]})"
                                    if options.get("shard") else "")
        if options.get("merged_from"):
            dataset += f" (merged {len(options['merged_from'])})"
        items = f"{row['total_items']}" + (f" ({row['errors']} err)" if row["errors"] else "")
        table.add_row(row["id"], (row["started_at"] or "")[:19].replace("T", " "), dataset, row["target"],
                      row["status"], Text(row["verdict"] or "-", style=VERDICT_STYLE.get(row["verdict"] or "", "")),
                      items, _compact_scores(row["scores"]), _usage(row))
    return table


def _compact_scores(text: str | None, width: int = 60) -> str:
    parts = [f"{k}={fmt(v)}" for k, v in json.loads(text or "{}").items()]
    joined = " ".join(parts)
    return joined if len(joined) <= width else joined[: width - 1] + "…"


def _usage(row: dict[str, Any]) -> str:
    if not row["llm_calls"]:
        return "-"
    return (f"{row['llm_calls']} calls, {row['prompt_tokens'] + row['completion_tokens']} tok, "
            f"${row['cost']:.4f}")


# -- diff ----------------------------------------------------------------------------------------


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
    outcomes = [*item.gate_scores.values(), *(o for t in item.turns for o in t.gate_scores.values())]
    return item.status == "ok" and all(o.score is not None and o.score >= 1.0 for o in outcomes if not o.not_scorable)


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


def diff_runs(store: Store, run_a: str, run_b: str, tolerance: float = 0.0) -> RunDiff:
    """Compare run B with run A; ``regressions`` says why B is worse beyond ``tolerance`` (empty if not)."""
    if not (tolerance >= 0 and math.isfinite(tolerance)):
        raise UsageError(f"--tolerance {tolerance} must be a finite number >= 0", "write e.g. --tolerance 0.05")
    a, b = load_run(store, run_a), load_run(store, run_b)
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
        console.print(Text.assemble(("  regression ", "bold red"), line))
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


def diff_command(db: Path, run_a: str, run_b: str, tolerance: float, verbose: bool, out: Console) -> int:
    """``evalcli diff``: print the comparison and return its exit code (1 when B is worse than A)."""
    store = open_existing(db)
    try:
        diff = diff_runs(store, run_a, run_b, tolerance)
    finally:
        store.close()
    render_diff(out, diff, verbose=verbose)
    return diff.exit_code


# -- merge ---------------------------------------------------------------------------------------


@dataclass
class MergeResult:
    """A merged run written to ``out``: its id, the runs it came from, its summary and exit code."""

    run_id: str
    out: str
    sources: list[tuple[str, str]]
    """(database path, run id) of every merged run."""
    summary: Summary
    exit_code: int
    warnings: list[str] = field(default_factory=list)


def _find_run(stores: list[Store], run_id: str) -> tuple[Store, dict[str, Any]]:
    found = []
    for store in stores:
        try:
            found.append((store, store.require_run(run_id)))
        except StoreError:
            continue
    if len(found) != 1:
        where = "none of" if not found else "several of"
        raise UsageError(f"run '{run_id}' is in {where} the databases {', '.join(s.path for s in stores)}",
                         "pass --run with an id (or unique prefix) that 'evalcli runs --db PATH' shows")
    return found[0]


def _pick_runs(stores: list[Store], run_ids: list[str]) -> list[tuple[Store, dict[str, Any]]]:
    """The runs named by ``--run``, or else the latest run of the first database's latest dataset in each."""
    if run_ids:
        return [_find_run(stores, run_id) for run_id in run_ids]
    latest = stores[0].runs(1)
    if not latest:
        raise UsageError(f"{stores[0].path} holds no runs", "merge the databases written by 'evalcli run --shard I/N'")
    dataset = latest[0]["dataset"]
    picked = []
    for store in stores:
        rows = list(store.query("SELECT * FROM runs WHERE dataset = ? ORDER BY id DESC LIMIT 1", [dataset]))
        if not rows:
            raise UsageError(f"{store.path} holds no run of dataset {dataset}",
                             "merge only the shard databases of one dataset, or choose runs with --run ID")
        picked.append((store, rows[0]))
    return picked


def _check_mergeable(picked: list[tuple[Store, dict[str, Any]]]) -> list[str]:
    """Refuse runs of different datasets, targets or plans, or unfinished ones; warn of missing shards."""
    first_store, first = picked[0]
    plan = first_store.plan(first["id"])
    if len({row["id"] for _, row in picked}) != len(picked):
        raise UsageError("a run is named twice (or a database given twice)", "name each run and database once")
    for store, row in picked:
        where = f"run {row['id']} in {store.path}"
        for key in ("dataset", "dataset_hash", "target"):
            if row[key] != first[key]:
                raise UsageError(f"{where} has {key} {row[key]!r}, but run {first['id']} in {first_store.path} "
                                 f"has {first[key]!r}: they are not shards of one dataset run",
                                 "merge only shards run from the same dataset file (same content and target)")
        if store.plan(row["id"]) != plan:
            raise UsageError(f"{where} has different gates, scorers or thresholds than run {first['id']}",
                             "merge only shards run with the same dataset and scorers.yaml")
        if row["status"] != "completed":
            raise UsageError(f"{where} is {row['status']}, not completed",
                             f"finish it first: evalcli run {row['dataset']} --resume {row['id']} --db {store.path}")
    shards = [json.loads(row["options"] or "{}").get("shard") for _, row in picked]
    counts = {s[1] for s in shards if s}
    if len(counts) > 1:
        raise UsageError(f"the runs are shards of different counts ({', '.join(map(str, sorted(counts)))})",
                         "merge the shards of one '--shard I/N' split (the same N)")
    if counts and all(shards):
        total = counts.pop()
        missing = sorted(set(range(1, total + 1)) - {s[0] for s in shards})
        if missing:
            return [f"shards {', '.join(f'{i}/{total}' for i in missing)} are missing: the merged run covers "
                    "only part of the dataset"]
    return []


def _collect_items(picked: list[tuple[Store, dict[str, Any]]]) -> list[ItemResult]:
    """Every conversation of the picked runs in item-index order; an index in two runs is an error."""
    owner: dict[int, str] = {}
    items = []
    for store, row in picked:
        for item in store.load_items(row["id"]):
            where = f"run {row['id']} in {store.path}"
            if item.index in owner:
                raise UsageError(f"item {item.index} ({item.id}) is in both {owner[item.index]} and {where}",
                                 "merge each shard once; shards of one '--shard I/N' split never overlap")
            owner[item.index] = where
            items.append(item)
    return sorted(items, key=lambda item: item.index)


def _columns(conn: Any, table: str, schema: str = "main") -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA {schema}.table_info({table})")]


def _scorer_rows(picked: list[tuple[Store, dict[str, Any]]]) -> list[tuple[str, str, str]]:
    """The registered scorers of all runs; one id configured two ways is an error."""
    rows: dict[str, tuple[str, str, str]] = {}
    for store, run in picked:
        for r in store.query("SELECT scorer_id, kind, spec FROM scorers WHERE run_id = ?", [run["id"]]):
            row = (r["scorer_id"], r["kind"], r["spec"])
            if rows.setdefault(row[0], row) != row:
                raise UsageError(f"scorer {row[0]} is configured differently in run {run['id']} ({store.path})",
                                 "merge only shards run with the same scorers.yaml")
    return list(rows.values())


def _write_merged(out: Store, run_id: str, picked: list[tuple[Store, dict[str, Any]]], options: dict[str, Any],
                  summary: Summary, code: int) -> None:
    first = picked[0][1]
    commits = {row["git_commit"] for _, row in picked}
    conn = out.conn
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("INSERT INTO runs (id, dataset, dataset_hash, target, started_at, status, options, git_commit) "
                     "VALUES (?, ?, ?, ?, ?, 'running', ?, ?)",
                     (run_id, first["dataset"], first["dataset_hash"], first["target"],
                      min(row["started_at"] for _, row in picked), json.dumps(options),
                      commits.pop() if len(commits) == 1 else None))
        conn.executemany("INSERT INTO scorers (run_id, scorer_id, kind, spec) VALUES (?, ?, ?, ?)",
                         [(run_id, *row) for row in _scorer_rows(picked)])
        for table in COPIED_TABLES:
            for store, row in picked:
                _copy_rows(store, out, table, row["id"], run_id)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    out.finish_run(run_id, summary, "completed", code, {}, completed=summary.total_items)


def _copy_rows(source: Store, out: Store, table: str, from_run: str, to_run: str) -> None:
    """Copy one run's rows of a table, under the new run id (row ids are new; item indexes are kept)."""
    wanted = set(_columns(source.conn, table))
    columns = [c for c in _columns(out.conn, table) if c != "id" and c in wanted]
    names = ", ".join(columns)
    rows = source.conn.execute(f"SELECT {names} FROM {table} WHERE run_id = ? ORDER BY id", (from_run,))
    position = columns.index("run_id")
    out.conn.executemany(f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(columns))})",
                         [(*r[:position], to_run, *r[position + 1:]) for r in rows])


def merge_databases(sources: list[Path], out: Path, run_ids: list[str] | None = None) -> MergeResult:
    """Combine the shard runs of one dataset into a new completed run in ``out``, its aggregate recomputed."""
    if not sources:
        raise UsageError("name the databases to merge", "evalcli merge A.db B.db ... --out all.db")
    stores = [open_existing(path) for path in sources]
    try:
        picked = _pick_runs(stores, run_ids or [])
        warnings = _check_mergeable(picked)
        plan = picked[0][0].plan(picked[0][1]["id"])
        summary = aggregate(plan, _collect_items(picked))
        options = json.loads(picked[0][1]["options"] or "{}")
        code = exit_code(summary, strict=bool(options.get("strict")), max_errors=int(options.get("max_errors") or 0))
        options.update(shard=None, merged_from=[{"db": s.path, "run_id": r["id"],
                                                 "shard": json.loads(r["options"] or "{}").get("shard")}
                                                for s, r in picked], merged_at=now())
        run_id = new_run_id()
        target = Store(out)
        try:
            _write_merged(target, run_id, picked, options, summary, code)
        finally:
            target.close()
    finally:
        for store in stores:
            store.close()
    return MergeResult(run_id, str(out), [(s.path, r["id"]) for s, r in picked], summary, code, warnings)


def merge_lines(result: MergeResult) -> list[Text]:
    """What ``evalcli merge`` prints: the sources, then the merged run and its verdict."""
    lines = [Text(f"merged run {run_id} from {db}", style="dim") for db, run_id in result.sources]
    lines.extend(Text("warning: " + w, style="yellow") for w in result.warnings)
    verdict = Text.assemble(("Run ", "bold"), (result.run_id, "cyan"), f" written to {result.out}: verdict ")
    verdict.append(result.summary.verdict or "none", style=VERDICT_STYLE.get(result.summary.verdict or "", ""))
    verdict.append(f"   conversations: {result.summary.total_items}   errors: {result.summary.errors}"
                   f"   exit code {result.exit_code}")
    lines.append(verdict)
    return lines


__all__ = ["RunDiff", "StoredRun", "diff_runs", "load_run", "merge_databases", "runs_table", "summary_from_json"]
