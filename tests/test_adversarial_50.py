"""Issue 50's loading changes (header.py's plain top level, the JSONL line scanner, the batched secret check of
identities) tried as users would through the real CLI; each case's output was compared with the build before them
(bdb0bb0) and found equal, and is pinned here."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

TOP = "target: agents:echo\nscorers: [{includes: echo}]\n"
DATA = "data:\n  - {id: a, input: hi}\n"


@pytest.mark.parametrize(("line", "said"), [
    ("concurrency: true", "3:14: dataset: 'concurrency': Input should be a valid integer"),
    ("concurrency: 2.0", "3:14: dataset: 'concurrency': Input should be a valid integer"),
    ("concurrency: 99999999999999999999", "Input should be less than or equal to 10000"),
    ("concurrency: 0", "Input should be greater than or equal to 1"),
    ("target_has_memory: 1", "3:20: dataset: 'target_has_memory': Input should be a valid boolean"),
    ("description: 2024-01-01", "3:14: dataset: 'description': Input should be a valid string"),
    ("secrets: [1]", "3:11: dataset: 'secrets.0': Input should be a valid string"),
    ("on_limit: stop", "3:11: dataset: 'on_limit': Input should be 'error' or 'score'"),
    ("target_options: {1: a}", "dataset: 'target_options.1.[key]': Input should be a valid string"),
])
def test_an_unusual_top_level_value_is_still_worded_by_the_model(workdir: Path, cli: Callable[..., CliResult],
                                                                   line: str, said: str) -> None:
    """A value ``plain_header`` does not take (a bool or float for an int, a date for a text) falls back to the
    dataset file's model, which words the mistake at its line and column as before."""
    (workdir / "d.yaml").write_text(TOP + line + "\n" + DATA)
    result = cli("validate", "d.yaml")
    assert result.code == 2 and said in result.stderr, result.stderr


@pytest.mark.parametrize(("line", "said"), [
    ('{"input": "a"} {"input": "b"}', "d.jsonl:2:16: not valid JSON: Extra data"),
    ('{"input": "a"}\u00a0', "d.jsonl:2:15: not valid JSON: Extra data"),
    ('\ufeff{"input": "a"}', "d.jsonl:2:1: not valid JSON: Unexpected UTF-8 BOM"),
    ('{"input": "x\\ud800y"}', "d.jsonl:2:13: the escape \\ud800 names half of a UTF-16 surrogate pair alone"),
    ('{"input": "a"', "d.jsonl:2:1: not valid JSON: Expecting ',' delimiter"),
])
def test_a_jsonl_line_the_scanner_refuses_is_worded_as_json_loads_words_it(workdir: Path,
                                                                           cli: Callable[..., CliResult],
                                                                           line: str, said: str) -> None:
    (workdir / "d.jsonl").write_text('{"target": "agents:echo", "scorers": [{"includes": "echo"}]}\n' + line + "\n",
                                     encoding="utf-8")
    result = cli("validate", "d.jsonl")
    assert result.code == 2 and said in result.stderr, result.stderr


def test_a_secret_among_hundreds_of_plain_items_never_reaches_the_database(workdir: Path,
                                                                         cli: Callable[..., CliResult]) -> None:
    """Identities are searched for a secret 256 texts at a time: a secret in item 300, one with a newline split over
    two items, and URL userinfo are still kept out of the stored rows."""
    secret, split = "tok-Ab3$^.*+?()[]{}|x9", "line1\nline2-secretish"
    items = [f"  - input: q{i % 50}" for i in range(600)]
    items[300] = f"  - input: 'my token is {secret}'"
    items[301] = "  - input: line1\n  - input: line2-secretish"
    items[302] = "  - input: 'see https://bob:hunter2pass@example.com/x'"
    (workdir / "d.yaml").write_text(TOP + "secrets: [MY_TOKEN, PIN_SECRET]\ndata:\n" + "\n".join(items) + "\n")
    result = cli("run", "d.yaml", "--db", "e.db", "-q", env={"MY_TOKEN": secret, "PIN_SECRET": split})
    assert result.code == 0, result.stderr
    raw = (workdir / "e.db").read_bytes()
    assert secret.encode() not in raw and b"hunter2pass" not in raw
    with sqlite3.connect(workdir / "e.db") as db:
        assert db.execute("SELECT count(DISTINCT identity) FROM items").fetchone() == (601,)
