"""The schema a new database gets at once: what the migrations of ``migrations.MIGRATIONS`` up to and including
``SCHEMA_AT`` leave in ``sqlite_master`` (each statement as SQLite stored it), created in one transaction without
sqlite-utils. Running them one by one imported sqlite-utils (and with it click, pluggy and dateutil) and rewrote
tables: about 0.1 s of every first run on a new file (docs/performance.md "Start-up and finish").

Generated, never edited by hand: after adding a migration, run ``python -m evalcli.store.migrations`` (it
rewrites this file); tests/test_startup.py checks that it equals what the migrations make."""

from __future__ import annotations

SCHEMA_AT = "011_run_selected"
"""The last migration this schema includes; migrations after it are applied one by one, as on any database."""

# fmt: off
# ruff: noqa: E501  (statements exactly as SQLite stored them)
STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)""",
    """CREATE TABLE runs (
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
        , "dataset_path" TEXT, selected INTEGER)""",
    """CREATE INDEX runs_started_at ON runs(started_at)""",
    """CREATE TABLE items (
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
            finished_at TEXT NOT NULL, "passed" INTEGER, "outcomes" TEXT, "stop_reason" TEXT, "metadata" TEXT, "repeats" INTEGER NOT NULL DEFAULT 1, "gate_plays" TEXT, "identity" TEXT NOT NULL DEFAULT '', "content" TEXT NOT NULL DEFAULT '',
            UNIQUE (run_id, item_index)
        )""",
    """CREATE TABLE turns (
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
            scores TEXT NOT NULL DEFAULT '{}', "item_id" TEXT, "simulated" INTEGER NOT NULL DEFAULT 0, "passed" INTEGER, "outcomes" TEXT, "structured" TEXT, "interrupt" TEXT, "resume" TEXT, "output_retries" INTEGER NOT NULL DEFAULT 0,
            UNIQUE (run_id, item_index, turn_index),
            FOREIGN KEY (run_id, item_index) REFERENCES items(run_id, item_index)
        )""",
    """CREATE TABLE scorers (
            run_id TEXT NOT NULL REFERENCES runs(id),
            scorer_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            spec TEXT NOT NULL,
            PRIMARY KEY (run_id, scorer_id)
        )""",
    """CREATE TABLE scores (
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
            created_at TEXT NOT NULL, "agreement" TEXT, "samples" TEXT,
            FOREIGN KEY (run_id, item_index) REFERENCES items(run_id, item_index)
        )""",
    """CREATE INDEX scores_run_scorer ON scores(run_id, scorer_id)""",
    """CREATE TABLE llm_calls (
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
        )""",
    """CREATE TABLE llm_cache (
            key TEXT PRIMARY KEY,
            model TEXT NOT NULL,
            response TEXT NOT NULL,
            created_at TEXT NOT NULL,
            hits INTEGER NOT NULL DEFAULT 0
        )""",
    """CREATE INDEX scores_run_item ON scores(run_id, item_index)""",
    """CREATE INDEX llm_calls_run_item ON llm_calls(run_id, item_index)""",
    """CREATE INDEX "turns_run_item_id"
    ON "turns" ("run_id", "item_id")""",
    """CREATE INDEX "items_run_passed"
    ON "items" ("run_id", "passed")""",
    """CREATE INDEX "runs_dataset"
    ON "runs" ("dataset", "id")""",
    """CREATE TABLE "calibrations" (
   "id" INTEGER PRIMARY KEY,
   "run_id" TEXT NOT NULL REFERENCES "runs"("id"),
   "dataset" TEXT NOT NULL,
   "scorer_id" TEXT NOT NULL,
   "kind" TEXT NOT NULL,
   "spec" TEXT NOT NULL,
   "model" TEXT,
   "prompt_version" TEXT,
   "labels" INTEGER NOT NULL,
   "compared" INTEGER NOT NULL,
   "agreed" INTEGER NOT NULL,
   "errors" INTEGER,
   "not_scorable" INTEGER,
   "accuracy" REAL,
   "kappa" REAL,
   "mae" REAL,
   "fleiss_kappa" REAL,
   "metrics" TEXT NOT NULL,
   "created_at" TEXT NOT NULL
)""",
    """CREATE INDEX "calibrations_dataset_scorer"
    ON "calibrations" ("dataset", "scorer_id", "id")""",
    """CREATE INDEX "calibrations_run"
    ON "calibrations" ("run_id")""",
    """CREATE INDEX "items_run_identity"
    ON "items" ("run_id", "identity")""",
    """CREATE TABLE plays (
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
        )""",
    """CREATE TABLE labels (
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
        )""",
    """CREATE INDEX labels_dataset_identity ON labels(dataset, identity, scorer_id, id)""",
    """CREATE INDEX labels_run_item ON labels(run_id, item_index)""",
    """CREATE INDEX items_run_view ON items(run_id, (CASE WHEN status != 'ok' THEN 0 WHEN passed = 0 THEN 1 ELSE 2 END),
                                             item_index, item_id, status, passed, finished_at, duration_ms, input,
                                             scores, gate_scores)""",
    """CREATE INDEX items_run_repeats ON items(run_id, repeats)
        """,
)
# fmt: on

