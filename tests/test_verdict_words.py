"""One verdict, one label (docs/identity.md): the words ``verdict_words`` builds are what the terminal, ``compare`` (terminal
and HTML), the HTML report, Markdown, JUnit and pytest's ``::verdict`` say."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from evalcli.reports import verdict_line, verdict_words
from evalcli.reports.compare import comparison_table
from evalcli.reports.html.views import badge
from evalcli.results import RunResult, Summary
from evalcli.store import Column, Comparison
from tests.conftest import CliResult

TWO_OF_THREE = """
target: agents:boom
gates: [{includes: fine}]
data:
  - {id: a, input: hello}
  - {id: b, input: hi}
  - {id: c, input: boom}
"""
WORDS = "passed on 2 of 3 conversations; 1 errored"


def test_compare_says_what_the_run_said_in_the_terminal_and_html(write: Callable[..., Path],
                                                                cli: Callable[..., CliResult]) -> None:
    write("d.yaml", TWO_OF_THREE)
    first = cli("run", "d.yaml", "--json", "-", "--junit", "j.xml")
    assert first.code == 4
    props = {p.get("name"): p.get("value") for p in ET.parse(first.cwd / "j.xml").iter("property")}
    assert props["verdict_words"] == WORDS
    second = cli("run", "d.yaml")
    assert f"verdict: {WORDS} (exit 4)" in second.stdout
    compare = cli("compare", first.json["run_id"], "latest", "--html", "c.html")
    verdict_row = next(line for line in compare.stdout.splitlines() if line.startswith("│ verdict"))
    assert verdict_row.count("passed on 2 of 3") == 2  # on old main: a bare 'passed'
    page = (compare.cwd / "c.html").read_text()
    assert f'<span class="verdict v-errors">{WORDS}</span>' in page and 'class="verdict v-passed"' not in page


summaries = st.builds(lambda total, errors, verdict: (total, min(errors, total), verdict),
                      st.integers(1, 9), st.integers(0, 9), st.sampled_from([None, "passed", "scored", "failed"]))


@given(summaries)
def test_the_same_verdict_reads_the_same_everywhere(case: tuple[int, int, str | None]) -> None:
    total, errors, verdict = case
    summary = Summary({}, total, errors, {}, [], [], [], verdict)  # type: ignore[arg-type]
    run = RunResult("R", "d.yaml", "t", summary, "completed", 4 if errors else 0)
    words = verdict_words(run)
    assert (words == (verdict or "none (no gate or threshold results)")) is (errors == 0)
    assert words in verdict_line(run).plain and badge(run) == words
    console = Console(width=400, record=True)
    comparison = Comparison("d.yaml", [Column(run, "t", None, 0, 0.0, 0.0)] * 2, [])
    console.print(comparison_table(comparison))
    assert console.export_text().count(words) == 2
