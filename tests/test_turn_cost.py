"""What the per-turn cost work keeps true (docs/performance.md "Runs of many conversations"): a sync target's threads
never outnumber the run's concurrency, the collector walks young objects every 10,000 allocations during a run, a
database of the previous schema loses only its duplicate indexes, and the one redaction pass still hides a secret in
every column a conversation writes."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalcli.llm.usage import CallRecord
from evalcli.results import ItemResult, Outcome, TurnRecord
from evalcli.secrets import Redactor
from evalcli.store import Store, migrations
from evalcli.store.row_texts import Texts as _Texts
from evalcli.store.row_texts import dumps as _dumps
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


GC_AGENT = """
import gc

def reply(input, **options):
    return f"{input}: young objects {gc.get_threshold()[0]}, frozen {gc.get_freeze_count() > 0}"
"""


def test_a_run_collects_young_objects_every_ten_thousand_allocations(write: Callable[..., Path],
                                                                     cli: Callable[..., CliResult]) -> None:
    write("gc_agent.py", GC_AGENT)
    write("d.yaml", "target: gc_agent:reply\ngates: [{includes: young}]\ndata:\n  - inputs: [a, b]\n")
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    said = [m["content"] for item in result.json["items"] for turn in item["turns"] for m in turn["output"]]
    assert said == ["a: young objects 10000, frozen True", "b: young objects 10000, frozen True"]  # before: 700

def _previous_schema(db: Path, before: str = "010_no_duplicate_indexes") -> None:
    """A database as a version before migration ``before`` left it: every migration before that one."""
    names = [name for name, _ in migrations.MIGRATIONS]
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for name, migration in migrations.MIGRATIONS[:names.index(before)]:
        migration(conn)
        conn.execute("INSERT INTO migrations VALUES (?, 'then')", (name,))
    conn.close()


def _indexes(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")}


def test_a_previous_database_loses_its_duplicate_indexes_and_keeps_its_runs(write: Callable[..., Path],
                                                                            cli: Callable[..., CliResult],
                                                                            workdir: Path) -> None:
    assert "010_no_duplicate_indexes" in [name for name, _ in migrations.MIGRATIONS]  # the old schema is before it
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
    with sqlite3.connect(db) as conn:  # later migrations applied too: the run says how many it selected
        assert conn.execute("SELECT selected FROM runs WHERE id = ?", [first.json["run_id"]]).fetchone() == (3,)
    assert [t["output"][-1]["content"] for t in shown.json["items"][1]["turns"]] == ["city of Rome", "not it"]


SECRETS = ["sk-live-0123456789abcdef", 'quote"back\\slash-secret', "pässwörd-ünïcode-secret"]
text = st.builds(lambda a, s, b: a + s + b, st.text(max_size=5), st.sampled_from(["", *SECRETS]), st.text(max_size=5))


@st.composite
def conversations(draw: st.DrawFn) -> ItemResult:
    """A conversation with a secret possibly in every text it stores: ids, tags, inputs, messages, reasons, errors."""
    def outcomes() -> dict[str, Outcome]:
        return draw(st.dictionaries(text, st.builds(Outcome, st.sampled_from([None, 0.0, 1.0]), text | st.none(),
                                                    error=text | st.none()), max_size=2))

    turns = [TurnRecord(i, draw(text), [{"role": "assistant", "content": draw(text)}], 1.0, outcomes(), outcomes(),
                        structured=draw(st.none() | st.dictionaries(text, text, max_size=2)))
             for i in range(draw(st.integers(1, 3)))]
    return ItemResult(0, draw(text), draw(st.lists(text, max_size=2)), "turns", draw(st.sampled_from(["ok", "error"])),
                      draw(text), draw(text | st.none()), turns, outcomes(), outcomes(), draw(text | st.none()),
                      draw(text | st.none()), metadata=draw(st.dictionaries(text, text, max_size=2)),
                      usage=[CallRecord("judge", draw(text), 1, 1, 0.0, False, 1.0)], identity=draw(text),
                      content=draw(text))


@given(conversations())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_each_column_is_redacted_once_and_none_keeps_a_secret(tmp_path: Path, result: ItemResult) -> None:
    """The one pass (a JSON text redacted as it is serialised, every other text by ``Store._clean``) leaves no secret
    in any parameter a conversation's rows bind, and a text redacted twice reads as one redacted once."""
    redactor = Redactor(SECRETS, env={})
    store = Store(tmp_path / "one.db", redactor)
    try:
        statements = store.item_statements("run-1", result, {o for o in result.scores})
    finally:
        store.close()
    for _, params in statements:
        for row in params if isinstance(params, list) else [params]:
            for value in row:
                if isinstance(value, str) and value != "run-1" and value != result.thread_id:
                    assert not redactor.holds_secret(value), value
                    assert redactor(value) == value  # nothing left a second pass would change


@given(conversations())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_conversation_is_stored_as_redacting_each_of_its_texts_would_store_it(tmp_path: Path,
                                                                                result: ItemResult) -> None:
    """Rows built as they are and searched once for a secret (``Store.item_statements``) bind exactly what the
    rows built with every JSON value and every text redacted bind (``_Texts`` and ``Store._clean``, the one rule)."""
    redactor = Redactor(SECRETS, env={})
    store = Store(tmp_path / "one.db", redactor)
    try:
        fast = store.item_statements("run-1", result, set(result.scores))
        stamp = next(p for sql, p in fast if sql.startswith("INSERT INTO items"))[17]
        texts = _Texts(redactor)
        built = store._item_rows("run-1", result, set(result.scores), stamp, True, texts)
    finally:
        store.close()

    def each(row: Any) -> tuple[Any, ...]:  # every text but the ids evalcli made and the redacted JSON redacted
        return tuple(redactor(v) if isinstance(v, str) and id(v) not in texts.made and v not in ("run-1",
                     result.thread_id) else v for v in row)

    assert [(sql, [tuple(r) for r in p] if isinstance(p, list) else tuple(p)) for sql, p in fast] == \
        [(sql, [each(r) for r in p] if isinstance(p, list) else each(p)) for sql, p in built]


SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text() | st.dates()
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                      | st.dictionaries(st.text() | st.integers() | st.none(), inner, max_size=4), max_leaves=20)


@given(VALUES)
def test_a_stored_json_text_is_what_json_dumps_makes(value: Any) -> None:
    """The one encoder of a conversation's JSON columns writes what ``json.dumps`` with the same options writes."""
    assert _dumps(value) == json.dumps(value, ensure_ascii=False, default=str)
