"""What the pages of ``evalcli view`` show, as JSON-ready data (docs/view.md). Everything is read through
``evalcli.store`` (runs a page at a time, ``load_run``, ``find_item``, ``paired_stats``) and laid out with the HTML
report's helpers (``reports.html.conversation``), so a conversation reads the same in the report, ``show`` and here.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path
from typing import Any

from ..errors import StoreError, UsageError
from ..identity import identity_of
from ..messages import message_text
from ..reports.html.conversation import failing_gates, status_word, transcript
from ..reports.paired import detectable_line, figure_rows, pass_fail_line, status_line
from ..reports.text import fmt, one_line, why_failed
from ..results import ItemResult, TurnRecord
from ..store import Store, load_run, migrations, pair_conversations, paired_stats
from ..store.browse import ConversationQuery, RunFilter, conversations, list_runs, progress, run_choices
from ..store.connection import read_file
from ..store.history import item_at
from ..store.labels import labels_by_identity, latest_labels
from ..store.paired import conversation_names

INPUT_WIDTH = 90


def check_database(path: Path) -> list[str]:
    """Make ``path`` ready to serve: an evalcli database, migrated to this release (an older one is migrated when
    its file may be written, else refused with what to run). Returns the migrations applied."""
    if not path.is_file():
        raise StoreError(f"no database at {path}: it does not exist",
                         "pass --db PATH of a file written by 'evalcli run' (default: ./evalcli.db)")
    try:
        conn = read_file(path)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            known = {r[0] for r in conn.execute("SELECT name FROM migrations")} if "migrations" in tables else set()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path} is not an evalcli database: {exc}",
                         "pass --db PATH of a file written by 'evalcli run'") from None
    if "runs" not in tables or "migrations" not in tables:
        raise StoreError(f"{path} is not an evalcli database: it has no 'runs' and 'migrations' tables",
                         "pass --db PATH of a file written by 'evalcli run'")
    newer = sorted(known - {name for name, _ in migrations.MIGRATIONS})
    if newer:
        raise StoreError(f"{path} was written by a newer evalcli (its schema has {', '.join(newer)})",
                         "upgrade evalcli: pip install -U evalcli")
    if len(known) == len(migrations.MIGRATIONS):
        return []
    import os

    if not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        raise StoreError(f"{path} is from an older evalcli and must be migrated, but it is read-only",
                         f"copy it somewhere writable and view the copy: cp {path} /tmp/evalcli.db && "
                         "evalcli view --db /tmp/evalcli.db")
    store = Store(path)  # opening for writing applies the pending migrations, each in its own transaction
    store.close()
    return [name for name, _ in migrations.MIGRATIONS if name not in known]


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def runs_page(store: Store, where: RunFilter, page: int, size: int) -> dict[str, Any]:
    total, rows = list_runs(store, where, page, size)
    return {"total": total, "page": page, "runs": rows, "choices": run_choices(store)}


def run_summary(store: Store, run_id: str) -> dict[str, Any]:
    """A run's header: the JSON result's aggregate (verdict, scores, gates, thresholds, usage, stability), its row
    and the gate and scorer ids its conversations are scored by."""
    stored = load_run(store, run_id)
    data = stored.result.to_json(items=[])
    data.pop("items")
    return {**data, "shown": "errored" if stored.result.outcome == "errors" else None,
            "row": {k: stored.row[k] for k in ("started_at", "finished_at", "git_commit", "cost", "llm_calls",
                                               "dataset_path", "exit_code")},
            "gate_ids": stored.plan.gate_ids, "scorer_ids": stored.plan.scorer_ids,
            "thresholds": stored.plan.thresholds, "progress": progress(store, stored.result.run_id)}


def conversation_row(item: ItemResult, cost: float, labels: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One line of a run's conversation list."""
    status = status_word(item)
    scores = {key: {"score": _finite(o.score), "text": fmt(o.score) if o.score is not None else "-",
                    "not_scorable": o.not_scorable, "error": bool(o.error), "missed": o.missed_gate}
              for key, o in item.gate_scores.items()}
    scores.update({key: {"score": _finite(o.score), "text": fmt(o.score) if o.score is not None else "-",
                         "not_scorable": o.not_scorable, "error": bool(o.error)} for key, o in item.scores.items()})
    return {"index": item.index, "id": item.id, "identity": identity_of(item), "tags": item.tags, "form": item.form,
            "turns": len(item.turns), "status": status, "failing": failing_gates(item),
            "why": one_line(why_failed(item)) if status != "passed" else "",
            "input": one_line(item.turns[0].input, INPUT_WIDTH) if item.turns else "", "scores": scores,
            "stability": item.stability, "repeats": item.repeats, "plays_passed": item.plays_passed,
            "duration_ms": item.duration_ms, "cost": cost, "labels": _label_json(labels)}


