"""What the per-turn cost work keeps true (docs/performance.md "Runs of many conversations"): a sync target's threads
never outnumber the run's concurrency, a database of the previous schema loses only its duplicate indexes, and the one
redaction pass still hides a secret in every column a conversation writes."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from evalcli.store import migrations
from tests.conftest import CliResult

THREADS_AGENT = '''
import threading

seen = set()
lock = threading.Lock()

def reply(input, **options):
    with lock:
        seen.add(threading.get_ident())
        count = len(seen)
    return f"{input} (threads so far: {count}, alive: {threading.active_count()})"
'''


def test_a_sync_targets_threads_never_outnumber_the_concurrency(write: Callable[..., Path],
                                                                 cli: Callable[..., CliResult]) -> None:
    write("threads_agent.py", THREADS_AGENT)
    items = "".join(f"  - inputs: [a{i}, b{i}, c{i}]\n" for i in range(60))
    write("d.yaml", "target: threads_agent:reply\nconcurrency: 4\ngates: [{includes: threads}]\ndata:\n" + items)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    counts = [int(m["content"].split("threads so far: ")[1].split(",")[0])
              for item in result.json["items"] for turn in item["turns"] for m in turn["output"]]
    assert len(counts) == 180 and max(counts) <= 4, max(counts)  # before: 5-8 threads at concurrency 4


def _previous_schema(db: Path) -> None:
    """A database as the version before this one left it: every migration but the last."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for name, migration in migrations.MIGRATIONS[:-1]:
        migration(conn)
        conn.execute("INSERT INTO migrations VALUES (?, 'then')", (name,))
    conn.close()


def _indexes(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")}


def test_a_previous_database_loses_its_duplicate_indexes_and_keeps_its_runs(write: Callable[..., Path],
                                                                            cli: Callable[..., CliResult],
                                                                            workdir: Path) -> None:
    assert migrations.MIGRATIONS[-1][0] == "010_no_duplicate_indexes"
    db = workdir / "old.db"
    _previous_schema(db)
    assert set(migrations.DUPLICATE_INDEXES) <= _indexes(db)
    write("d.yaml", "target: agents:scripted\ngates: [{includes: city}]\ndata:\n"
                    "  - input: 'Paris=>city of Paris'\n  - inputs: ['Rome=>city of Rome', 'x=>not it']\n"
                    "  - input: 'y=>nope'\n")
    first = cli("run", "d.yaml", "--db", "old.db", "--json", "-")
    assert first.code == 1, first.stderr
    assert not set(migrations.DUPLICATE_INDEXES) & _indexes(db)
    assert {"items_run_view", "turns_run_item_id", "llm_calls_run_item"} <= _indexes(db)
    again = cli("run", "d.yaml", "--db", "old.db", "--resume", first.json["run_id"], "--json", "-")
    assert again.code == 1, again.stderr
    shown = cli("show", first.json["run_id"], "--db", "old.db", "--json", "-")
    assert shown.code in (0, 1) and [i["passed"] for i in shown.json["items"]] == [True, True, False]
    assert [t["output"][-1]["content"] for t in shown.json["items"][1]["turns"]] == ["city of Rome", "not it"]
