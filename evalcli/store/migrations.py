"""The SQLite schema, as numbered, append-only migrations applied whenever the store opens.

Never edit a migration that has shipped: add a new one at the end of ``MIGRATIONS``.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

from ..identity import EXPLICIT, LEGACY


def rollback(conn: Any) -> None:
    """Undo the transaction a failed write left open: only when one is (an error SQLite met, a full disk or an
    interrupted statement, may have rolled it back already, and a ROLLBACK then would raise "no transaction is
    active" in place of what went wrong)."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")

Migration = Callable[[sqlite3.Connection], None]


def sqlite_utils_module() -> ModuleType:
    """sqlite-utils, imported without numpy and pandas when nothing has imported them yet: it only maps their
    number types for inserts, which evalcli never makes with them, and importing numpy was half of sqlite-utils'
    import (0.09-0.1 s of every run on a new database, measured: 0.19-0.22 s against 0.10-0.12 s)."""
    if "sqlite_utils" not in sys.modules:
        hidden = [name for name in ("numpy", "pandas") if name not in sys.modules]
        for name in hidden:
            sys.modules[name] = None  # type: ignore[assignment]  # importing it now raises ImportError
        try:
            import sqlite_utils  # noqa: F401
        finally:
            for name in hidden:
                if sys.modules.get(name) is None:
                    del sys.modules[name]  # importable again, by anyone
    return sys.modules["sqlite_utils"]


def _script(conn: sqlite3.Connection, script: str) -> None:
    # executescript() would COMMIT the migration's open transaction, so run statement by statement
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def m001_initial(conn: sqlite3.Connection) -> None:
    _script(
        conn,
        """
        CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            dataset TEXT NOT NULL,
            dataset_hash TEXT,
            target TEXT NOT NULL,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            status TEXT NOT NULL,
            verdict TEXT,
            exit_code INTEGER,
            total_items INTEGER NOT NULL DEFAULT 0,
            completed_items INTEGER NOT NULL DEFAULT 0,
            errors INTEGER NOT NULL DEFAULT 0,
            scores TEXT,
            summary TEXT,
            result TEXT,
            options TEXT,
            git_commit TEXT,
            prompt_tokens INTEGER NOT NULL DEFAULT 0,
            completion_tokens INTEGER NOT NULL DEFAULT 0,
            cost REAL NOT NULL DEFAULT 0,
            llm_calls INTEGER NOT NULL DEFAULT 0,
            cache_hits INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX runs_started_at ON runs(started_at);

        CREATE TABLE items (
            id INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES runs(id),
            item_index INTEGER NOT NULL,
            item_id TEXT NOT NULL,
            tags TEXT NOT NULL DEFAULT '[]',
            form TEXT NOT NULL,
            status TEXT NOT NULL,
            error TEXT,
            traceback TEXT,
            thread_id TEXT,
            resource_id TEXT,
            input TEXT,
            gate_scores TEXT NOT NULL DEFAULT '{}',
            scores TEXT NOT NULL DEFAULT '{}',
            duration_ms REAL,
            finished_at TEXT NOT NULL,
            UNIQUE (run_id, item_index)
        );
        CREATE INDEX items_run_id ON items(run_id);

        CREATE TABLE turns (
            id INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES runs(id),
            item_index INTEGER NOT NULL,
            turn_index INTEGER NOT NULL,
            input TEXT NOT NULL,
            output TEXT NOT NULL,
            thread_id TEXT,
            resource_id TEXT,
            duration_ms REAL,
            gate_scores TEXT NOT NULL DEFAULT '{}',
            scores TEXT NOT NULL DEFAULT '{}',
            UNIQUE (run_id, item_index, turn_index),
            FOREIGN KEY (run_id, item_index) REFERENCES items(run_id, item_index)
        );
        CREATE INDEX turns_run_item ON turns(run_id, item_index);

        CREATE TABLE scorers (
            run_id TEXT NOT NULL REFERENCES runs(id),
            scorer_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            spec TEXT NOT NULL,
            PRIMARY KEY (run_id, scorer_id)
        );

        CREATE TABLE scores (
            id INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES runs(id),
            item_index INTEGER NOT NULL,
            item_id TEXT NOT NULL,
            turn_index INTEGER,
            thread_id TEXT,
            scorer_id TEXT NOT NULL,
            role TEXT NOT NULL,
            score REAL,
            reason TEXT,
            created_at TEXT NOT NULL,
            FOREIGN KEY (run_id, item_index) REFERENCES items(run_id, item_index)
        );
        CREATE INDEX scores_run_scorer ON scores(run_id, scorer_id);

        CREATE TABLE llm_calls (
            id INTEGER PRIMARY KEY,
            run_id TEXT REFERENCES runs(id),
            item_index INTEGER,
            turn_index INTEGER,
            purpose TEXT NOT NULL,
            model TEXT NOT NULL,
            prompt_tokens INTEGER NOT NULL DEFAULT 0,
            completion_tokens INTEGER NOT NULL DEFAULT 0,
            cost REAL NOT NULL DEFAULT 0,
            cache_hit INTEGER NOT NULL DEFAULT 0,
            duration_ms REAL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX llm_calls_run ON llm_calls(run_id);

        CREATE TABLE llm_cache (
            key TEXT PRIMARY KEY,
            model TEXT NOT NULL,
            response TEXT NOT NULL,
            created_at TEXT NOT NULL,
            hits INTEGER NOT NULL DEFAULT 0
        );
        """
    )


def m002_run_item_indexes(conn: sqlite3.Connection) -> None:
    # write_item() replaces a conversation's rows by (run_id, item_index); without these indexes each
    # write scanned every row of the run, so a large run slowed down quadratically
    _script(
        conn,
        """
        CREATE INDEX items_run_item ON items(run_id, item_index);
        CREATE INDEX scores_run_item ON scores(run_id, item_index);
        CREATE INDEX llm_calls_run_item ON llm_calls(run_id, item_index);
        """
    )


def m003_outcomes_and_identity(conn: sqlite3.Connection) -> None:
    """Items and turns share one outcomes layout (``outcomes`` JSON beside ``gate_scores``/``scores`` maps
    of id -> score, and ``passed``); turns carry their ``item_id`` and ``simulated`` flag; items their
    ``stop_reason``; runs the dataset as typed (``dataset`` becomes its stable name). Rows written by
    earlier versions are converted."""
    db = sqlite_utils_module().Database(conn)
    items, turns, runs = db.table("items"), db.table("turns"), db.table("runs")
    items.add_column("passed", int)
    items.add_column("outcomes", str)
    items.add_column("stop_reason", str)
    turns.add_column("item_id", str)
    turns.add_column("simulated", int, not_null_default=0)
    turns.add_column("passed", int)
    turns.add_column("outcomes", str)
    runs.add_column("dataset_path", str)
    conn.execute("UPDATE runs SET dataset_path = dataset")
    for row in list(db.query("SELECT id, status, gate_scores, scores FROM items")):
        gates, scorers = json.loads(row["gate_scores"] or "{}"), json.loads(row["scores"] or "{}")
        items.update(row["id"], {"outcomes": json.dumps({"gates": _gates(gates), "scorers": scorers}),
                                 "gate_scores": json.dumps(_numbers(gates)), "scores": json.dumps(_numbers(scorers)),
                                 "passed": int(row["status"] == "ok" and not _missed(gates))})
    for row in list(db.query("SELECT id, gate_scores, scores FROM turns")):
        gates = json.loads(row["gate_scores"] or "{}").get("outcomes", {})
        scored = json.loads(row["scores"] or "{}")
        scorers, thresholds = scored.get("outcomes", {}), scored.get("thresholds", {})
        for key, threshold in thresholds.items():
            if key in scorers:
                scorers[key]["threshold"] = threshold
        turns.update(row["id"], {"outcomes": json.dumps({"gates": _gates(gates), "scorers": scorers}),
                                 "gate_scores": json.dumps(_numbers(gates)), "scores": json.dumps(_numbers(scorers)),
                                 "passed": int(not _missed(gates))})
    conn.execute("UPDATE turns SET item_id = (SELECT items.item_id FROM items WHERE items.run_id = turns.run_id "
                 "AND items.item_index = turns.item_index)")
    turns.create_index(["run_id", "item_id"], index_name="turns_run_item_id")
    items.create_index(["run_id", "passed"], index_name="items_run_passed")
    runs.create_index(["dataset", "id"], index_name="runs_dataset")


def m004_judge_agreement(conn: sqlite3.Connection) -> None:
    """Scores of a repeated or panel judge keep each sample and their agreement (``k/N``); ``calibrations`` holds
    what ``evalcli calibrate`` measured: per scorer of a run, its spec, model, prompt version, counts and
    metrics (docs/recorded.md)."""
    db = sqlite_utils_module().Database(conn)
    scores = db.table("scores")
    scores.add_column("agreement", str)
    scores.add_column("samples", str)
    db.table("calibrations").create({
        "id": int, "run_id": str, "dataset": str, "scorer_id": str, "kind": str, "spec": str, "model": str,
        "prompt_version": str, "labels": int, "compared": int, "agreed": int, "errors": int, "not_scorable": int,
        "accuracy": float, "kappa": float, "mae": float, "fleiss_kappa": float, "metrics": str, "created_at": str,
    }, pk="id", not_null={"run_id", "dataset", "scorer_id", "kind", "spec", "labels", "compared", "agreed",
                          "metrics", "created_at"}, foreign_keys=[("run_id", "runs", "id")])
    db.table("calibrations").create_index(["dataset", "scorer_id", "id"], index_name="calibrations_dataset_scorer")
    db.table("calibrations").create_index(["run_id"], index_name="calibrations_run")


def m005_framework_turns(conn: sqlite3.Connection) -> None:
    """What framework agents report per turn (docs/targets/frameworks.md): its structured result, the interrupt it ended in and what
    resumed one (JSON text; NULL when none), its output retries; and each item's ``metadata`` (JSON)."""
    db = sqlite_utils_module().Database(conn)
    turns, items = db.table("turns"), db.table("items")
    turns.add_column("structured", str)
    turns.add_column("interrupt", str)
    turns.add_column("resume", str)
    turns.add_column("output_retries", int, not_null_default=0)
    items.add_column("metadata", str)


def m006_item_repeats(conn: sqlite3.Connection) -> None:
    """Items of a ``--repeat`` run keep how often they were played and, per gate, in how many plays it was scorable
    and passed (``gate_plays``: id -> [passed, scorable]), so a resumed run's pass@k and pass^k cover every
    conversation, not only those played after the resume."""
    items = sqlite_utils_module().Database(conn).table("items")
    items.add_column("repeats", int, not_null_default=1)
    items.add_column("gate_plays", str)


def m007_conversation_identity(conn: sqlite3.Connection) -> None:
    """Each conversation keeps its identity across runs and its content's digest (docs/identity.md: ``evalcli.identity``).

    Rows written before evalcli kept them are converted as well as what they stored allows: an item whose id is not
    its position gave its own id (``id:<id>``, as now); one known only by its position is named by a digest of its
    form and scripted messages, numbered like identical items (``stored:<digest>``), so such old runs still pair
    with each other by what they asked, never by position. Their content digest is unknown (``''``): none of them
    reads as changed."""
    db = sqlite_utils_module().Database(conn)
    items = db.table("items")
    items.add_column("identity", str, not_null_default="")
    items.add_column("content", str, not_null_default="")
    rows = db.query("SELECT items.id AS row_id, items.run_id, items.item_index, items.item_id, items.form, "
                    "(SELECT json_group_array(input) FROM (SELECT input FROM turns WHERE turns.run_id = items.run_id "
                    "AND turns.item_index = items.item_index AND turns.simulated = 0 ORDER BY turn_index)) AS inputs "
                    "FROM items ORDER BY items.run_id, items.item_index")
    seen: dict[tuple[str, str], int] = {}
    updates = []
    for row in list(rows):
        if row["item_id"] != str(row["item_index"]):
            identity = EXPLICIT + row["item_id"]
        else:
            text = json.dumps([row["form"], json.loads(row["inputs"] or "[]")], ensure_ascii=False)
            digest = LEGACY + hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]
            nth = seen[(row["run_id"], digest)] = seen.get((row["run_id"], digest), 0) + 1
            identity = digest if nth == 1 else f"{digest}#{nth}"
        updates.append((identity, row["row_id"]))
    conn.executemany("UPDATE items SET identity = ? WHERE id = ?", updates)
    items.create_index(["run_id", "identity"], index_name="items_run_identity")


