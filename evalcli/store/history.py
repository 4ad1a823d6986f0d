"""Run history as data (``evalcli runs``, ``show``, ``diff``, ``report``): stored runs read back as ``RunResult``s.

Everything here reads what ``Store`` wrote. A stored run's aggregate (``runs.result``) is docs/reference/json.md
JSON of its summary; a run without one (never finished) is recomputed with ``Aggregator``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..aggregate import Aggregator
from ..errors import StoreError, UsageError
from ..identity import EXPLICIT
from ..llm import usage_summary
from ..records import record
from ..results import (
    GateResult,
    ItemResult,
    Plan,
    RunResult,
    Summary,
    ThresholdResult,
    TurnResult,
    stability_counts,
    stability_of,
)
from .light import stored_items
from .store import Store

if TYPE_CHECKING:
    from ..llm import ResponseCache

HISTORY_RUNS = 30
"""How many runs of a dataset ``score_history`` reads at most (the reported one and those before it)."""


def open_existing(path: str | Path) -> Store:
    """Open a database that must already exist, read-only (reading history never creates or changes a file)."""
    return Store.existing(path)


def _float(value: Any) -> float:
    """A JSON score back to a float (non-finite scores were written as null)."""
    return math.nan if value is None else float(value)


def summary_from_json(data: dict[str, Any]) -> Summary:
    """Rebuild a ``Summary`` from the aggregate JSON of docs/reference/json.md (as stored in ``runs.result``)."""
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
        verdict=data["verdict"], unscored_gates=list(data.get("unscored_gates") or []),
        scorer_errors=dict(counts.get("scorer_errors") or {}), limited=int(counts.get("limited") or 0),
    )


def aggregate(plan: Plan, items: list[ItemResult]) -> Summary:
    """The summary of these conversations, folded in dataset (item index) order as the runner does."""
    ordered = sorted(items, key=lambda item: item.index)
    aggregator = Aggregator(plan, [item.index for item in ordered])
    for item in ordered:
        aggregator.add(item)
    return aggregator.summary()


@record
class StoredRun:
    """A run read back from a database: its ``RunResult`` (without items), plan and ``runs`` row."""

    store: Store
    result: RunResult
    plan: Plan
    row: dict[str, Any]

    def items(self, light: bool = False) -> Iterator[ItemResult]:
        """Its conversations in dataset order (read afresh on every call); ``light``: without what the agent said
        (``Store.load_items``)."""
        return self.store.load_items(self.result.run_id, light=light)


def load_run(store: Store, run_id: str) -> StoredRun:
    """A stored run by id or unique id prefix; a run that never finished gets its summary recomputed."""
    row = store.require_run(run_id)
    plan = store.plan(row["id"])
    stored = json.loads(row["result"]) if row["result"] else {}
    if stored:
        summary = summary_from_json(stored)
    else:
        summary = aggregate(plan, list(store.load_items(row["id"])))
    usage = usage_summary(stored_usage(store, row["id"]))
    completed = row["completed_items"] or summary.total_items
    # what it selected: kept with the aggregate when it ended, written when it began (a run still playing)
    selected = max(completed, int(stored.get("selected") or row.get("selected") or row["total_items"] or 0))
    result = RunResult(row["id"], row.get("dataset_path") or row["dataset"], row["target"], summary, row["status"],
                       row["exit_code"] if row["exit_code"] is not None else 0, None, usage,
                       completed=completed, selected=selected,
                       dataset_name=row["dataset"], repeat=int(stored.get("repeat") or 1),
                       repeat_auto=bool(stored.get("repeat_auto")), pass_rate=float(stored.get("pass_rate") or 1.0),
                       plays=int(stored.get("plays") or 0),
                       pass_at_k=dict(stored.get("pass_at_k") or {}), pass_all_k=dict(stored.get("pass_all_k") or {}),
                       stability=_stability(store, row["id"]))
    return StoredRun(store, result, plan, row)


def _stability(store: Store, run_id: str) -> dict[str, int]:
    """How many of a stored run's repeated conversations are stable-pass, flaky and stable-fail."""
    rows = store.query("SELECT status, repeats, json_extract(outcomes, '$.plays[0]') AS passed, "
                       "json_extract(outcomes, '$.plays[2]') AS settled FROM items "
                       "WHERE run_id = ? AND (repeats > 1 OR settled IS NOT NULL)", [run_id])
    return stability_counts([stability_of(r["passed"], r["repeats"], r["settled"]) if r["status"] == "ok" else None
                             for r in rows])


