"""The SQLite schema, as numbered, append-only migrations applied whenever the store opens.

Never edit a migration that has shipped: add a new one at the end of ``MIGRATIONS``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime

Migration = Callable[[sqlite3.Connection], None]


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


MIGRATIONS: list[tuple[str, Migration]] = [
    ("001_initial", m001_initial),
    ("002_run_item_indexes", m002_run_item_indexes),
]


def apply(conn: sqlite3.Connection) -> list[str]:
    """Apply every migration not yet recorded, each in its own transaction; returns their names."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    done = {row[0] for row in conn.execute("SELECT name FROM migrations")}
    applied = []
    for name, migration in MIGRATIONS:
        if name in done:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            # another process may have applied it while we waited for the lock
            if conn.execute("SELECT 1 FROM migrations WHERE name = ?", (name,)).fetchone():
                conn.execute("COMMIT")
                continue
            migration(conn)
            conn.execute(
                "INSERT INTO migrations (name, applied_at) VALUES (?, ?)",
                (name, datetime.now(UTC).isoformat()),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        applied.append(name)
    return applied
