"""A new database is made WAL without syncing that first write (docs/storage.md, "Durability"): the four syncs of
converting an empty file's rollback journal to WAL (its journal, its folder, the journal again, the file) were wall
time before every new run's first turn. An existing file is opened as before, syncs and all."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CONNECT = """
import sys
from evalcli.store.connection import connect
conn = connect(sys.argv[1])
sys.stderr.write("connected\\n"); sys.stderr.flush()
print(conn.execute("PRAGMA journal_mode").fetchone()[0], conn.execute("PRAGMA synchronous").fetchone()[0])
"""


def _syncs_until_connected(path: Path) -> tuple[int, str]:
    """The fsync/fdatasync calls a process makes until ``connect(path)`` returns (strace), and what it printed."""
    done = subprocess.run(["strace", "-f", "-e", "trace=fsync,fdatasync,write", "-e", "signal=none", sys.executable,
                           "-c", CONNECT, str(path)], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    before = done.stderr.split("connected", 1)[0]
    return sum(line.split("(", 1)[0].endswith("sync") for line in before.splitlines()), done.stdout.strip()


@pytest.mark.skipif(shutil.which("strace") is None, reason="counting syncs needs strace (apt install strace)")
def test_a_new_database_is_made_wal_without_syncs_and_then_syncs_as_before(tmp_path: Path) -> None:
    new = tmp_path / "new.db"
    count, settings = _syncs_until_connected(new)
    assert count == 0, f"{count} syncs before a new database was connected"
    assert settings == "wal 1"  # WAL, synchronous NORMAL: what every connection writes with
    empty = tmp_path / "empty.db"
    empty.touch()
    assert _syncs_until_connected(empty) == (0, "wal 1")
    # an existing file in a rollback journal (not made by evalcli's connect) is converted with its syncs
    legacy = tmp_path / "legacy.db"
    conn = sqlite3.connect(legacy)
    conn.execute("CREATE TABLE runs (id TEXT)")
    conn.execute("CREATE TABLE migrations (id TEXT)")
    conn.commit()
    conn.close()
    count, settings = _syncs_until_connected(legacy)
    assert count >= 1 and settings == "wal 1"
