"""A response message the store cannot write as JSON is that conversation's error, and the run goes on with every
other conversation stored (docs/targets/python.md): it used to be lost by the writer ("could not store all of run"),
the run passing on the conversations it had left. The real CLI and database."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.conftest import run_cli

AGENT = '''
import datetime

class NoText:
    def __str__(self):
        raise RuntimeError("no text for you")

def answer(input, **kw):
    extra = {
        "long-int": {"n": 10 ** 5000},
        "nested-long-int": {"tool_calls": [{"id": "1", "args": {"n": -(10 ** 5000)}}]},
        "no-text": {"data": {"value": NoText()}},
        "tuple-key": {"data": {(1, 2): "pair"}},
        "top-tuple-key": {(1, 2): "pair"},
        "date": {"when": datetime.date(2024, 1, 2)},
        "int-key": {"data": {1: "one"}},
        "big-but-writable": {"n": 10 ** 300},
    }.get(input, {})
    return [{"role": "assistant", "content": "Sunny", **extra}]
'''
CASES = ["plain", "long-int", "nested-long-int", "no-text", "tuple-key", "top-tuple-key", "date", "int-key",
         "big-but-writable"]


def test_a_message_json_cannot_write_is_its_conversations_error_and_the_rest_are_stored(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "d.yaml").write_text("target: agent:answer\ngates: [{includes: Sunny}]\ndata:\n" +
                                     "".join(f"  - {{id: {c}, input: {c}}}\n" for c in CASES))
    result = run_cli(["run", "d.yaml", "--db", "x.db"], tmp_path)
    assert result.code == 4, result.stderr  # errored conversations, nothing lost by the store
    assert "could not store" not in result.stderr
    with sqlite3.connect(tmp_path / "x.db") as conn:
        rows = dict(conn.execute("SELECT item_id, coalesce(error, status) FROM items").fetchall())
        outputs = dict(conn.execute("SELECT item_id, output FROM turns").fetchall())
    assert sorted(rows) == sorted(CASES)
    assert {k for k, v in rows.items() if v == "ok"} == {"plain", "date", "int-key", "big-but-writable"}
    assert "integer string conversion" in rows["long-int"] and "integer string conversion" in rows["nested-long-int"]
    assert "RuntimeError: no text for you" in rows["no-text"]
    assert "keys must be str" in rows["tuple-key"] and "keys must be str" in rows["top-tuple-key"]
    assert all(rows[k].startswith("turn 0: response message 0 cannot be written as JSON") for k in
               ("long-int", "nested-long-int", "no-text", "tuple-key", "top-tuple-key"))
    assert '"when": "2024-01-02"' in outputs["date"] and '"1": "one"' in outputs["int-key"]  # as their text