def m008_plays(conn: sqlite3.Connection) -> None:
    """Every play of a ``--repeat`` run (docs/identity.md): per conversation and play (numbered from 1), its status and error,
    whether every gate passed, its own outcomes (the ``outcomes`` layout, reasons included) and its turns (JSON: each
    turn as in the JSON output's ``turns``, messages and per-turn outcomes). ``items`` and ``turns`` keep the reduced
    result (the means); runs stored before have no plays."""
    _script(
        conn,
        """
        CREATE TABLE plays (
            id INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES runs(id),
            item_index INTEGER NOT NULL,
            play INTEGER NOT NULL,
            status TEXT NOT NULL,
            passed INTEGER NOT NULL,
            error TEXT,
            outcomes TEXT NOT NULL DEFAULT '{}',
            turns TEXT NOT NULL DEFAULT '[]',
            duration_ms REAL,
            UNIQUE (run_id, item_index, play),
            FOREIGN KEY (run_id, item_index) REFERENCES items(run_id, item_index)
        )
        """,
    )


def m009_labels(conn: sqlite3.Connection) -> None:
    """A person's labels made in ``evalcli view`` (docs/view.md): per conversation (``scorer_id`` ``''``) or per
    gate or scorer of it, a score from 0 to 1 (pass 1, fail 0) with a note, who and when. Labels are appended, never
    updated: the newest of a conversation's identity and scorer is its label. ``dataset`` is the run's stable name and
    ``identity`` the conversation's (docs/identity.md), so a label follows the conversation into other runs.

    With them, the indexes that let ``evalcli view`` page through a run of 100,000 conversations without reading
    them: ``items_run_view`` holds what a page sorts, filters, counts and searches by (failures first: the
    expression ``browse.STATUS_RANK``), ``items_run_repeats`` finds a run's repeated conversations."""
    _script(
        conn,
        """
        CREATE TABLE labels (
            id INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES runs(id),
            item_index INTEGER NOT NULL,
            item_id TEXT NOT NULL,
            identity TEXT NOT NULL,
            dataset TEXT NOT NULL,
            scorer_id TEXT NOT NULL DEFAULT '',
            score REAL,
            note TEXT,
            reviewer TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX labels_dataset_identity ON labels(dataset, identity, scorer_id, id);
        CREATE INDEX labels_run_item ON labels(run_id, item_index);
        CREATE INDEX items_run_view ON items(run_id, (CASE WHEN status != 'ok' THEN 0 WHEN passed = 0 THEN 1 ELSE 2 END),
                                             item_index, item_id, status, passed, finished_at, duration_ms, input,
                                             scores, gate_scores);
        CREATE INDEX items_run_repeats ON items(run_id, repeats)
        """,
    )


