"""History, diff and merge through the real CLI: sharded-then-merged equals unsharded, planted regressions."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlite_utils

from tests.conftest import CliResult

SHARD_AGENTS = '''
from evalcli import not_scorable


class Reply:
    """Replies with the text after '=>'; raises when the input says boom."""
    memory = True

    def generate(self, input, *, memory=None, **options):
        if "boom" in input:
            raise ValueError("boom from the agent")
        return input.split("=>", 1)[1].strip() if "=>" in input else input


reply = Reply()


def length_score(run):
    """Text length over 37 (scores above 1 are kept); not scorable for 'skip' answers."""
    text = " ".join(m.get("content") or "" for m in run.output if m.get("role") == "assistant")
    if "skip" in text:
        return not_scorable("asked to skip")
    return len(text) / 37.0
'''

SCORERS = """
scorers:
  mentions-good:
    includes: good
  sunny:
    similarity: {expected: a good sunny answer}
"""

# 12 conversations: every form, a failing gate, a per-turn gate failing on turn 2 only, an error,
# not-scorable results and similarity scores whose means depend on summation order.
SHARD_DATASET = """
target: shardagents:reply
concurrency: 3
gates:
  - excludes: FORBIDDEN
scorers:
  - mentions-good
  - scorer: sunny
    threshold: 0.35
  - scorer: {python: "shardagents:length_score"}
    id: length
    threshold: {min: 0.1, max: 0.9}
data:
  - {id: alpha, input: "q=>a good sunny answer"}
  - {id: bravo, input: "q=>a bad answer"}
  - {id: charlie, tags: [x], input: "q=>good but FORBIDDEN"}
  - {id: delta, input: "q=>please skip this one"}
  - {id: echo, input: "boom=>never"}
  - {id: foxtrot, inputs: ["one=>sunny", "two=>a good day"]}
  - {id: golf, input: "q=>good sunny weather all day long, quite good"}
  - {id: hotel, input: "q=>rain"}
  - id: india
    turns:
      - input: "hi=>good day to you"
        gates: [{excludes: FORBIDDEN}]
        scorers:
          - scorer: {similarity: good day}
            threshold: 0.5
      - input: "next=>sunny skies"
        scorers: [mentions-good]
  - id: juliet
    turns:
      - input: "hi=>bad day"
        gates: [{excludes: FORBIDDEN}]
        scorers:
          - scorer: {similarity: good day}
            threshold: 0.5
      - input: "next=>good and sunny"
        scorers: [mentions-good]
      - input: "last=>FORBIDDEN words"
        gates: [{excludes: FORBIDDEN}]
  - {id: kilo, input: "q=>a sunny good answer"}
  - {id: lima, inputs: ["x=>skip", "y=>skip again"]}
"""

DIFF_AGENT = '''
def reply(input, **kw):
    text = input.split("=>", 1)[1].strip()
    return {replace}
'''

DIFF_DATASET = """
target: diffagent:reply
gates: [{excludes: WRONG}]
scorers:
  - scorer: {similarity: "sunny and warm"}
    threshold: 0.3
data:
  - {id: a1, input: "q=>sunny and warm"}
  - {id: a2, input: "q=>sunny and mild"}
  - {id: a3, input: "q=>sunny"}
  - {id: a4, input: "q=>warm"}
