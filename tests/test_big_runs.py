"""Big runs stay usable (docs/history.md, "Big runs"): the conversations table stops at a cap and says how many it
left out and how to see them; ``diff`` and ``compare`` read conversations without what the agent said, and give the
same answers. bench/bigruns.py measures the commands on two runs of 100,000 conversations."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from evalcli.store import open_existing
from tests.conftest import CliResult

FAILING = 260


def _run(write: Callable[..., Path], cli: Callable[..., CliResult], answer: str) -> str:
    write("agent.py", f"def answer(input, *, memory=None):\n    return {answer}\n")
    done = cli("run", "d.yaml", "--json", "-", "--quiet")
    assert done.code in (0, 1), done.stderr
    return str(done.json["run_id"])


def test_a_long_table_stops_at_its_cap_and_says_what_it_left_out(write: Callable[..., Path],
                                                                  cli: Callable[..., CliResult]) -> None:
    write("d.yaml", "target: agent:answer\ngates: [{includes: Sunny}]\ndata:\n"
          + "".join(f"  - {{id: c{n}, input: 'q {n}'}}\n" for n in range(FAILING)))
    run_id = _run(write, cli, "'Rain.'")
    shown = cli("show", run_id)
    assert shown.code == 0, shown.stderr
    rows = [n for n in range(FAILING) if re.search(rf"│ c{n}\s", shown.stdout)]
    assert rows == list(range(200)), rows[-3:]  # old main: all 260 rows
    assert "... 60 more conversations (60 failing) not listed: the table stops at 200 rows" in shown.stdout
    assert f"'evalcli show {run_id} ITEM' shows one" in shown.stdout
    verbose = cli("show", run_id, "-v")
    assert all(re.search(rf"│ c{n}\s", verbose.stdout) for n in range(FAILING)) and "not listed" not in verbose.stdout
    every = cli("show", run_id, "--json", "-")
    assert len(json.loads(every.stdout)["items"]) == FAILING


def test_diff_and_compare_read_no_transcripts_and_answer_the_same(workdir: Path, write: Callable[..., Path],
                                                                  cli: Callable[..., CliResult]) -> None:
    write("d.yaml", "target: agent:answer\ngates: [{includes: Sunny}]\nscorers: [{excludes: Rain}]\ndata:\n"
          + "".join(f"  - {{id: c{n}, inputs: ['q {n}', 'again {n}']}}\n" for n in range(12)))
    a = _run(write, cli, "'Sunny.'")
    b = _run(write, cli, "'Rain.' if input.endswith(('3', '7')) else 'Sunny.'")
    diff = cli("diff", a, b, "--json", "-")
    assert diff.code == 1
    found = json.loads(diff.stdout)
    assert sorted(found["regressions"]) == sorted(["item c3: passed in A, fails in B",
                                                   "item c7: passed in A, fails in B", "verdict: passed -> failed",
                                                   "gate includes(Sunny): score 1 -> 0.833",
                                                   "scorer excludes(Rain): average 1 -> 0.833"]), found["regressions"]
    store = open_existing(workdir / "evalcli.db")
    try:
        light = next(iter(store.load_items(b, light=True)))
        full = next(iter(store.load_items(b)))
    finally:
        store.close()
    assert [t.output for t in light.turns] == [[], []] and all(t.output for t in full.turns)
    assert light.gate_scores["includes(Sunny)"].score == full.gate_scores["includes(Sunny)"].score
    assert light.gate_scores["includes(Sunny)"].reason in (None, "")
    assert cli("compare", a, b).code == 0
