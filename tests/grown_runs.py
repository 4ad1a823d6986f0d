"""Runs grown to many conversations in SQL, for the big-run tests and benchmarks (docs/performance.md#big-runs):
one real CLI run's rows copied, so a run of 100,000 conversations is made in seconds."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def grow(db: Path, run_id: str, seed: int, size: int) -> None:
    """Copy a run's ``seed`` conversations (items, turns, scores) in SQL until it has ``size``: copy k of item c3 is
    item c3-k at index 3 + k * seed, with an identity of its own (so two grown runs pair as real runs do)."""
    conn = sqlite3.connect(db)
    conn.execute("CREATE TEMP TABLE k AS WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k "
                 f"WHERE n < {size // seed - 1}) SELECT n FROM k")
    changed = {"item_index": f"item_index + k.n * {seed}", "item_id": "item_id || '-' || k.n",
               "identity": "'id:' || item_id || '-' || k.n"}
    for table in ("items", "turns", "scores"):
        columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})") if row[1] != "id"]
        picked = ", ".join(changed.get(column, column) for column in columns)
        conn.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {picked} FROM {table}, k WHERE run_id = ?",
                     (run_id,))
    conn.execute("UPDATE runs SET total_items = ?, completed_items = ? WHERE id = ?", (size, size, run_id))
    conn.commit()
    conn.close()