DUPLICATE_INDEXES = ("items_run_id", "items_run_item", "turns_run_item", "llm_calls_run")
"""Indexes another one already holds: ``items(run_id)`` and ``items(run_id, item_index)`` are the UNIQUE (run_id,
item_index) constraint's own index, ``turns(run_id, item_index)`` a prefix of UNIQUE (run_id, item_index, turn_index),
``llm_calls(run_id)`` a prefix of ``llm_calls_run_item``. SQLite answers every query by those as fast, and each one
kept cost every written row another b-tree insert (docs/storage.md "Indexes")."""


def m010_no_duplicate_indexes(conn: sqlite3.Connection) -> None:
    """Drop ``DUPLICATE_INDEXES`` (a database made by any earlier version has them; a new one makes and drops them)."""
    for name in DUPLICATE_INDEXES:
        conn.execute(f"DROP INDEX IF EXISTS {name}")


def m011_run_selected(conn: sqlite3.Connection) -> None:
    """``runs.selected``: how many conversations a run selected, written when it begins (``total_items`` is written
    when it ends), so ``evalcli view`` can say how far a run in progress has got (docs/view.md)."""
    conn.execute("ALTER TABLE runs ADD COLUMN selected INTEGER")


def _numbers(outcomes: dict[str, Any]) -> dict[str, Any]:
    return {key: value.get("score") for key, value in outcomes.items()}