"""
NO_BYTECODE = {"PYTHONDONTWRITEBYTECODE": "1"}  # the agent module is rewritten within one second
RUN_ID = re.compile(r"Run ([0-9A-Z]{26})")


def _comparable(result: dict[str, Any]) -> dict[str, Any]:
    """The JSON result without what differs between any two runs: the run id, memory thread ids and timings."""
    def turn(t: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in t.items() if k != "duration_ms"}

    result = dict(result, items=[{**{k: v for k, v in item.items()
                                     if k not in ("thread_id", "resource_id", "duration_ms")},
                                  "turns": [turn(t) for t in item["turns"]]}
                                 for item in result["items"]])
    result.pop("run_id")
    return result


def test_sharded_then_merged_equals_unsharded(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("shardagents.py", SHARD_AGENTS)
    write("scorers.yaml", SCORERS)
    write("d.yaml", SHARD_DATASET)
    full = cli("run", "d.yaml", "--db", "full.db", "--json", "full.json")
    assert full.code == 1, full.stderr  # a gate fails (and one item errors)
    expected = json.loads((full.cwd / "full.json").read_text())
    assert expected["summary"] == {"total_items": 12, "errors": 1, "not_scorable": {"length": 2}}
    assert len(expected["turn_results"]) == 3 and expected["verdict"] == "failed"
    shard_sizes = []
    for shard in (1, 2, 3):
        done = cli("run", "d.yaml", "--db", f"s{shard}.db", "--shard", f"{shard}/3", "--json", f"s{shard}.json")
        assert done.code in (0, 1), done.stderr
        shard_sizes.append(len(json.loads((done.cwd / f"s{shard}.json").read_text())["items"]))
    assert sorted(shard_sizes) == [3, 3, 6]

    merged = cli("merge", "s1.db", "s2.db", "s3.db", "--out", "all.db")
    assert merged.code == 1, merged.stderr  # the exit code the unsharded run had
    run_id = RUN_ID.search(merged.stdout).group(1)  # type: ignore[union-attr]
    shown = cli("show", run_id[:12], "--db", "all.db", "--json", "-")
    assert shown.code == 0, shown.stderr
    assert shown.json["run_id"] == run_id
    assert _comparable(shown.json) == _comparable(expected)
    assert shown.stderr == ""  # the JSON alone
    table = cli("show", run_id[:12], "--db", "all.db")
    assert "Conversations" in table.stdout and "juliet" in table.stdout

    db = sqlite3.connect(merged.cwd / "all.db")
    row = db.execute("SELECT status, verdict, exit_code, total_items, errors FROM runs WHERE id = ?",
                     [run_id]).fetchone()
    assert row == ("completed", "failed", 1, 12, 1)
    full_db = sqlite3.connect(merged.cwd / "full.db")
    for table in ("items", "turns", "scores", "scorers"):
        count = f"SELECT COUNT(*) FROM {table}"
        assert db.execute(count).fetchone() == full_db.execute(count).fetchone(), table
    assert db.execute("SELECT item_index FROM items ORDER BY item_index").fetchall() == [(i,) for i in range(12)]
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []


def test_merge_refuses_what_is_not_one_dataset_run(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("shardagents.py", SHARD_AGENTS)
    write("scorers.yaml", SCORERS)
    write("d.yaml", SHARD_DATASET)
    assert cli("run", "d.yaml", "--db", "s1.db", "--shard", "1/3", "-q").code == 1
    assert cli("run", "d.yaml", "--db", "s1b.db", "--shard", "1/3", "-q").code == 1
    overlap = cli("merge", "s1.db", "s1b.db", "--out", "all.db")
    assert overlap.code == 2 and "is in both" in overlap.stderr
    write("d.yaml", SHARD_DATASET.replace("rain", "snow"))  # edited between shards: another hash
    assert cli("run", "d.yaml", "--db", "s2.db", "--shard", "2/3", "-q").code == 0
    edited = cli("merge", "s1.db", "s2.db", "--out", "all.db")
    assert edited.code == 2 and "dataset_hash" in edited.stderr and "not shards of one dataset" in edited.stderr
    missing = cli("merge", "s1.db", "nowhere.db", "--out", "all.db")
    assert missing.code == 2 and "no database at nowhere.db" in missing.stderr
    assert not (missing.cwd / "all.db").exists()


def _diff_run(write: Callable[..., Path], cli: Callable[..., CliResult], replace: str) -> str:
    write("diffagent.py", DIFF_AGENT.format(replace=replace))
    done = cli("run", "d.yaml", "--json", "out.json", env=NO_BYTECODE)
    assert done.code in (0, 1), done.stderr
    return str(json.loads((done.cwd / "out.json").read_text())["run_id"])


def test_diff_detects_a_planted_regression(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", DIFF_DATASET)
    base = _diff_run(write, cli, "text")
    same = _diff_run(write, cli, "text")
    worse = _diff_run(write, cli, '"WRONG: cold" if "mild" in text else text')
    slightly = _diff_run(write, cli, '"warm." if text == "warm" else text')

    regression = cli("diff", base, worse)
    assert regression.code == 1, regression.stderr
    assert "item a2: passed in A, fails in B" in regression.stdout
    assert "scorer similarity(sunny and warm): average" in regression.stdout
    assert "gate excludes(WRONG): score 1 -> 0.75" in regression.stdout
    assert "verdict: passed -> failed" in regression.stdout
    assert "a3" not in regression.stdout  # unchanged conversations are not listed
    assert "a3" in cli("diff", base, worse, "--verbose").stdout

    assert cli("diff", base, same).code == 0
    assert cli("diff", worse, base).code == 0  # B better than A
    drop = cli("diff", base, slightly)
    assert drop.code == 1 and "scorer similarity(sunny and warm)" in drop.stdout
    within = cli("diff", base[:20], slightly[:20], "--tolerance", "0.05")
    assert within.code == 0, within.stdout + within.stderr
    assert "not worse than A (tolerance 0.05)" in within.stdout

    unknown = cli("diff", base, "01NOSUCHRUN")
    assert unknown.code == 2 and "no run '01NOSUCHRUN'" in unknown.stderr and "evalcli runs" in unknown.stderr
    assert cli("diff", base, same, "--tolerance", "-1").code == 2

    listed = cli("runs")
    assert listed.code == 0, listed.stderr
    assert listed.stdout.index(slightly) < listed.stdout.index(base)  # newest first
    assert all(run_id in listed.stdout for run_id in (base, same, worse, slightly))
    assert "similarity(sunny and warm)=" in listed.stdout
    assert cli("runs", "--limit", "1").stdout.count("d.yaml") == 1

    shown = cli("show", worse)
    assert shown.code == 0 and "Conversations" in shown.stdout and "verdict: failed" in shown.stdout
    assert "excludes(WRONG)" in shown.stdout and "0.75" in shown.stdout
    missing = cli("show", "01NOSUCHRUN")
    assert missing.code == 2 and "no run '01NOSUCHRUN'" in missing.stderr
    assert "Traceback" not in missing.stderr


def _indexed_columns(db: sqlite_utils.Database, table: str) -> set[str]:
    names = [row[1] for row in db.execute(f"PRAGMA index_list({table})").fetchall()]
    return {row[2] for name in names for row in db.execute(f"PRAGMA index_info('{name}')").fetchall()}


def test_database_is_a_plain_sqlite_utils_database(workdir: Path, write: Callable[..., Path],
                                                   cli: Callable[..., CliResult]) -> None:
    write("d.yaml", DIFF_DATASET)
    _diff_run(write, cli, "text")
    db = sqlite_utils.Database(workdir / "evalcli.db")
    assert {"runs", "items", "turns", "scores", "scorers", "llm_calls", "migrations"} <= set(db.table_names())
    for table, parent in (("items", "runs"), ("turns", "items"), ("scores", "items")):
        parents = {row[2] for row in db.execute(f"PRAGMA foreign_key_list({table})").fetchall()}
        assert parent in parents, (table, parents)
    for table in ("items", "turns", "scores"):
        assert {"run_id", "item_index"} <= _indexed_columns(db, table), table
    assert "turn_index" in _indexed_columns(db, "turns")
    item = next(db.table("items").rows_where("item_index = 0"))  # rows are stored in the order conversations finish
    assert json.loads(item["scores"])["similarity(sunny and warm)"] == 1.0
    outcome = json.loads(item["outcomes"])["scorers"]["similarity(sunny and warm)"]
    assert outcome["score"] == 1.0 and "similarity 1.000 between" in outcome["reason"]
    turn = next(db.table("turns").rows_where("item_index = 0"))
    assert turn["item_id"] == item["item_id"] and json.loads(turn["outcomes"]) == {"gates": {}, "scorers": {}}
    assert json.loads(turn["output"]) == [{"role": "assistant", "content": "sunny and warm"}]


def test_runs_shows_a_run_that_errored_as_errored(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", "target: agents:boom\ngates: [{includes: fine}]\ndata: [{id: ok, input: hi}, {id: bad, input: boom}]\n")
    errored = cli("run", "d.yaml", "--json", "-")
    assert errored.code == 4 and errored.json["verdict"] == "passed"
    write("s.yaml", "target: agents:echo\ngates: [{includes: said}]\nscorers: [{python: 'nope:scorer'}]\n"
                    "data: [{id: one, input: hi}]\n")
    write("nope.py", "def scorer(run):\n    raise ValueError('cannot score')\n")
    scorer = cli("run", "s.yaml", "--json", "-")
    assert scorer.code == 4 and scorer.json["verdict"] == "passed"
    write("g.yaml", "target: agents:echo\ngates: [{includes: said}]\ndata: [{id: one, input: hi}]\n")
    passed = cli("run", "g.yaml", "--json", "-")
    assert passed.code == 0
    listed = cli("runs", env={"COLUMNS": "250"})
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")] for line in listed.stdout.splitlines()
            if line.startswith("│ 01")}
    # old main: "passed" with "2 (1 err)" beside it, and a plain "passed" for the scorer's error
    assert rows[errored.json["run_id"]][6:8] == ["errored", "2 (1 err)"], rows
    assert rows[scorer.json["run_id"]][6] == "errored"
    assert rows[passed.json["run_id"]][6] == "passed"
