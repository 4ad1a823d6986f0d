"""Connections to a run database: for writing (WAL, busy timeout, foreign keys), read-only, and the one way
statements are written (each batch in a ``BEGIN IMMEDIATE`` transaction)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import migrations

BUSY_TIMEOUT_MS = 30_000
READ_BUSY_TIMEOUT_MS = 250
"""Reads that must happen on the event loop wait at most this long for a lock, then give up."""

Statement = tuple[str, Any]
Job = Callable[[Any], Any]
"""A write: a function of a connection (or of the batch's shared transaction)."""


def connect(path: str, *, timeout_ms: int = BUSY_TIMEOUT_MS) -> sqlite3.Connection:
    """A connection for writing: WAL, busy timeout, foreign keys, autocommit (transactions are explicit). Another
    program's SQLite file is refused before anything is changed in it (not even its journal mode)."""
    new = path != ":memory:" and _empty(path)
    conn = sqlite3.connect(path, isolation_level=None, timeout=timeout_ms / 1000, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {timeout_ms}")
    require_evalcli(conn)
    if new:  # a new file is made WAL without the four syncs of that first write (docs/storage.md, durability)
        conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def _empty(path: str) -> bool:
    """Whether the file at ``path`` does not exist yet or holds nothing (a new database)."""
    try:
        return os.stat(path).st_size == 0
    except OSError:
        return True


def require_evalcli(conn: sqlite3.Connection) -> None:
    """Refuse a SQLite file that holds tables but not evalcli's (another program's database): reading it as an empty
    history would answer "no runs, no labels" about a file that was never evalcli's. An empty file is an empty
    history."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if tables and not {"runs", "migrations"} <= tables:
        conn.close()
        raise sqlite3.DatabaseError("it is not an evalcli database (it has no 'runs' and 'migrations' tables)")


def open_readonly(path: str) -> sqlite3.Connection:
    """A read-only connection (``read_file``); an old schema is migrated in a copy in memory (the file is never
    touched)."""
    conn = read_file(path)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    require_evalcli(conn)
    if migrations.pending(conn):
        memory = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        conn.backup(memory)
        conn.close()
        migrations.apply(memory)
        conn = memory
    return conn


def read_file(path: str | Path) -> sqlite3.Connection:
    """``path`` opened read-only, as it is (no schema check); a WAL file in a read-only folder without its ``-shm``
    is read as immutable (docs/view.md)."""
    uri = Path(path).resolve().as_uri()
    conn = None
    try:
        conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError:
        if conn is not None:
            conn.close()
        conn = sqlite3.connect(f"{uri}?immutable=1", uri=True, isolation_level=None, check_same_thread=False)
    return conn


def write_back(path: str) -> None:
    """Write what the WAL holds into the database file itself (a checkpoint), so that the file alone, copied or
    uploaded without its ``-wal``, holds every commit (docs/storage.md, "Copying a database"). SQLite does it when the
    last connection to a file closes; a commit made while another program read the file is left in the WAL until
    then. A file another program is writing is left to that program (its own close writes back). A file gone meanwhile
    (moved, deleted) is not made again (``mode=rw``)."""
    try:
        conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=rw", uri=True, isolation_level=None, timeout=1)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        pass


def run(conn: Any, statements: list[Statement]) -> None:
    """Statements in one ``BEGIN IMMEDIATE`` transaction; a list of parameter rows is an ``executemany``."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for sql, params in statements:
            if isinstance(params, list) and params and isinstance(params[0], (tuple, list)):
                conn.executemany(sql, params)
            elif not (isinstance(params, list) and not params):
                conn.execute(sql, params)
        conn.execute("COMMIT")
    except BaseException:
        migrations.rollback(conn)
        raise