def _label_json(labels: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {key: {"score": row["score"], "note": row["note"], "reviewer": row["reviewer"], "at": row["created_at"]}
            for key, row in labels.items()}


def conversations_page(store: Store, run_id: str, query: ConversationQuery, page: int, size: int) -> dict[str, Any]:
    run_id = store.require_run(run_id)["id"]
    if query.sort.startswith("score:") and query.sort[len("score:"):] not in (ids := _labelled_ids(store, run_id)):
        raise UsageError(f"sort '{query.sort}' names no top-level gate or scorer of run {run_id}",
                         f"sort by score: and one of: {', '.join(ids) or 'none'}")
    found = conversations(store, run_id, query, page, size)
    identities = [identity_of(item) for item in found.items]
    labels = labels_by_identity(latest_labels(store, run_id=run_id, identities=identities)) if identities else {}
    return {"total": found.total, "page": page,
            "rows": [conversation_row(item, found.costs.get(item.index, 0.0), labels.get(identity_of(item), {}))
                     for item in found.items]}


def conversation(store: Store, run_id: str, index: int) -> dict[str, Any]:
    """A conversation turn by turn (``transcript``), every play of a repeat, and its labels."""
    run_id = store.require_run(run_id)["id"]
    item = item_at(store, run_id, index)
    if item is None:
        raise StoreError(f"run {run_id} has no conversation {index}", "go back to the run's list")
    identity = identity_of(item)
    labels = labels_by_identity(latest_labels(store, run_id=run_id, identities=[identity])).get(identity, {})
    return {"run_id": run_id, "identity": identity, "transcript": transcript(item),
            "plays": [transcript(play) for play in item.plays], "labels": _label_json(labels),
            "scorer_ids": _labelled_ids(store, run_id)}


def _labelled_ids(store: Store, run_id: str) -> list[str]:
    """What a label may name besides the conversation: the run's top-level gates and scorers (those ``calibrate``
    measures), each once."""
    plan = store.plan(run_id)
    return list(dict.fromkeys([*plan.gate_ids, *plan.scorer_ids]))


def check_label_target(store: Store, run_id: str, scorer_id: str) -> None:
    """A label names the conversation (``''``) or one of the run's top-level gates and scorers, nothing else: an
    arbitrary id would be a label ``calibrate`` never reads, and text a person typed there stored as it is."""
    allowed = _labelled_ids(store, run_id)
    if scorer_id and scorer_id not in allowed:
        raise UsageError(f"'{scorer_id}' is not a top-level gate or scorer of run {run_id}",
                         f"label the conversation (scorer \"\") or one of: {', '.join(allowed) or 'none'}")


def turn_key(turn: TurnRecord) -> tuple[str, list[str]]:
    """What two transcripts are compared by, turn by turn: the user's message and every message's text and calls."""
    said = [f"{m.get('role')}: {message_text(m)} {m.get('tool_calls') or ''}" for m in turn.output if isinstance(m, dict)]
    return turn.input, said


def first_difference(a: ItemResult, b: ItemResult) -> int | None:
    """The index of the first turn where two plays of a conversation differ (one has it and the other not, or the user
    or the agent said something else); ``None`` when they are the same throughout."""
    for n in range(max(len(a.turns), len(b.turns))):
        if n >= len(a.turns) or n >= len(b.turns) or turn_key(a.turns[n]) != turn_key(b.turns[n]):
            return (a.turns[n] if n < len(a.turns) else b.turns[n]).index
    return None


def comparison(store: Store, run_a: str, run_b: str) -> dict[str, Any]:
    """Run B against run A: the paired statistics of ``compare`` (docs/history.md#comparing-runs) and each pair of
    conversations with its statuses and the first turn where their transcripts differ."""
    a, b = load_run(store, run_a), load_run(store, run_b)
    items_a, items_b = list(a.items()), list(b.items())
    names = conversation_names([*items_a, *items_b])
    stats = paired_stats(items_a, items_b)
    pairs = []
    matched = pair_conversations(items_a, items_b)
    only_a = {identity_of(item_a) for item_a, item_b in matched if item_a is not None and item_b is None}
    only_b = {identity_of(item_b) for item_a, item_b in matched if item_a is None and item_b is not None}
    for item_a, item_b in matched:
        either = item_a or item_b
        assert either is not None
        # the same id in both runs, other content: listed apart, marked as ``compare`` marks it (docs/view.md)
        changed = identity_of(either) in only_a & only_b
        name = names[identity_of(either)] + (" (changed)" if changed else "")
        pairs.append({"identity": identity_of(either), "name": name, "changed": changed,
                      "a": None if item_a is None else {"index": item_a.index, "status": status_word(item_a)},
                      "b": None if item_b is None else {"index": item_b.index, "status": status_word(item_b)},
                      "first_difference": first_difference(item_a, item_b) if item_a and item_b else None})
    text = None
    if stats is not None:
        text = {"pass_fail": pass_fail_line(stats.pass_fail), "figures": [list(r) for r in figure_rows(stats)],
                "status": status_line(stats), "detectable": [detectable_line(d) for d in stats.detectable],
                "unchanged": stats.unchanged}
    return {"a": _side(a.result.to_json(items=[])), "b": _side(b.result.to_json(items=[])),
            "stats": None if stats is None else stats.to_json(), "text": text, "pairs": pairs}


def _side(data: dict[str, Any]) -> dict[str, Any]:
    return {k: data[k] for k in ("run_id", "dataset", "target", "verdict", "scores", "status")}


def compared_conversation(store: Store, run_a: str, run_b: str, identity: str) -> dict[str, Any]:
    """One conversation of both runs side by side, with the first turn where they differ."""
    def side(run_id: str) -> ItemResult | None:
        run_id = store.require_run(run_id)["id"]
        rows = list(store.query("SELECT item_index FROM items WHERE run_id = ? AND identity = ?", [run_id, identity]))
        return item_at(store, run_id, rows[0]["item_index"]) if rows else None

    if not identity:
        raise UsageError("which conversation? give ?identity=ID", "an identity as /api/compare/A/B lists it")
    item_a, item_b = side(run_a), side(run_b)
    if item_a is None and item_b is None:  # a 404, as for an unknown run or index (was a 200 of two nulls)
        raise StoreError(f"neither run has a conversation of identity '{identity}'",
                         "an identity as /api/compare/A/B lists it")
    return {"identity": identity, "a": None if item_a is None else transcript(item_a),
            "b": None if item_b is None else transcript(item_b),
            "first_difference": first_difference(item_a, item_b) if item_a and item_b else None}
