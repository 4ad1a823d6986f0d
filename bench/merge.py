"""``python bench/merge.py``: ``evalcli merge`` of 50 shard databases of 2,000 conversations each.

One real CLI run of a 20-conversation dataset (``--shard 1/50``) is grown to 2,000 conversations by copying its rows
in SQL (as bench/bigruns.py does), then its database is copied 49 times, each copy made shard I/50: its run id,
item indexes, ids and identities moved so the 50 shards never overlap. ``evalcli merge`` is timed as a whole process
(wall, CPU seconds, peak RSS) and checked exact: the merged run has every shard's rows, and a digest of its items,
turns and scores (without row ids and run ids, in item-index order) equals the digest of the shards' rows together.
Target (docs/ci.md, docs/performance.md#big-runs): under 60 s.

    python bench/merge.py                       # 50 shards x 2,000
    python bench/merge.py --shards 10 --size 500
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import json
import os
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bigruns import SEED, _evalcli, seed_dataset
from tests.grown_runs import grow

TABLES = ("items", "turns", "scores")


def make_shards(folder: Path, shards: int, size: int) -> list[Path]:
    seed_dataset(folder)
    first = folder / "shard-1.db"
    made = _evalcli(["run", "d.yaml", "--db", str(first), "--quiet", "--json", "-"], folder, {"BIG_VARIANT": "b"})
    if made.exit_code not in (0, 1):
        raise SystemExit(made.stderr[-2000:])
    run_id = json.loads(made.stdout)["run_id"]
    grow(first, run_id, SEED, size)
    paths = [first]
    for n in range(2, shards + 1):
        path = folder / f"shard-{n}.db"
        shutil.copyfile(first, path)
        _make_shard(path, run_id, f"{run_id[:-4]}{n:04d}", n, shards, size)
        paths.append(path)
    _make_shard(first, run_id, run_id, 1, shards, size)
    return paths


def _make_shard(path: Path, run_id: str, new_id: str, n: int, shards: int, size: int) -> None:
    """Shard ``n`` of ``shards``: its own run id, and conversations at indexes ``(n - 1) * size`` on, named ``-sN``."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA foreign_keys = OFF")
    options = json.loads(conn.execute("SELECT options FROM runs WHERE id = ?", (run_id,)).fetchone()[0] or "{}")
    options["shard"] = [n, shards]
    conn.execute("UPDATE runs SET id = ?, options = ? WHERE id = ?", (new_id, json.dumps(options), run_id))
    tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for table in tables:
        columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
        if "run_id" in columns:
            conn.execute(f"UPDATE {table} SET run_id = ? WHERE run_id = ?", (new_id, run_id))
        if "item_index" in columns and table in TABLES:
            conn.execute(f"UPDATE {table} SET item_index = item_index + ? WHERE run_id = ?", ((n - 1) * size, new_id))
    conn.execute("UPDATE items SET item_id = item_id || '-s' || ?, identity = 'id:' || item_id || '-s' || ? "
                 "WHERE run_id = ?", (n, n, new_id))
    conn.commit()
    conn.close()


def digest(paths: list[Path], run_ids: list[str] | None = None) -> tuple[dict[str, int], str]:
    """Row counts and one digest of the items, turns and scores of the runs (every run of each file when
    ``run_ids`` is None), without row ids and run ids, in (item index, ...) order: the shards hold disjoint item
    indexes, so their rows are merged by item index."""
    counts: dict[str, int] = {}
    hasher = hashlib.sha256()
    conns = [sqlite3.connect(f"file:{path}?mode=ro", uri=True) for path in paths]
    for table in TABLES:
        columns = [row[1] for row in conns[0].execute(f"PRAGMA table_info({table})")
                   if row[1] not in ("id", "run_id", "item_index")]
        picked = ", ".join(["item_index", *columns])
        where = f" WHERE run_id IN ({', '.join('?' * len(run_ids))})" if run_ids else ""
        order = ", ".join(str(i + 1) for i in range(len(columns) + 1))
        streams = [conn.execute(f"SELECT {picked} FROM {table}{where} ORDER BY {order}", run_ids or [])
                   for conn in conns]
        counts[table] = 0
        for row in heapq.merge(*streams, key=lambda row: row[0]):
            hasher.update(repr(row).encode())
            counts[table] += 1
    for conn in conns:
        conn.close()
    return counts, hasher.hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", type=int, default=50)
    parser.add_argument("--size", type=int, default=2000, help="conversations a shard (a multiple of 20)")
    parser.add_argument("--keep", type=Path, help="make the databases in this folder and keep them")
    args = parser.parse_args()
    if args.size % SEED:
        raise SystemExit(f"--size must be a multiple of {SEED}")
    with tempfile.TemporaryDirectory(prefix="evalcli-merge-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        shards = make_shards(folder, args.shards, args.size)
        out = folder / "all.db"
        out.unlink(missing_ok=True)
        took = _evalcli(["merge", *map(str, shards), "--out", str(out)], folder)
        if took.exit_code not in (0, 1):
            raise SystemExit(took.stderr[-2000:])
        merged_id = sqlite3.connect(out).execute("SELECT id FROM runs").fetchone()[0]
        want, got = digest(shards), digest([out], [merged_id])
        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"{args.shards} shards x {args.size:,} conversations: merge {took.wall:.1f} s wall, "
              f"{took.cpu_seconds:.1f} s CPU, {took.peak_rss_mb:.0f} MB peak RSS, exit {took.exit_code} "
              f"(load average {load})")
        print(f"rows {got[0]} (shards {want[0]}); digest {got[1]} (shards {want[1]}): "
              f"{'exact' if got == want else 'NOT EXACT'}")
        if got != want:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