def stored_usage(store: Store, run_id: str, indexes: set[int] | None = None) -> list[tuple[Any, ...]]:
    """The run's LLM calls as ``usage_summary`` rows (per conversation and purpose), of the conversations ``indexes``
    only when given."""
    query = ("SELECT item_index, purpose, COUNT(*) AS calls, COALESCE(SUM(cache_hit), 0) AS hits, "
             "COALESCE(SUM(prompt_tokens), 0) AS p, COALESCE(SUM(completion_tokens), 0) AS c, "
             "COALESCE(SUM(cost), 0) AS cost FROM llm_calls WHERE run_id = ? GROUP BY item_index, purpose")
    return [(r["purpose"], r["calls"], r["hits"], r["p"], r["c"], r["cost"]) for r in store.query(query, [run_id])
            if indexes is None or r["item_index"] in indexes]


def find_item(store: Store, run_id: str, key: str) -> ItemResult:
    """A conversation of a stored run by item id (as its identity holds it, a secret in it as ``${NAME}``: ``given_name``;
    else as stored), or else by index, with its plays when it was repeated."""
    rows = list(store.query("SELECT item_index FROM items WHERE run_id = ? AND identity = ?", [run_id, EXPLICIT + key]))
    if not rows:
        rows = list(store.query("SELECT item_index, identity FROM items WHERE run_id = ? AND item_id = ? "
                                "ORDER BY item_index", [run_id, key]))  # named in the dataset's order
        if len(rows) > 1:  # ids that differ only in their secrets, each shown [redacted]
            names = ", ".join(row["identity"][len(EXPLICIT):] for row in rows if row["identity"].startswith(EXPLICIT))
            raise StoreError(f"{len(rows)} conversations of run {run_id} are shown as '{key}'",
                             f"name one by its id as the dataset writes it: {names}")
    if not rows and key.isdigit():
        rows = list(store.query("SELECT item_index FROM items WHERE run_id = ? AND item_index = ?", [run_id, int(key)]))
    if not rows:
        known = [r["item_id"] for r in store.query("SELECT item_id FROM items WHERE run_id = ? ORDER BY item_index "
                                                   "LIMIT 8", [run_id])]
        raise StoreError(f"run {run_id} has no conversation '{key}'",
                         f"give an item id or index; ids include: {', '.join(known) or '(none stored)'}")
    found = item_at(store, run_id, rows[0]["item_index"])
    assert found is not None  # its row was just read
    return found


def item_at(store: Store, run_id: str, index: int) -> ItemResult | None:
    """The conversation at ``index`` of a stored run, with its plays when it was repeated (``None``: no such one).
    Only that conversation is read: a run may hold 100,000."""
    item = next(stored_items(store.conn, run_id, index=index), None)
    if item is not None:
        item.plays = store.load_plays(run_id, item)
    return item


def find_play(item: ItemResult, number: int) -> ItemResult:
    """Play ``number`` (from 1) of a stored conversation (``find_item``); a conversation played once has play 1."""
    count = len(item.plays) or 1
    if not 1 <= number <= count:
        raise UsageError(f"conversation '{item.id}' has no play {number}: it was played {count} time"
                         f"{'s' if count != 1 else ''}", f"give --play 1 to {count}" if count > 1 else "leave out --play")
    return item.plays[number - 1] if item.plays else item


def open_cache(path: str | Path, *, write: bool) -> ResponseCache:
    """The response cache of an existing database (``cache clear`` writes it; ``cache info`` only reads, and
    reading never changes the file)."""
    from ..llm import ResponseCache

    store = Store.existing(path, write=write)
    if not write:
        return ResponseCache(store.conn)  # its read-only connection (the cache closes it)
    try:
        return store.response_cache()
    finally:
        store.close()


@record(frozen=True)
class RunPoint:
    """One run of a dataset with its registered scorers' means."""

    run_id: str
    started_at: str
    means: dict[str, float]


def score_history(store: Store, dataset: str, run_id: str, limit: int = HISTORY_RUNS) -> list[RunPoint]:
    """Each registered scorer's mean per run, over the last ``limit`` runs of ``dataset`` up to ``run_id``
    (oldest first). Per-turn rows are kept apart as ``id (per turn)``, gates as ``gate id``."""
    runs = list(store.db.query("SELECT id, started_at FROM runs WHERE dataset = ? AND id <= ? ORDER BY id DESC "
                               "LIMIT ?", [dataset, run_id, limit]))
    runs.reverse()
    if not runs:
        return []
    marks = ", ".join("?" for _ in runs)
    means: dict[str, dict[str, float]] = {r["id"]: {} for r in runs}
    query = (f"SELECT run_id, scorer_id, role, turn_index IS NOT NULL AS per_turn, AVG(score) AS mean FROM scores "
             f"WHERE run_id IN ({marks}) AND score IS NOT NULL GROUP BY run_id, scorer_id, role, per_turn "
             "ORDER BY run_id, role DESC, per_turn, scorer_id")
    for row in store.db.query(query, [r["id"] for r in runs]):
        label = ("gate " if row["role"] == "gate" else "") + row["scorer_id"] + (" (per turn)" if row["per_turn"] else "")
        means[row["run_id"]][label] = float(row["mean"])
    return [RunPoint(r["id"], r["started_at"] or "", means[r["id"]]) for r in runs]