def _gate_missed(outcome: dict[str, Any]) -> bool:
    score = outcome.get("score")
    return not outcome.get("not_scorable") and (score is None or not score >= 1.0)


def _gates(outcomes: dict[str, Any]) -> dict[str, Any]:
    return {key: {**value, "passed": None if value.get("not_scorable") else not _gate_missed(value)}
            for key, value in outcomes.items()}


def _missed(outcomes: dict[str, Any]) -> bool:
    return any(_gate_missed(value) for value in outcomes.values())


MIGRATIONS: list[tuple[str, Migration]] = [
    ("001_initial", m001_initial),
    ("002_run_item_indexes", m002_run_item_indexes),
    ("003_outcomes_and_identity", m003_outcomes_and_identity),
    ("004_judge_agreement", m004_judge_agreement),
    ("005_framework_turns", m005_framework_turns),
    ("006_item_repeats", m006_item_repeats),
    ("007_conversation_identity", m007_conversation_identity),
    ("008_plays", m008_plays),
    ("009_labels", m009_labels),
    ("010_no_duplicate_indexes", m010_no_duplicate_indexes),
    ("011_run_selected", m011_run_selected),
]


def pending(conn: sqlite3.Connection) -> list[str]:
    """Names of the migrations not yet applied to this database (read-only: changes nothing)."""
    exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'migrations'").fetchone()
    done = {row[0] for row in conn.execute("SELECT name FROM migrations")} if exists else set()
    return [name for name, _ in MIGRATIONS if name not in done]


