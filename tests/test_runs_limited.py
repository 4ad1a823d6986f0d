"""``evalcli runs`` and the view's list of runs read a run whose left-out conversations a limit stopped as
``limited``, never ``errored`` (docs/budgets.md, docs/history.md): the real CLI, a real database."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from evalcli.store import Store
from evalcli.store.browse import RunFilter, list_runs
from evalcli.words import stored_run_word
from tests.conftest import run_cli

AGENT = "def agent(input, **kw):\n    if input == 'boom':\n        raise RuntimeError('boom')\n    return 'ok ' + input\n"


def _run(tmp_path: Path, data: str) -> str:
    (tmp_path / "d.yaml").write_text(f"target: ag:agent\nlimits: {{turns: 1}}\ngates:\n  - includes: ok\ndata:\n{data}")
    assert run_cli(["run", "d.yaml", "--quiet"], tmp_path).code == 4
    conn = sqlite3.connect(tmp_path / "evalcli.db")
    return str(conn.execute("SELECT id FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()[0])


def test_a_run_of_limited_conversations_reads_limited_and_one_with_an_error_too_errored(tmp_path: Path) -> None:
    (tmp_path / "ag.py").write_text(AGENT)
    limited = _run(tmp_path, "  - {id: a, input: a}\n  - {id: b, inputs: [b, c]}\n")
    listed = run_cli(["runs"], tmp_path)
    assert listed.code == 0, listed.stderr
    line = next(line for line in listed.stdout.splitlines() if limited in line)
    assert " limited " in line and "2 (1 limited)" in line and "errored" not in line and "err)" not in line, line
    both = _run(tmp_path, "  - {id: a, input: a}\n  - {id: b, inputs: [b, c]}\n  - {id: x, input: boom}\n")
    line = next(line for line in run_cli(["runs"], tmp_path).stdout.splitlines() if both in line)
    assert " errored " in line and "3 (1 err, 1 limited)" in line, line  # before: "3 (2 err)"
    with Store(tmp_path / "evalcli.db") as store:
        shown = {row["id"]: row["shown"] for row in list_runs(store, RunFilter())[1]}
    assert shown == {limited: "limited", both: "errored"}  # the view's list reads it as runs does


def test_the_word_of_a_stored_run() -> None:
    assert stored_run_word("errors", 2, 2, False) == "limited"
    assert stored_run_word("errors", 2, 1, False) == "errored"
    assert stored_run_word("errors", 1, 1, True) == "errored"  # a scorer errored too
    assert stored_run_word("errors", 0, 0, True) == "errored"
    assert stored_run_word("passed", 0, 0, False) is None and stored_run_word("failed", 1, 1, False) is None
