"""The run history a page at a time (``evalcli view``, docs/view.md): runs with filters, a run's conversations
sorted and paginated, and how far a run in progress has got.

Every read here asks SQLite for one page (``LIMIT``/``OFFSET`` over indexed columns) and reads back only that
page's conversations, through ``stored_items``: a run of 100,000 conversations answers as fast as one of ten.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..errors import UsageError
from ..records import record
from ..results import ItemResult, run_outcome
from ..words import stored_run_word
from .light import stored_items
from .store import Store

PAGE_SIZE = 50
"""Rows per page unless asked otherwise; at most ``MAX_PAGE_SIZE``."""
MAX_PAGE_SIZE = 500
MAX_PAGE = 10**9
"""Pages beyond this are empty anyway; clamping keeps ``OFFSET`` within SQLite's 64-bit integers."""

RUN_VERDICTS = ("passed", "failed", "scored", "running", "interrupted")
"""What the runs list filters on: a verdict, or a status (``running``, ``interrupted``) for runs without one."""

STATUS_RANK = "CASE WHEN status != 'ok' THEN 0 WHEN passed = 0 THEN 1 ELSE 2 END"
"""Failures first: errored (or limited) conversations, then those that missed a gate, then those that passed."""
COST = ("(SELECT COALESCE(SUM(cost), 0) FROM llm_calls WHERE llm_calls.run_id = items.run_id "
        "AND llm_calls.item_index = items.item_index)")
STABILITY = "(CASE WHEN repeats > 1 THEN json_extract(outcomes, '$.plays[0]') * 1.0 / repeats END)"
SORTS = {"failures": STATUS_RANK, "index": "item_index", "id": "item_id", "duration": "duration_ms", "cost": COST,
         "stability": STABILITY, "status": STATUS_RANK}
"""The orders of a run's conversations; ``score:ID`` orders by a gate's or scorer's score as well. Every one but the
scores, stability and cost reads only the index ``items_run_view`` (migration 009), whose expression is
``STATUS_RANK`` written exactly so."""
NULLABLE = {"duration", "cost", "stability"}
"""Orders whose key may be missing: those conversations come last either way."""
STATUSES = {"error": "status != 'ok'", "failed": "status = 'ok' AND passed = 0", "passed": "status = 'ok' AND passed = 1"}


def page_bounds(page: int, size: int) -> tuple[int, int]:
    """(limit, offset) of page ``page`` (from 1) of ``size`` rows, each clamped to what is allowed."""
    size = min(max(size, 1), MAX_PAGE_SIZE)
    return size, (min(max(page, 1), MAX_PAGE) - 1) * size


DATE = re.compile(r"\d{4}(-\d{2}(-\d{2}([T ]\d{2}(:\d{2}(:\d{2}(\.\d+)?)?)?)?)?)?")
"""What ``since`` and ``until`` take: the start of an ISO date (``started_at`` is compared with it as text)."""


@record(frozen=True)
class RunFilter:
    """What the runs list shows: each field narrows it when given; dates compare with ``started_at`` (ISO text, so
    ``2026-05`` means from May 2026 on for ``since``, before it for ``until``)."""

    dataset: str | None = None
    target: str | None = None
    verdict: str | None = None
    since: str | None = None
    until: str | None = None

    def where(self) -> tuple[str, list[Any]]:
        clauses, params = [], []
        if self.dataset:
            clauses.append("dataset = ?")
            params.append(self.dataset)
        if self.target:
            clauses.append("target = ?")
            params.append(self.target)
        if self.verdict:
            if self.verdict not in RUN_VERDICTS:
                raise UsageError(f"verdict '{self.verdict}' is not one of {', '.join(RUN_VERDICTS)}", "pick one of them")
            clauses.append("(verdict = ? OR (verdict IS NULL AND status = ?))")
            params += [self.verdict, self.verdict]
        for name, value in (("since", self.since), ("until", self.until)):
            if value and not DATE.fullmatch(value):
                raise UsageError(f"{name} '{value}' is not a date", "give a day, a month or a year: 2026-05-01, "
                                 "2026-05 or 2026 (a time may follow the day: 2026-05-01T08:00)")
        if self.since:
            clauses.append("started_at >= ?")
            params.append(self.since)
        if self.until:
            clauses.append("started_at < ?")
            params.append(self.until)
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def list_runs(store: Store, where: RunFilter, page: int = 1, size: int = PAGE_SIZE) -> tuple[int, list[dict[str, Any]]]:
    """(how many runs match, the rows of page ``page``), newest first; a run still going counts its conversations
    stored so far as ``completed_items``; ``shown`` is ``errored`` for a run whose verdict covers only part of it (a
    conversation or a scorer errored: docs/history.md), as ``evalcli runs`` shows it."""
    clause, params = where.where()
    total = next(store.query(f"SELECT COUNT(*) AS n FROM runs{clause}", params))["n"]
    limit, offset = page_bounds(page, size)
    rows = list(store.query(
        "SELECT id, dataset, dataset_path, target, started_at, finished_at, status, verdict, exit_code, total_items, "
        "CASE WHEN status = 'running' THEN (SELECT COUNT(*) FROM items WHERE items.run_id = runs.id) "
        "ELSE completed_items END AS completed_items, errors, cost, llm_calls, scores, summary "
        f"FROM runs{clause} ORDER BY started_at DESC, id DESC LIMIT ? OFFSET ?", [*params, limit, offset]))
    for row in rows:  # shown as evalcli runs shows it: errored, never passed, when a conversation or scorer errored
        counts = json.loads(row.pop("summary") or "{}")
        outcome = run_outcome(row["verdict"], bool(row["errors"] or counts.get("scorer_errors")))
        word = stored_run_word(outcome, row["errors"] or 0, int(counts.get("limited") or 0),
                               bool(counts.get("scorer_errors")))
        row["shown"] = word if row["status"] != "running" else None
    return total, rows


