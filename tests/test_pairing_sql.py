"""``diff`` and ``compare`` pair two runs in SQL and stream their conversations (docs/history.md#big-runs): on random
small runs (real CLI runs, then copies of them with conversations dropped, errored or edited in SQL) every answer
equals the one of the in-memory pairing they replaced (tests/pairing_reference.py)."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable
from pathlib import Path

from evalcli.store import compare_runs, diff_runs, load_run
from evalcli.store.store import Store
from tests import pairing_reference as old
from tests.conftest import CliResult

AGENT = """
import os, zlib

def answer(input, *, memory=None):
    roll = zlib.crc32((os.environ["PAIR_SEED"] + input).encode()) % 100
    return "Rain" if roll < 25 else "Sunny and Rain" if roll < 40 else "Sunny"
"""
ITEMS = 14


def _dataset() -> str:
    items = "".join(f"  - {{id: c{n}, inputs: ['q {n}', 'again {n}']}}\n" if n % 3 else
                    f"  - {{inputs: ['plain {n % 6}', 'again {n}']}}\n" for n in range(ITEMS))
    return "target: agent:answer\ngates: [{includes: Sunny}]\nscorers: [{excludes: Rain}]\ndata:\n" + items


def _copy(db: Path, run_id: str, new_id: str, rng: random.Random) -> str:
    """A copy of a stored run with some conversations dropped, some errored and some edited (another content under
    the same explicit id)."""
    conn = sqlite3.connect(db)
    indexes = [row[0] for row in conn.execute("SELECT item_index FROM items WHERE run_id = ?", (run_id,))]
    dropped = [index for index in indexes if rng.random() < 0.15]
    tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for table in tables:
        columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
        key = "id" if table == "runs" else "run_id"
        if key not in columns:
            continue
        kept = [c for c in columns if not (c == "id" and table != "runs")]
        picked = ", ".join("?" if c == key else c for c in kept)
        where = f" AND item_index NOT IN ({', '.join(map(str, dropped))})" if dropped and "item_index" in columns else ""
        conn.execute(f"INSERT INTO {table} ({', '.join(kept)}) SELECT {picked} FROM {table} WHERE {key} = ?{where}",
                     (new_id, run_id))
    for index in indexes:
        if index in dropped:
            continue
        roll = rng.random()
        if roll < 0.1:
            conn.execute("UPDATE items SET status = 'error' WHERE run_id = ? AND item_index = ?", (new_id, index))
        elif roll < 0.25:
            conn.execute("UPDATE items SET content = 'edited' WHERE run_id = ? AND item_index = ? AND identity LIKE "
                         "'id:%'", (new_id, index))
    conn.commit()
    conn.close()
    return new_id


def _expected_comparison(store: Store, run_ids: list[str]) -> old.Comparison:
    runs = [load_run(store, run_id) for run_id in run_ids]
    lists = [list(run.items(light=True)) for run in runs]
    expected = old._comparison(store, runs, lists)
    expected.paired = [old.paired_stats(lists[0], items) for items in lists[1:]]
    return expected


def test_streamed_pairing_equals_the_in_memory_pairing(workdir: Path, write: Callable[..., Path],
                                                       cli: Callable[..., CliResult]) -> None:
    write("agent.py", AGENT)
    write("d.yaml", _dataset())
    made = []
    for seed, repeat in (("a", "1"), ("b", "1"), ("c", "2"), ("d", "2")):
        done = cli("run", "d.yaml", "--json", "-", "--quiet", "--repeat", repeat, env={"PAIR_SEED": seed})
        assert done.code in (0, 1), done.stderr
        made.append(str(done.json["run_id"]))
    db, rng = workdir / "evalcli.db", random.Random(48)
    runs = [*made, *(_copy(db, run_id, f"{run_id[:-4]}CP{n:02d}", rng) for n, run_id in enumerate(made * 4))]
    store = Store.existing(db)
    try:
        checked = 0
        for _ in range(24):
            a, b, c = rng.sample(runs, 3)
            tolerance = rng.choice([0.0, 0.1])
            diff = diff_runs(store, a, b, tolerance, statistics=True)
            items_a, items_b = list(store.load_items(a, light=True)), list(store.load_items(b, light=True))
            assert diff.items == old._item_changes(items_a, items_b, tolerance)
            assert diff.stats == old.paired_stats(items_a, items_b)
            comparison, expected = compare_runs(store, [a, b, c], statistics=True), _expected_comparison(store, [a, b, c])
            assert comparison.rows == expected.rows
            assert comparison.differences == expected.differences
            assert (comparison.changed, comparison.names, comparison.identities) == (
                expected.changed, expected.names, expected.identities)
            assert comparison.paired == expected.paired
            checked += bool(diff.stats and diff.stats.only_a and comparison.changed and comparison.differences)
        assert checked >= 3  # the cases drop, edit and change conversations, not only equal ones
    finally:
        store.close()
