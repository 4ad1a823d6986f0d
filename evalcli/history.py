"""Run history: list stored runs and load one back as a ``RunResult`` (``evalcli runs``, ``evalcli show``).

Everything here reads what ``Store`` wrote. A stored run's aggregate (``runs.result``) is the SPEC §7
JSON of its summary; a run without one (never finished) is recomputed with ``Aggregator``.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .aggregate import Aggregator, Plan
from .errors import StoreError
from .outputs import JsonReport, deliver, open_for_writing
from .report import VERDICT_STYLE, TerminalReport, fmt
from .result import GateResult, ItemResult, RunResult, Summary, ThresholdResult, TurnResult
from .secrets import Redactor
from .store import Store
from .transcript import item_document, render_item


def open_existing(path: str | Path) -> Store:
    """Open a database that must already exist, read-only (reading history never creates or changes a file)."""
    return Store.existing(path)


def open_cache(path: str | Path, *, write: bool) -> Any:
    """The response cache of an existing database (``cache clear`` needs to write it, ``cache info`` only reads)."""
    from .llm import ResponseCache

    store = Store.existing(path, write=write)
    if not write:
        return _ReadOnlyCache(store)
    store.close()
    return ResponseCache(str(path))


class _ReadOnlyCache:
    """``cache info`` on a database opened read-only."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def stats(self) -> dict[str, int]:
        entries, hits = self.store.conn.execute("SELECT COUNT(*), COALESCE(SUM(hits), 0) FROM llm_cache").fetchone()
        return {"entries": int(entries), "hits": int(hits)}

    def close(self) -> None:
        self.store.close()


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
    result = RunResult(row["id"], row.get("dataset_path") or row["dataset"], row["target"], summary, row["status"],
                       row["exit_code"] if row["exit_code"] is not None else 0, None, usage,
                       completed=completed, selected=max(completed, row["total_items"] or 0),
                       dataset_id=row["dataset"])
    return StoredRun(store, result, plan, row)


def show_run(db: Path, run_id: str, json_out: str | None, verbose: bool, out: Console) -> None:
    """``evalcli show RUN``: the stored run as the table ``evalcli run`` prints, and optionally its JSON."""
    store = open_existing(db)
    try:
        run = load_run(store, run_id)
        terminal = TerminalReport(out, run.result, run.plan.scorer_ids, run.plan.gate_ids, verbose=verbose,
                                  db_path=str(db))
        with contextlib.ExitStack() as files:
            reports: list[Any] = [terminal]
            if json_out:
                stream = sys.stdout if json_out == "-" else files.enter_context(open_for_writing(Path(json_out)))
                json_report = JsonReport(stream, run.result, Redactor())
                reports.append(json_report)
            deliver(run.items(), reports)
            if json_out:
                json_report.close()
                stream.write("\n")
        terminal.close()
    finally:
        store.close()


def find_item(store: Store, run_id: str, key: str) -> ItemResult:
    """A conversation of a stored run by item id, or else by index."""
    query = "SELECT item_index FROM items WHERE run_id = ? AND item_id = ?"
    rows = list(store.query(query, [run_id, key]))
    if not rows and key.isdigit():
        rows = list(store.query("SELECT item_index FROM items WHERE run_id = ? AND item_index = ?", [run_id, int(key)]))
    if not rows:
        known = [r["item_id"] for r in store.query("SELECT item_id FROM items WHERE run_id = ? ORDER BY item_index "
                                                   "LIMIT 8", [run_id])]
        raise StoreError(f"run {run_id} has no conversation '{key}'",
                         f"give an item id or index; ids include: {', '.join(known) or '(none stored)'}")
    index = rows[0]["item_index"]
    return next(item for item in store.load_items(run_id) if item.index == index)


def show_item(db: Path, run_id: str, key: str, json_out: str | None, out: Console) -> None:
    """``evalcli show RUN ITEM``: one conversation turn by turn, with every gate's and scorer's reason."""
    store = open_existing(db)
    try:
        run = load_run(store, run_id)
        item = find_item(store, run.result.run_id, key)
    finally:
        store.close()
    if json_out:
        text = json.dumps(item_document(run.result, item), ensure_ascii=False, indent=2) + "\n"
        if json_out == "-":
            sys.stdout.write(text)
        else:
            with open_for_writing(Path(json_out)) as handle:
                handle.write(text)
        if json_out == "-":
            return
    out.print(render_item(run.result, item))


def runs_table(store: Store, limit: int = 20) -> Table:
    """``evalcli runs``: the most recent runs, newest first."""
    table = Table(title=f"Runs in {store.path} (newest first)", title_justify="left")
    table.add_column("run", no_wrap=True, min_width=26)
    for column in ("when", "dataset", "target", "status", "verdict", "items", "scores", "LLM use"):
        table.add_column(column, justify="right" if column == "items" else "left")
    for row in store.runs(limit):
        options = json.loads(row["options"] or "{}")
        dataset = (row.get("dataset_path") or row["dataset"]) + (f" (shard {options['shard'][0]}/{options['shard'][1]})"
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
