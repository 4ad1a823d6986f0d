"""Issue 48's performance work against what users saw before it (docs/performance.md): each try through the real
CLI, compared with what the code before it stored and printed."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

NESTED = '''
def generate(input, **kw):
    deep = "leaf"
    for _ in range(int(input)):
        deep = [deep]
    return [{"role": "assistant", "content": "fine", "extra": {"tree": deep}}]
'''


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_message_nesting_a_few_hundred_levels_is_stored_as_before(workdir: Path, cli: Callable[..., CliResult],
                                                                   workers: str) -> None:
    """A message nesting lists 101 to 900 levels deep was stored and the conversation passed; the check made for
    messages holding themselves refused every message deeper than 100 levels (each conversation an error, exit 4).
    Only what JSON cannot be written at (thousands of levels) is the conversation's error."""
    (workdir / "nested.py").write_text(NESTED)
    depths = [5, 99, 100, 101, 150, 500, 900, 5000]
    (workdir / "d.yaml").write_text("target: nested:generate\nscorers: [{includes: fine}]\ndata:\n" +
                                    "".join(f"  - {{id: d{n}, input: '{n}'}}\n" for n in depths))
    done = cli("run", "d.yaml", "--db", "e.db", "--workers", workers)
    assert done.code == 4, done.stderr
    with sqlite3.connect(workdir / "e.db") as db:
        rows = dict(db.execute("SELECT item_id, coalesce(error, status) FROM items").fetchall())
        stored = dict(db.execute("SELECT item_id, length(output) FROM turns").fetchall())
        (run_id,), = db.execute("SELECT id FROM runs").fetchall()
    assert {k: v for k, v in rows.items() if v != "ok"} == {
        "d5000": "turn 0: response message 0 nests lists and mappings too deeply to be written as JSON: it cannot "
                 "be stored as JSON; return plain data (the value's text, or a copy a JSON encoder can write)"}, rows
    assert stored["d900"] > 900 * 2 and len(rows) == len(depths)
    shown = cli("show", run_id, "d500", "--db", "e.db")
    assert shown.code == 0 and "fine" in shown.stdout, shown.stderr