def run_choices(store: Store) -> dict[str, list[str]]:
    """The datasets and targets the runs list may be filtered by."""
    return {"datasets": [r["dataset"] for r in store.query("SELECT DISTINCT dataset FROM runs ORDER BY dataset")],
            "targets": [r["target"] for r in store.query("SELECT DISTINCT target FROM runs ORDER BY target")],
            "verdicts": list(RUN_VERDICTS)}


@record(frozen=True)
class ConversationQuery:
    """Which of a run's conversations, in which order: ``sort`` is a key of ``SORTS`` or ``score:ID``."""

    sort: str = "failures"
    descending: bool = False
    status: str | None = None
    search: str | None = None
    """Text searched in the conversation's id and first user message."""

    def order(self) -> tuple[str, list[Any]]:
        direction = "DESC" if self.descending else "ASC"
        if self.sort.startswith("score:"):
            path = '$."' + self.sort[len("score:"):].replace('"', '\\"') + '"'
            key = "COALESCE(json_extract(scores, ?), json_extract(gate_scores, ?))"
            return f"{key} IS NULL, {key} {direction}, item_index", [path, path, path, path]
        if self.sort not in SORTS:
            raise UsageError(f"sort '{self.sort}' is not one of {', '.join(SORTS)} or score:ID", "pick one of them")
        key = SORTS[self.sort]
        last = f"{key} IS NULL, " if self.sort in NULLABLE else ""
        return f"{last}{key} {direction}, item_index", []

    def where(self) -> tuple[str, list[Any]]:
        clauses, params = [], []
        if self.status:
            if self.status not in STATUSES:
                raise UsageError(f"status '{self.status}' is not one of {', '.join(STATUSES)}", "pick one of them")
            clauses.append(STATUSES[self.status])
        if self.search:
            clauses.append("(item_id LIKE ? ESCAPE '\\' OR input LIKE ? ESCAPE '\\')")
            escaped = "%" + self.search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            params += [escaped, escaped]
        return "".join(" AND " + c for c in clauses), params


@record
class ConversationPage:
    """One page of a run's conversations, in the order asked, with each one's LLM cost (US dollars)."""

    total: int
    items: list[ItemResult]
    costs: dict[int, float]


def conversations(store: Store, run_id: str, query: ConversationQuery, page: int = 1,
                  size: int = PAGE_SIZE) -> ConversationPage:
    """Page ``page`` of a run's conversations as ``query`` orders and narrows them."""
    where, where_params = query.where()
    order, order_params = query.order()
    total = next(store.query(f"SELECT COUNT(*) AS n FROM items WHERE run_id = ?{where}", [run_id, *where_params]))["n"]
    limit, offset = page_bounds(page, size)
    indexes = [r["item_index"] for r in store.query(
        f"SELECT item_index FROM items WHERE run_id = ?{where} ORDER BY {order} LIMIT ? OFFSET ?",
        [run_id, *where_params, *order_params, limit, offset])]
    found = {item.index: item for item in stored_items(store.conn, run_id, indexes=indexes)} if indexes else {}
    marks = ", ".join("?" for _ in indexes)
    costs = {r["item_index"]: float(r["cost"]) for r in store.query(
        f"SELECT item_index, COALESCE(SUM(cost), 0) AS cost FROM llm_calls WHERE run_id = ? AND item_index IN ({marks}) "
        "GROUP BY item_index", [run_id, *indexes])} if indexes else {}
    return ConversationPage(total, [found[i] for i in indexes if i in found], costs)


def _selected(row: dict[str, Any], stored: int) -> int:
    """The conversations a run selected: written when it began (``runs.selected``; a run stored before had only its
    count when it ended, ``total_items``), never fewer than those stored."""
    return max(row.get("selected") or row["total_items"] or 0, stored)


def progress(store: Store, run_id: str) -> dict[str, Any]:
    """How far a run has got: its status, verdict, conversations stored (and passed, errored) of those selected,
    and when the last one was stored; what a page of a run in progress polls."""
    row = store.require_run(run_id)
    counts = next(store.query(
        "SELECT COUNT(*) AS stored, COALESCE(SUM(status = 'ok' AND passed = 1), 0) AS passed, "
        "COALESCE(SUM(status != 'ok'), 0) AS errors, MAX(finished_at) AS last FROM items WHERE run_id = ?", [row["id"]]))
    return {"id": row["id"], "status": row["status"], "verdict": row["verdict"], "exit_code": row["exit_code"],
            "stored": counts["stored"], "passed": counts["passed"], "errors": counts["errors"],
            "selected": _selected(row, counts["stored"]), "last": counts["last"],
            "finished_at": row["finished_at"]}
