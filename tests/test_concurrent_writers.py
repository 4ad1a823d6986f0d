"""Several ``evalcli run`` processes writing one SQLite file at the same time (a fresh file, so they
also race to create the schema): no row is lost, every process finishes with exit 0."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.reliability_helpers import SUBPROCESS_TIMEOUT, cli_env, load_json, query, start_cli, write_project

AGENT = """
import os, pathlib, time

HERE = pathlib.Path(__file__).parent

def generate(input, **options):
    # every process waits at this barrier, so all of them write their conversations at the same time
    (HERE / f"started.{os.getpid()}").touch()
    while not (HERE / "go").exists():
        time.sleep(0.01)
    time.sleep(0.002)
    return [{"role": "assistant", "content": f"answer to {input}"}]
"""

SCORERS = """
scorers:
  says-answer:
    includes: answer
  long-enough:
    matches: '.{5,}'
"""

ITEMS = 40
PROCESSES = 3


def dataset() -> str:
    lines = ["target: agent:generate", "concurrency: 8", "gates: [says-answer]", "scorers: [long-enough]", "data:"]
    for n in range(ITEMS):
        lines.append(f"  - {{id: i{n}, input: q{n}}}" if n % 2 else f"  - {{id: i{n}, inputs: [q{n}, q{n} more]}}")
    return "\n".join(lines) + "\n"


def test_concurrent_runs_on_one_database_lose_no_rows(tmp_path: Path) -> None:
    write_project(tmp_path, agent=AGENT, dataset=dataset(), scorers=SCORERS)
    db = tmp_path / "shared.db"
    processes = [start_cli(["run", "ds.yaml", "--db", str(db), "--json", f"out{n}.json", "-q"], tmp_path, cli_env())
                 for n in range(PROCESSES)]
    deadline = time.monotonic() + SUBPROCESS_TIMEOUT
    while len(list(tmp_path.glob("started.*"))) < PROCESSES:
        exited = [p for p in processes if p.poll() is not None]
        assert not exited, f"a run ended before its first turn ({exited[0].returncode}): {exited[0].communicate()[1]}"
        assert time.monotonic() < deadline, "the processes did not all start"
        time.sleep(0.02)
    (tmp_path / "go").touch()
    outcomes = [p.communicate(timeout=SUBPROCESS_TIMEOUT) for p in processes]
    for process, (_, stderr) in zip(processes, outcomes, strict=True):
        assert process.returncode == 0, stderr

    run_ids = {load_json((tmp_path / f"out{n}.json").read_text())["run_id"] for n in range(PROCESSES)}
    assert len(run_ids) == PROCESSES
    assert query(db, "PRAGMA integrity_check") == [("ok",)]
    runs = query(db, "SELECT id, status, exit_code, completed_items, errors FROM runs ORDER BY id")
    assert {r[0] for r in runs} == run_ids
    assert all(r[1:] == ("completed", 0, ITEMS, 0) for r in runs)
    turns_per_run = ITEMS // 2 * 2 + ITEMS // 2
    for run_id in run_ids:
        assert query(db, "SELECT COUNT(*), COUNT(DISTINCT item_index) FROM items WHERE run_id = ?",
                     [run_id]) == [(ITEMS, ITEMS)]
        assert query(db, "SELECT COUNT(*) FROM turns WHERE run_id = ?", [run_id]) == [(turns_per_run,)]
        # one row per conversation for the registered scorer
        assert query(db, "SELECT COUNT(*), COUNT(DISTINCT item_index), MIN(score) FROM scores "
                         "WHERE run_id = ? AND scorer_id = 'long-enough'", [run_id]) == [(ITEMS, ITEMS, 1.0)]
    versions = query(db, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'runs'")
    assert versions == [(1,)]


def test_a_write_that_sqlite_rolled_back_itself_raises_its_own_error(tmp_path: Path) -> None:
    """An error after which SQLite has rolled the transaction back already (here an interrupted statement; a full disk
    does the same) is raised as it is: a second ROLLBACK used to raise "cannot rollback - no transaction is active"
    in its place (evalcli/store/migrations.py ``rollback``)."""
    import sqlite3

    from evalcli.store.connection import connect, run

    conn = connect(str(tmp_path / "w.db"))
    conn.execute("CREATE TABLE t (x INTEGER)")
    conn.create_function("interrupted", 1, lambda x: conn.interrupt() or x)  # as a Ctrl-C handler interrupting it

    with pytest.raises(sqlite3.OperationalError, match="interrupted"):
        run(conn, [("INSERT INTO t VALUES (?)", [(0,), (1,)]),
                   ("INSERT INTO t SELECT interrupted(value) FROM json_each('[1, 2, 3, 4]')", ())])
    assert not conn.in_transaction
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)


def test_a_database_another_program_keeps_locked_is_a_user_error(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """SQLite's "database is locked", met once the busy timeout has passed (another program holds the file), is said
    as the user's situation with what to do, exit 2; it was "internal error: OperationalError", exit 70."""
    import sqlite3

    import typer

    from evalcli.cli.console import user_errors

    path = tmp_path / "held.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x INTEGER)")
    holder.execute("BEGIN EXCLUSIVE")
    waiting = sqlite3.connect(path, isolation_level=None, timeout=0.05)
    with pytest.raises(typer.Exit) as stopped, user_errors():
        waiting.execute("SELECT count(*) FROM t")
    holder.execute("ROLLBACK")
    assert stopped.value.exit_code == 2
    err = capsys.readouterr().err
    assert "error: the database is locked by another program" in err and "give another --db" in err
    assert "internal error" not in err
