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


TRANSLATE = '''
import evalcli

@evalcli.tool
def translate_to_italian(text: str) -> str:
    return {"hello": "ciao"}.get(text, text)

def wrapper(input: str, **options) -> str:
    return translate_to_italian(text=input)
'''


@pytest.mark.parametrize("command", ["run", "validate", "mocks"])
def test_a_lone_surrogate_in_a_tool_tape_is_a_located_error(workdir: Path, cli: Callable[..., CliResult],
                                                            command: str) -> None:
    """A replayed tape whose result escapes half a surrogate pair alone: its file, line and column, exit 2, nothing
    run (was: the run passed, then 'could not store all of run: UnicodeEncodeError', the conversation lost, exit 0);
    both halves of a pair replay as the character."""
    (workdir / "translate.py").write_text(TRANSLATE)
    (workdir / "d.yaml").write_text("target: translate:wrapper\ngates:\n  - called_tool: translate_to_italian\n"
                                    "data:\n  - input: hello\n")
    assert cli("run", "d.yaml", "--db", "e.db", "--record-tools", "tapes").code == 0
    recorded = (workdir / "tapes" / "d.tape.jsonl").read_text()
    (workdir / "good.tape.jsonl").write_text(recorded.replace('"ciao"', '"ci\\ud83d\\ude00ao"'))
    (workdir / "bad.tape.jsonl").write_text("\n" + recorded.replace('"ciao"', '"ci\\ud800ao"'))
    for name in ("good", "bad"):
        (workdir / f"{name}.yaml").write_text(f"target: translate:wrapper\ntools: {{replay: {name}.tape.jsonl}}\n"
                                              "gates:\n  - called_tool: translate_to_italian\ndata:\n  - input: hello\n")
    args = {"run": ["run", "bad.yaml", "--db", "f.db"], "validate": ["validate", "bad.yaml"],
            "mocks": ["mocks", "from-tape", "bad.tape.jsonl"]}[command]
    done = cli(*args)
    column = recorded.replace('"ciao"', '"ci\\ud800ao"').index("\\ud800") + 1
    assert done.code == 2, done.stderr
    assert (f"bad.tape.jsonl:2:{column}: " in done.stderr and "the escape \\ud800 names half of a UTF-16 surrogate "
            "pair alone, not a character: no text can hold it" in done.stderr), done.stderr
    assert "could not store" not in done.stderr and not (workdir / "f.db").exists()
    good = cli("run", "good.yaml", "--db", "g.db")
    assert good.code == 0 and "could not store" not in good.stderr, good.stderr
    with sqlite3.connect(workdir / "g.db") as db:
        assert "ci\U0001f600ao" in db.execute("SELECT output FROM turns").fetchone()[0]


def test_mocks_from_traces_refuses_a_lone_surrogate(workdir: Path, cli: Callable[..., CliResult]) -> None:
    """'evalcli mocks from-tape --from-traces' of a trace whose tool result escapes half a surrogate pair alone: the
    file, line and column, exit 2 (was: mocks printed with '\\uD800', which a dataset then cannot be read with)."""
    from tests.test_memory_streams import line, turn_spans

    text = line(turn_spans(1, "c1", 0))
    assert '{\\"temp_c\\": 18}' in text
    (workdir / "good.jsonl").write_text(text)
    bad = text.replace('{\\"temp_c\\": 18}', "res\\ud800ult")
    (workdir / "bad.jsonl").write_text(bad)
    assert cli("mocks", "from-tape", "--from-traces", "good.jsonl").code == 0
    done = cli("mocks", "from-tape", "--from-traces", "bad.jsonl")
    assert done.code == 2 and "\\uD800" not in done.stdout, done.stdout
    assert (f"line 1, column {bad.index(chr(92) + 'ud800') + 1}: the escape \\ud800 names half of a UTF-16 "
            "surrogate pair alone") in done.stderr, done.stderr