def apply(conn: sqlite3.Connection, *, fresh: bool = True) -> list[str]:
    """Apply every migration not yet recorded, each in its own transaction; returns their names. A database without
    tables gets the schema at once (``create_current``; not when ``fresh`` is false), then any later migration."""
    todo = set(pending(conn))
    if not todo:
        return []
    created = create_current(conn) if fresh and len(todo) == len(MIGRATIONS) else []
    if created:
        todo -= set(created)
        if not todo:
            return created
    conn.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    applied = []
    for name, migration in MIGRATIONS:
        if name not in todo:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            # another process may have applied it while we waited for the lock
            if conn.execute("SELECT 1 FROM migrations WHERE name = ?", (name,)).fetchone():
                conn.execute("COMMIT")
                continue
            migration(conn)
            conn.execute("INSERT INTO migrations (name, applied_at) VALUES (?, ?)", (name, datetime.now(UTC).isoformat()))
            conn.execute("COMMIT")
        except BaseException:
            rollback(conn)
            raise
        applied.append(name)
    return created + applied


def create_current(conn: sqlite3.Connection) -> list[str]:
    """Give a database without tables the schema of the migrations up to ``migrations_schema.SCHEMA_AT`` in one
    transaction, as if each had run (recorded in ``migrations``), without sqlite-utils; returns their names. Nothing
    is done (``[]``) when the database has a table: another process may have made it while we waited for the lock."""
    from .migrations_schema import SCHEMA_AT, STATEMENTS

    names = [name for name, _ in MIGRATIONS]
    if SCHEMA_AT not in names:
        return []
    covered = names[: names.index(SCHEMA_AT) + 1]
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table'").fetchone():
            conn.execute("COMMIT")
            return []
        for statement in STATEMENTS:
            conn.execute(statement)
        now = datetime.now(UTC).isoformat()
        conn.executemany("INSERT INTO migrations (name, applied_at) VALUES (?, ?)", [(name, now) for name in covered])
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise
    return covered


def schema_module_text() -> str:
    """The text of ``migrations_schema.py`` with the schema these migrations make now (run in a database in memory):
    ``python -m evalcli.store.migrations`` rewrites that module after a migration is added."""
    import sqlite3
    from pathlib import Path

    from . import migrations_schema

    conn = sqlite3.connect(":memory:", isolation_level=None)
    apply(conn, fresh=False)
    statements = [row[0] for row in conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid")]
    text = Path(migrations_schema.__file__).read_text(encoding="utf-8")
    head, _, rest = text.partition("SCHEMA_AT = ")
    _, _, rest = rest.partition("\n")
    body, _, tail = rest.partition("# fmt: on\n")
    doc = body.partition("STATEMENTS")[0]
    listed = "".join(f'    """{statement}""",\n' for statement in statements)
    return (f'{head}SCHEMA_AT = "{MIGRATIONS[-1][0]}"\n{doc}STATEMENTS: tuple[str, ...] = (\n{listed})\n'
            f"# fmt: on\n{tail}")


if __name__ == "__main__":
    from pathlib import Path

    from . import migrations_schema

    Path(migrations_schema.__file__).write_text(schema_module_text(), encoding="utf-8")
