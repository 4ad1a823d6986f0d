"""A conversation that names itself has its content digest made when first asked, not at load
(``dataset/contents.py``, docs/performance.md "Less work per loaded item"): the digest is the one loading made, with
secrets in its texts, one that becomes known only when the target is imported (it sets the environment), turns'
gates and scorers, and an item whose ``target_options`` loading merges over the dataset's after reading it. Two
real runs store the same rows whether the digest was made at load (the items without ids: their identity is their
digest) or later (the same items with ids)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from evalcli.dataset import load_dataset
from evalcli.dataset.contents import Later
from evalcli.dataset.items import Item, item_content
from evalcli.identity import content_digest

from .conftest import run_cli

KNOWN = "sk-laterknown0123456789abcdef"
"""A provider-key-shaped value of the environment: a secret from the start."""
LATE = "latevalue-0123456789abcdef"
"""The value of ``LATE_API_KEY``, which only the target's import sets: a secret known by name after the items are read."""
TARGET = f"""import os
os.environ["LATE_API_KEY"] = {LATE!r}


def agent(input, tone="plain"):
    return f"{{tone}} answer to {{input}}"
"""
REGISTRY = "scorers:\n  has-answer:\n    includes: answer\n"
ITEMS: list[dict[str, Any]] = [
    {"input": f"my key is {KNOWN}"},
    {"inputs": [f"the late one is {LATE}", "and http://user:pa55word@example.com/x?token=abcdef0123456789"]},
    {"turns": [{"input": f"q {LATE}", "gates": ["has-answer"]}, {"input": "r", "scorers": [{"includes": "answer"}]}],
     "metadata": {"k": [1, LATE]}, "ground_truth": {"a": KNOWN}, "expected_outcome": "ok"},
    {"input": "plain", "target_options": {"tone": "kind"}},
    {"input": "plain"},
]


def _dataset(folder: Path, ids: bool) -> Path:
    (folder / "late.py").write_text(TARGET)
    (folder / "scorers.yaml").write_text(REGISTRY)
    head = {"target": "late:agent", "scorers": ["has-answer"], "target_options": {"tone": "plain"}}
    items = [({"id": f"c{n}"} if ids else {}) | item for n, item in enumerate(ITEMS)]
    path = folder / "d.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in [head, *items]) + "\n")
    return path


def _rows(folder: Path) -> list[dict[str, Any]]:
    conn = __import__("sqlite3").connect(folder / "evalcli.db")
    conn.row_factory = __import__("sqlite3").Row
    kept = []
    for row in conn.execute("SELECT * FROM items ORDER BY item_index"):
        found = dict(row)
        for key in ("id", "run_id", "item_id", "identity", "duration_ms", "finished_at", "thread_id", "resource_id"):
            found.pop(key)
        kept.append(found)
    return kept


def test_two_runs_store_the_same_rows_with_the_digest_made_at_load_or_later(tmp_path: Path) -> None:
    stored = []
    for ids in (False, True):
        folder = tmp_path / ("later" if ids else "at-load")
        folder.mkdir()
        done = run_cli(["run", str(_dataset(folder, ids)), "--quiet"], folder, env={"LATER_API_KEY": KNOWN},
                       fresh=True)
        assert done.code in (0, 1), done.stderr
        stored.append(_rows(folder))
    assert stored[0] == stored[1]
    assert len({row["content"] for row in stored[0]}) == 5  # the last two differ by their own options
    assert not any(KNOWN in json.dumps(row) or LATE in json.dumps(row) for row in stored[1])


def test_an_items_digest_is_made_when_asked_as_loading_made_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    monkeypatch.setenv("LATER_API_KEY", KNOWN)
    monkeypatch.delenv("LATE_API_KEY", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    at_load = load_dataset(_dataset(tmp_path, ids=False), str(tmp_path / "scorers.yaml"))
    monkeypatch.delenv("LATE_API_KEY")
    later = load_dataset(_dataset(tmp_path, ids=True), str(tmp_path / "scorers.yaml"))
    import os

    assert os.environ["LATE_API_KEY"] == LATE  # the target's import: a secret now, not when the items were read
    raw = Item.__dict__["content"].slot.__get__  # the slot itself: a read of item.content makes the digest
    # an item copied while loading (its own target_options merged over the dataset's) has it made then, from the
    # item as loaded; the others wait for their first reader
    assert [type(raw(item)) for item in later.items] == [str if item.target_options else Later
                                                         for item in later.items]
    assert all(raw(item).made is None for item in later.items if not item.target_options)
    assert all(type(item.content) is str for item in at_load.items)
    made: list[list[str]] = []
    threads = [threading.Thread(target=lambda: made.append([i.content for i in later.items])) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert made == [[item.content for item in at_load.items]] * 4  # asked by four threads at once: the same values
    assert [item.content for item in later.items] == [item.content for item in at_load.items]
    assert all(type(raw(item)) is str for item in later.items)  # kept as loading would have
    assert later.items[3].target_options == {"tone": "kind"} and later.items[4].target_options is None
    # made now from the item as it is (with the options merged since, the late secret known), the digest differs
    assert content_digest(item_content(later.items[1])) != later.items[1].content
    assert [repr(i.content) for i in later.items] == [repr(i.content) for i in at_load.items]
