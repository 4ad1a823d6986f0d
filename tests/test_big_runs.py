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
from tests.grown_runs import grow

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


def test_the_html_page_of_a_big_run_lists_every_failure_first_and_says_what_it_left_out(
        workdir: Path, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", "target: agent:answer\ngates: [{includes: Sunny}]\ndata:\n"
          + "".join(f"  - {{id: c{n}, inputs: ['q {n}', 'again {n}']}}\n" for n in range(20)))
    run_id = _run(write, cli, "'Rain.' if input.endswith((' 3', ' 7', ' 12')) else 'Sunny. ' + 'x' * 400")
    grow(workdir / "evalcli.db", run_id, 20, 6000)  # 900 failing, 5,100 passing
    done = cli("report", run_id, "--html", "page.html")
    assert done.code == 0, done.stderr
    page = (workdir / "page.html").read_text()
    assert len(page) < 6_000_000, len(page)  # old main: every conversation
    transcripts = json.loads(re.search(r'id="evalcli-transcripts">(.*?)</script>', page, re.S).group(1))
    failing = {f"c{n}-{k}" if k else f"c{n}" for n in (3, 7, 12) for k in range(300)}
    listed = re.findall(r'data-status="(\w+)".*?aria-expanded="false">([\w-]+)</button>', page, re.S)
    sampled = [n for n in range(0, 6000, 3) if n % 20 not in (3, 7, 12)]  # every 3rd place: 6,000 / 2,000
    assert len(transcripts) == len(listed) == 900 + len(sampled)
    assert [item for _, item in listed[900:]] == [f"c{n % 20}-{n // 20}" if n >= 20 else f"c{n}" for n in sampled]
    assert {item for status, item in listed if status == "failed"} == failing
    assert [status for status, _ in listed[:900]] == ["failed"] * 900  # the failures first
    assert ("This page lists 2,600 of 6,000 conversations: all 900 failing or errored conversations first, then of the other "
            f"5,100 those at every 3rd place in dataset order (1,700); 3,400 are left out. Any conversation: evalcli "
            f"show {run_id} ITEM" in page)


def test_diff_of_many_regressions_stops_its_table_and_lines_and_says_what_it_left_out(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", "target: agent:answer\ngates: [{includes: Sunny}]\ndata:\n"
          + "".join(f"  - {{id: c{n}, input: 'q {n}'}}\n" for n in range(FAILING)))
    a, b = _run(write, cli, "'Sunny.'"), _run(write, cli, "'Rain.'")
    shown = cli("diff", a, b)
    assert shown.code == 1, shown.stderr
    rows = [n for n in range(FAILING) if re.search(rf"│ c{n}\s", shown.stdout)]
    assert rows == list(range(200)), rows[-3:]  # old main: all 260 rows
    lines = re.findall(r"regression item (c\d+): passed in A, fails in B", shown.stdout)
    assert lines == [f"c{n}" for n in range(10)]  # old main: 260 lines
    assert "60 more conversations not listed: the table stops at 200 rows (--json - lists every one)" in shown.stdout
    assert "... 250 more conversations passed in A and fail in B or are missing from B, not listed" in shown.stdout
    assert len(json.loads(cli("diff", a, b, "--json", "-").stdout)["regressions"]) == FAILING + 2
