"""Comparisons that know the noise (SPEC §26) through the real CLI: stability under --repeat, and diff and
compare with their paired statistics over real runs stored in SQLite. The agent answers from answers.json,
which each test rewrites before each run: per input, one reply per play."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

AGENT = '''
import json, pathlib
HERE = pathlib.Path(__file__).parent

def agent(input, **kw):
    """Answers from answers.json: the input's replies, one per play in turn (the last repeats)."""
    replies = json.loads((HERE / "answers.json").read_text())[input]
    counter = HERE / f"plays-{input}"
    n = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(n + 1))
    return replies[min(n, len(replies) - 1)]

def number(run):
    """The number the reply ends with."""
    text = " ".join(m.get("content") or "" for m in run.output if m.get("role") == "assistant")
    return float(text.split()[-1])
'''

DATASET = """
target: answers:agent
gates:
  - includes: ok
scorers:
  - scorer: {python: "answers:number"}
    id: number
data:
"""

Runner = Callable[..., str]


@pytest.fixture
def play(workdir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> Runner:
    """``play({"c1": ["ok 1"], ...}, "--repeat", "3")``: write the dataset of those conversations (ids = inputs)
    and the agent's replies, run it, return the run id."""
    write("answers.py", AGENT)

    def _play(answers: dict[str, list[str]], *args: str) -> str:
        (workdir / "d.yaml").write_text(DATASET + "".join(f"  - {{id: {c}, input: {c}}}\n" for c in answers))
        (workdir / "answers.json").write_text(json.dumps(answers))
        for counter in workdir.glob("plays-*"):
            counter.unlink()
        done = cli("run", "d.yaml", "--json", "out.json", "-q", *args)
        assert done.code in (0, 1), done.stderr
        return str(json.loads((workdir / "out.json").read_text())["run_id"])
    return _play


def test_each_repeated_conversation_is_stable_pass_flaky_or_stable_fail(
        play: Runner, cli: Callable[..., CliResult], workdir: Path) -> None:
    run_id = play({"steady": ["ok 1"], "wobbly": ["ok 1", "no 0", "ok 1"], "broken": ["no 0"]}, "--repeat", "3")
    out = json.loads((workdir / "out.json").read_text())
    assert out["summary"]["stability"] == {"stable-pass": 1, "flaky": 1, "stable-fail": 1}
    assert [(i["id"], i["stability"], i["plays_passed"], i["repeats"]) for i in out["items"]] == [
        ("steady", "stable-pass", 3, 3), ("wobbly", "flaky", 2, 3), ("broken", "stable-fail", 0, 3)]

    shown = cli("show", run_id)
    assert shown.code == 0, shown.stderr
    assert "stable-pass 3/3" in shown.stdout and "flaky 2/3" in shown.stdout and "stable-fail 0/3" in shown.stdout
    assert "stable-pass 1, flaky 1, stable-fail 1" in shown.stdout
    again = cli("show", run_id, "--json", "-")
    assert again.json["summary"]["stability"] == out["summary"]["stability"]
    assert [i["stability"] for i in again.json["items"]] == ["stable-pass", "flaky", "stable-fail"]
    stored = sqlite3.connect(workdir / "evalcli.db").execute(
        "SELECT item_id, json_extract(outcomes, '$.plays') FROM items WHERE run_id = ? ORDER BY item_index",
        [run_id]).fetchall()
    assert stored == [("steady", "[3,3]"), ("wobbly", "[2,3]"), ("broken", "[0,3]")]

    for counter in workdir.glob("plays-*"):
        counter.unlink()
    table = cli("run", "d.yaml", "--repeat", "3", "--markdown", "summary.md")
    assert table.code == 1
    assert "wobbly" in table.stdout and "flaky 2/3" in table.stdout
    assert "**1** stable-pass, **1** flaky, **1** stable-fail" in (workdir / "summary.md").read_text()

    once = play({"steady": ["ok 1"]})
    single = json.loads((workdir / "out.json").read_text())
    assert "stability" not in single["summary"] and "stability" not in single["items"][0]
    assert "stable-pass" not in cli("show", once).stdout
