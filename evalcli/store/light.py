"""A run's conversations read back (``stored_items``), whole or light (docs/history.md, "Big runs"): light is
without what the agent said and the reasons of its scores, which is all ``diff`` and ``compare`` need to pair and
count two runs of 100,000 conversations."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ..results import Guardrail, Interrupt, ItemResult, TurnRecord, outcomes_from_json

LIGHT = {"output": "'[]' AS output", "structured": "NULL AS structured"}
"""The columns of a turn ``light`` leaves out (what the agent said): ``diff`` and ``compare`` pair and count without."""


def turns_from(conn: Any, light: bool) -> str:
    if not light:
        return "SELECT * FROM turns"
    columns = [row[1] for row in conn.execute("PRAGMA table_info(turns)")]  # a database of any schema version
    return f"SELECT {', '.join(LIGHT.get(column, column) for column in columns)} FROM turns"


def stored_outcomes(text: str | None, light: bool) -> dict[str, Any]:
    """An ``outcomes`` column; ``light``: without each gate's and scorer's reason and samples (they quote the agent)."""
    outcomes: dict[str, Any] = json.loads(text or "{}")
    if light:
        for group in ("gates", "scorers"):
            for outcome in (outcomes.get(group) or {}).values():
                outcome.pop("reason", None)
                outcome.pop("samples", None)
    return outcomes


def stored_items(conn: Any, run_id: str, *, errors_only: bool = False, index: int | None = None,
                 indexes: list[int] | None = None, light: bool = False) -> Iterator[ItemResult]:
    """``Store.load_items`` on any connection to the file (the writer thread's, inside its transaction, reads back a
    conversation it has just written: ``index``; a page of ``evalcli view`` reads its ``indexes``, in index order).
    ``light``: each turn without its output messages and structured output (``diff`` and ``compare`` of two runs of
    100,000 conversations hold both runs at once: docs/history.md)."""
    if index is not None:
        indexes = [index]
    if indexes is not None:
        where = f" AND item_index IN ({', '.join('?' for _ in indexes)})"
        params: list[Any] = [run_id, *indexes]
    else:
        where = (" AND item_index IN (SELECT item_index FROM items WHERE run_id = ? AND status != 'ok')"
                 if errors_only else "")
        params = [run_id, run_id] if errors_only else [run_id]
    turn_rows = rows(conn, f"{turns_from(conn, light)} WHERE run_id = ?{where} ORDER BY item_index, turn_index", params)
    pending = next(turn_rows, None)
    for row in rows(conn, f"SELECT * FROM items WHERE run_id = ?{where} ORDER BY item_index", params):
        turns: list[TurnRecord] = []
        while pending is not None and pending["item_index"] <= row["item_index"]:
            if pending["item_index"] == row["item_index"]:
                turns.append(_turn_record(pending, light))
            pending = next(turn_rows, None)
        stored = stored_outcomes(row["outcomes"], light)
        gates, scores, thresholds = outcomes_from_json(stored)
        plays = json.loads(row["gate_plays"] or "{}")
        yield ItemResult(row["item_index"], row["item_id"], json.loads(row["tags"]), row["form"], row["status"],
                         row["thread_id"], row["resource_id"], turns, gates, scores, row["error"],
                         row["traceback"], row["duration_ms"] or 0.0, thresholds=thresholds,
                         stop_reason=row["stop_reason"], metadata=_json_or(row.get("metadata"), {}),
                         repeats=row["repeats"] or 1, gate_passes={g: int(p[0]) for g, p in plays.items()},
                         gate_plays={g: int(p[1]) for g, p in plays.items()},
                         plays_passed=int(stored["plays"][0]) if stored.get("plays") else None,
                         settled=str(stored["plays"][2]) if len(stored.get("plays") or ()) > 2 else None,
                         identity=row.get("identity") or "", content=row.get("content") or "")


def rows(conn: Any, sql: str, params: Any = ()) -> Iterator[dict[str, Any]]:
    cursor = conn.execute(sql, params)
    columns = [d[0] for d in cursor.description]
    for row in cursor:
        yield dict(zip(columns, row, strict=True))


def _json_or(text: str | None, default: Any) -> Any:
    return default if text is None else json.loads(text)


def turn_from_json(data: dict[str, Any]) -> TurnRecord:
    """A turn back from ``TurnRecord.to_json`` (a play's ``turns``)."""
    return _turn_record({**data, "turn_index": data["index"], "output": json.dumps(data.get("output") or []),
                         "outcomes": json.dumps(data.get("outcomes") or {}),
                         "interrupt": None if data.get("interrupt") is None else json.dumps(data["interrupt"]),
                         "structured": None if data.get("structured") is None else json.dumps(data["structured"]),
                         "resume": None if data.get("resume") is None else json.dumps(data["resume"])})


def _turn_record(row: dict[str, Any], light: bool = False) -> TurnRecord:
    outcomes = stored_outcomes(row["outcomes"], light)
    gates, scores, thresholds = outcomes_from_json(outcomes)
    interrupt = row.get("interrupt")
    return TurnRecord(row["turn_index"], row["input"], json.loads(row["output"]), row["duration_ms"] or 0.0,
                      gates, scores, thresholds, simulated=bool(row["simulated"]),
                      structured=_json_or(row.get("structured"), None),
                      interrupt=None if interrupt is None else Interrupt(json.loads(interrupt)),
                      resume=_json_or(row.get("resume"), None), output_retries=row.get("output_retries") or 0,
                      guardrail=Guardrail.from_json(outcomes.get("guardrail")))
