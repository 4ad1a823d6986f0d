"""SQLite storage through sqlite-utils: runs, items, turns, scores, scorers, LLM calls.

The schema lives in ``migrations.py`` and is applied whenever a store opens. WAL mode and a busy
timeout let several processes write one file; each finished conversation is written in one
``BEGIN IMMEDIATE`` transaction, so an interrupted run keeps everything that finished.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import migrations
from .aggregate import Plan
from .errors import StoreError
from .result import ItemResult, Summary, TurnRecord
from .scorers.base import Outcome
from .secrets import Redactor

if TYPE_CHECKING:
    import sqlite_utils

BUSY_TIMEOUT_MS = 30_000


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _outcomes(outcomes: dict[str, Outcome]) -> dict[str, Any]:
    return {key: outcome.to_json() for key, outcome in outcomes.items()}


def _load_outcomes(text: str | None) -> dict[str, Outcome]:
    return {key: Outcome.from_json(value) for key, value in json.loads(text or "{}").items()}


def _turn_record(row: dict[str, Any]) -> TurnRecord:
    gates = json.loads(row["gate_scores"]).get("outcomes", {})
    scores = json.loads(row["scores"])
    return TurnRecord(row["turn_index"], row["input"], json.loads(row["output"]), row["duration_ms"] or 0.0,
                      {k: Outcome.from_json(v) for k, v in gates.items()},
                      {k: Outcome.from_json(v) for k, v in scores.get("outcomes", {}).items()},
                      scores.get("thresholds", {}))


def git_commit(folder: Path) -> str | None:
    """The current git commit of the folder holding the dataset, if it is in a repository."""
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


class Store:
    """One SQLite file of runs. Open it, write runs as they happen, read them back."""

    def __init__(self, path: str | Path, redactor: Redactor | None = None) -> None:
        self.path = str(path)
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000,
                                   check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            migrations.apply(conn)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open database {self.path}: {exc}",
                             "check --db PATH points at an evalcli SQLite file (or a new path)") from None
        self.conn = conn
        self._db: sqlite_utils.Database | None = None
        self.redact = redactor or Redactor()
        self._fresh: dict[str, set[int]] = {}
        """Runs begun (not resumed) by this store, with the item indexes written so far: nothing to replace."""

    @property
    def db(self) -> sqlite_utils.Database:
        """The sqlite-utils view of the file, imported on first use (it pulls in numpy when installed: ~0.2 s)."""
        if self._db is None:
            import sqlite_utils

            self._db = sqlite_utils.Database(self.conn)
        return self._db

    def query(self, sql: str, params: Any = ()) -> Iterator[dict[str, Any]]:
        """Rows as dicts, like ``sqlite_utils.Database.query``, without importing sqlite-utils on the run path."""
        cursor = self.conn.execute(sql, params)
        columns = [d[0] for d in cursor.description]
        for row in cursor:
            yield dict(zip(columns, row, strict=True))

    def close(self) -> None:
        self.conn.close()

    def _write(self, statements: list[tuple[str, Any]]) -> None:
        """Run statements in one immediate transaction (taken at once, so writers queue instead of deadlocking)."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for sql, params in statements:
                if isinstance(params, list) and not params:
                    continue  # executemany of no rows (e.g. a run with no registered scorers)
                if isinstance(params, list) and isinstance(params[0], (tuple, list)):
                    self.conn.executemany(sql, params)
                else:
                    self.conn.execute(sql, params)
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def _text(self, value: Any) -> str:
        return self.redact(value if isinstance(value, str) else _dumps(value))

    # -- writing a run ---------------------------------------------------------------------------

    def begin_run(self, run_id: str, dataset: Any, plan: Plan, options: Any, *, resume: bool = False) -> None:
        """Record a new run (status ``running``) with its registered scorers, or reopen one to resume."""
        if resume:
            if self.run(run_id) is None:
                raise StoreError(f"no run {run_id} in {self.path}", "see 'evalcli runs' for the ids")
            self._write([("UPDATE runs SET status = 'running', finished_at = NULL WHERE id = ?", (run_id,))])
            return
        selection = getattr(options, "selection", None)
        stored_options = {
            "plan": plan.to_json(),
            "filter": getattr(selection, "filter", None), "shard": getattr(selection, "shard", None),
            "limit": getattr(selection, "limit", None), "strict": getattr(options, "strict", False),
            "max_errors": getattr(options, "max_errors", 0),
            "only_indexes": sorted(getattr(options, "only_indexes", None) or []) or None,
        }
        registered = {s.id: s for s in dataset.all_specs() if s.registered}
        self._fresh[run_id] = set()
        self._write([
            ("INSERT INTO runs (id, dataset, dataset_hash, target, started_at, status, options, git_commit) "
             "VALUES (?, ?, ?, ?, ?, 'running', ?, ?)",
             (run_id, dataset.path, dataset.hash, dataset.target_spec, now(), _dumps(stored_options),
              git_commit(Path(dataset.path).resolve().parent))),
            ("INSERT INTO scorers (run_id, scorer_id, kind, spec) VALUES (?, ?, ?, ?)",
             [(run_id, s.id, s.kind, self._text(s.spec())) for s in registered.values()]),
        ])

    def write_item(self, run_id: str, result: ItemResult, registered: set[str]) -> None:
        """One finished conversation: its item row, turns, registered scores and LLM calls, in one transaction."""
        stamp = now()
        key = (run_id, result.index)
        written = self._fresh.get(run_id)
        first_write = written is not None and result.index not in written
        if written is not None:
            written.add(result.index)
        statements: list[tuple[str, Any]] = [] if first_write else [
            # a resumed or re-run conversation replaces its earlier rows (a new run has none to replace)
            ("DELETE FROM scores WHERE run_id = ? AND item_index = ?", key),
            ("DELETE FROM turns WHERE run_id = ? AND item_index = ?", key),
            ("DELETE FROM llm_calls WHERE run_id = ? AND item_index = ?", key),
            ("DELETE FROM items WHERE run_id = ? AND item_index = ?", key),
        ]
        statements += [
            ("INSERT INTO items (run_id, item_index, item_id, tags, form, status, error, traceback, thread_id, "
             "resource_id, input, gate_scores, scores, duration_ms, finished_at) "
             "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
             (run_id, result.index, result.id, _dumps(result.tags), result.form, result.status,
              self.redact(result.error) if result.error else None,
              self.redact(result.traceback) if result.traceback else None,
              result.thread_id, result.resource_id, self.redact(result.turns[0].input) if result.turns else None,
              self._text(_outcomes(result.gate_scores)), self._text(_outcomes(result.scores)),
              result.duration_ms, stamp)),
        ]
        statements.append((
            "INSERT INTO turns (run_id, item_index, turn_index, input, output, thread_id, resource_id, duration_ms, "
            "gate_scores, scores) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(run_id, result.index, t.index, self.redact(t.input), self._text(t.output), result.thread_id,
              result.resource_id, t.duration_ms,
              self._text({"outcomes": _outcomes(t.gate_scores)}),
              self._text({"outcomes": _outcomes(t.scores), "thresholds": t.thresholds}))
             for t in result.turns]))
        rows: list[tuple[Any, ...]] = []
        if result.status == "ok":
            for role, outcomes in (("gate", result.gate_scores), ("scorer", result.scores)):
                for scorer_id, outcome in outcomes.items():
                    if scorer_id in registered and not outcome.not_scorable:
                        rows.append((run_id, result.index, result.id, None, result.thread_id, scorer_id, role,
                                     outcome.score, self.redact(outcome.reason) if outcome.reason else None, stamp))
            for turn in result.turns:
                for role, outcomes in (("gate", turn.gate_scores), ("scorer", turn.scores)):
                    for scorer_id, outcome in outcomes.items():
                        if scorer_id in registered and not outcome.not_scorable:
                            rows.append((run_id, result.index, result.id, turn.index, result.thread_id, scorer_id,
                                         role, outcome.score,
                                         self.redact(outcome.reason) if outcome.reason else None, stamp))
        statements.append(("INSERT INTO scores (run_id, item_index, item_id, turn_index, thread_id, scorer_id, role, "
                           "score, reason, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows))
        statements.append((
            "INSERT INTO llm_calls (run_id, item_index, turn_index, purpose, model, prompt_tokens, completion_tokens, "
            "cost, cache_hit, duration_ms, created_at) VALUES (?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(run_id, result.index, r.purpose, r.model, r.prompt_tokens, r.completion_tokens, r.cost,
              int(r.cache_hit), r.duration_ms, stamp) for r in result.usage]))
        self._write([s for s in statements if not (isinstance(s[1], list) and not s[1])])

    def finish_run(self, run_id: str, summary: Summary, status: str, exit_code: int, usage: dict[str, Any],
                   completed: int) -> None:
        """The run's verdict, aggregate and totals; totals of LLM use are summed from its stored calls."""
        self._write([(
            "UPDATE runs SET finished_at = ?, status = ?, verdict = ?, exit_code = ?, total_items = ?, "
            "completed_items = ?, errors = ?, scores = ?, summary = ?, result = ?, "
            "llm_calls = (SELECT COUNT(*) FROM llm_calls WHERE run_id = runs.id), "
            "cache_hits = (SELECT COALESCE(SUM(cache_hit), 0) FROM llm_calls WHERE run_id = runs.id), "
            "prompt_tokens = (SELECT COALESCE(SUM(prompt_tokens), 0) FROM llm_calls WHERE run_id = runs.id), "
            "completion_tokens = (SELECT COALESCE(SUM(completion_tokens), 0) FROM llm_calls WHERE run_id = runs.id), "
            "cost = (SELECT COALESCE(SUM(cost), 0) FROM llm_calls WHERE run_id = runs.id) WHERE id = ?",
            (now(), status, summary.verdict, exit_code, summary.total_items, completed, summary.errors,
             _dumps(summary.to_json()["scores"]), _dumps(summary.to_json()["summary"]), self._text(summary.to_json()),
             run_id))])

    # -- reading ---------------------------------------------------------------------------------

    def run(self, run_id: str) -> dict[str, Any] | None:
        rows = list(self.query("SELECT * FROM runs WHERE id = ?", [run_id]))
        return rows[0] if rows else None

    def require_run(self, run_id: str) -> dict[str, Any]:
        row = self.run(run_id)
        if row is None:
            matches = [r["id"] for r in self.query("SELECT id FROM runs WHERE id LIKE ? LIMIT 2", [f"{run_id}%"])]
            if len(matches) == 1:
                return self.require_run(matches[0])
            raise StoreError(f"no run '{run_id}' in {self.path}", "list runs with 'evalcli runs --db PATH'")
        return row

    def runs(self, limit: int = 20) -> list[dict[str, Any]]:
        return list(self.query("SELECT * FROM runs ORDER BY id DESC LIMIT ?", [limit]))

    def load_items(self, run_id: str) -> Iterator[ItemResult]:
        """The stored conversations of a run, in dataset order, with their turns and outcomes.

        Streamed: items and turns are read side by side (both ordered by item index), so reading back
        a large run holds one conversation at a time, never the whole run.
        """
        turn_rows = self.query("SELECT * FROM turns WHERE run_id = ? ORDER BY item_index, turn_index", [run_id])
        pending = next(turn_rows, None)
        for row in self.query("SELECT * FROM items WHERE run_id = ? ORDER BY item_index", [run_id]):
            turns: list[TurnRecord] = []
            while pending is not None and pending["item_index"] <= row["item_index"]:
                if pending["item_index"] == row["item_index"]:
                    turns.append(_turn_record(pending))
                pending = next(turn_rows, None)
            yield ItemResult(row["item_index"], row["item_id"], json.loads(row["tags"]), row["form"], row["status"],
                             row["thread_id"], row["resource_id"], turns,
                             _load_outcomes(row["gate_scores"]), _load_outcomes(row["scores"]),
                             row["error"], row["traceback"], row["duration_ms"] or 0.0)

    def plan(self, run_id: str) -> Plan:
        options = json.loads(self.require_run(run_id)["options"] or "{}")
        return Plan.from_json(options["plan"])
