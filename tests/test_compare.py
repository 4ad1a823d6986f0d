"""Several targets in one invocation, and ``evalcli compare`` of stored runs (docs/targets/http.md)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from random import Random

from hypothesis import given
from hypothesis import strategies as st

from evalcli.identity import content_digest, conversation_identity
from evalcli.results import ItemResult, TurnRecord
from evalcli.store.paired import conversation_names
from tests.conftest import CliResult

DATASET = """
target: agents:tool_agent
gates:
  - called_tool: get_weather
scorers:
  - scorer: {includes: sunny}
    threshold: 1
data:
  - id: one
    input: What is the weather?
  - id: two
    turns:
      - input: And tomorrow?
        gates: [{called_tool: get_weather}]
"""


def runs_of(result: CliResult) -> list[str]:
    return [r[0] for r in result.db().execute("SELECT id FROM runs ORDER BY id")]


def test_several_targets_run_once_each_and_end_with_one_comparison_table(write: Callable[..., Path],
                                                                        cli: Callable[..., CliResult]) -> None:
    write("d.yaml", DATASET)
    result = cli("run", "d.yaml", "--target", "agents:tool_agent", "--target", "agents:echo", "--json", "-")
    assert result.code == 1, result.stderr  # the worst of the runs': echo calls no tool, its gate misses
    runs = result.json["runs"]
    assert [r["target"] for r in runs] == ["agents:tool_agent", "agents:echo"]
    assert [r["verdict"] for r in runs] == ["passed", "failed"]
    stored = [tuple(r) for r in result.db().execute("SELECT target, verdict, exit_code FROM runs ORDER BY id")]
    assert stored == [("agents:tool_agent", "passed", 0), ("agents:echo", "failed", 1)]
    table = result.stderr[result.stderr.index("Comparison of 2 runs of d.yaml"):]
    header = next(line for line in table.splitlines() if "agents:tool_agent" in line)
    assert header.index("agents:tool_agent") < header.index("agents:echo")
    lines = {line.split("┃")[1].strip() if "┃" in line else line.split("│")[1].strip(): line
             for line in table.splitlines() if line.count("│") >= 3 or line.count("┃") >= 3}
    assert re.search(r"1 pass\s+│\s+0 FAIL", lines["scorer includes(sunny) (>= 1)"])
    assert re.search(r"2/2 pass\s+│\s+0/2 FAIL", lines["gate called_tool(get_weather)"])
    assert re.search(r"1/1 pass\s+│\s+0/1 FAIL", lines["gate turn 0: called_tool(get_weather)"])
    assert re.search(r"passed\s+│\s+failed", lines["verdict"])
    assert {"errors", "target tokens", "target cost", "all LLM cost", "wall time", "conversations"} <= set(lines)
    ids = runs_of(result)
    assert f"evalcli compare {ids[0]} {ids[1]}" in result.stderr


def test_one_target_prints_no_comparison_and_outputs_are_one_per_target(write: Callable[..., Path],
                                                                       cli: Callable[..., CliResult]) -> None:
    write("d.yaml", DATASET)
    result = cli("run", "d.yaml", "--target", "agents:echo")
    assert result.code == 1 and "Comparison" not in result.stdout + result.stderr
    result = cli("run", "d.yaml", "--target", "agents:tool_agent", "--target", "agents:echo", "--json", "out.json",
                 "--junit", "out.xml")
    assert result.code == 1
    names = sorted(p.name for p in result.cwd.glob("out.*"))
    assert names == ["out.agents-echo.json", "out.agents-echo.xml", "out.agents-tool_agent.json",
                     "out.agents-tool_agent.xml"]
    assert json.loads((result.cwd / "out.agents-echo.json").read_text())["target"] == "agents:echo"
    assert "Comparison of 2 runs" in result.stdout


def test_bad_target_combinations_are_exit_2(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", DATASET)
    result = cli("run", "d.yaml", "--target", "agents:echo", "--target", "agents:echo")
    assert result.code == 2 and "--target agents:echo is given twice" in result.stderr
    result = cli("run", "d.yaml", "--target", "agents:echo", "--target", "agents:scripted", "--resume", "x")
    assert result.code == 2 and "--resume continues one run, of one target" in result.stderr
    result = cli("run", "d.yaml", "--target", "mastra:http://127.0.0.1:1")
    assert result.code == 2 and "a Mastra target is mastra:URL#AGENT" in result.stderr
    result = cli("run", "d.yaml", "--target", "agents:nothing_here", "--target", "agents:echo")
    assert result.code == 2 and "--target agents:nothing_here: target 'agents:nothing_here': module 'agents' has no " \
                                "attribute 'nothing_here'" in result.stderr
    assert not (result.cwd / "evalcli.db").exists()
    first = cli("run", "d.yaml", "--target", "agents:echo")
    run_id = runs_of(first)[0]
    result = cli("run", "d.yaml", "--resume", run_id)
    assert result.code == 2 and f"run {run_id} was of target agents:echo, not agents:tool_agent" in result.stderr


def test_compare_stored_runs_with_the_gates_that_differ_and_an_html_page(write: Callable[..., Path],
                                                                        cli: Callable[..., CliResult]) -> None:
    write("d.yaml", DATASET)
    assert cli("run", "d.yaml").code == 0
    write("d.yaml", DATASET.replace("agents:tool_agent", "agents:echo"))
    assert cli("run", "d.yaml").code == 1
    first, _ = runs_of(cli("runs"))
    result = cli("compare", first[:12], "latest", "--html", "page.html")
    assert result.code == 0, result.stderr
    out = result.stdout
    assert "Comparison of 2 runs of d.yaml" in out and "Conversations whose gates differ" in out
    differences = out[out.index("Conversations whose gates differ"):out.index("Paired statistics")]
    rows = [line for line in differences.splitlines() if line.startswith("│")]
    assert [[cell.strip() for cell in row.split("│")[1:-1]] for row in rows] == [
        ["one", "called_tool(get_weather)", "pass", "FAIL"],
        ["two", "called_tool(get_weather)", "pass", "FAIL"],
        ["two", "turn 0: called_tool(get_weather)", "pass", "FAIL"]]
    page = (result.cwd / "page.html").read_text()
    assert "wrote page.html: 2 runs, 2 conversations" in out
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # self-contained: nothing to load
    assert "<script" not in page
    assert page.count('class="side"') == 2 and "It is sunny and 72°F in Brooklyn." in page
    assert "You said: What is the weather?" in page  # echo's transcript beside the tool agent's
    same = cli("compare", first, first)
    assert same.code == 2 and "is named twice" in same.stderr
    alone = cli("compare", first)
    assert alone.code == 2 and "compare needs at least two runs" in alone.stderr


def test_compare_refuses_runs_of_different_datasets(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("a.yaml", DATASET)
    write("b.yaml", DATASET)
    assert cli("run", "a.yaml").code == 0 and cli("run", "b.yaml").code == 0
    first, second = runs_of(cli("runs"))
    result = cli("compare", first, second)
    assert result.code == 2 and "these runs are not of one dataset" in result.stderr
    assert cli("compare", first, second, "--allow-different").code == 0


PARIS, JOKE, ROME = ("Capital of France? => Paris", "Tell me a joke => Why did the chicken cross the road?",
                     "Capital of Italy? => Rome")


def test_every_view_of_two_runs_pairs_and_names_conversations_by_identity(write: Callable[..., Path],
                                                                          cli: Callable[..., CliResult]) -> None:
    # items without ids: the joke is item 1 of A and item 0 of B, and fails the same way in both; Rome is new in B,
    # at the joke's old position
    def run(*inputs: str) -> str:
        write("d.yaml", "target: agents:scripted\ngates: [{includes: Paris}]\ndata:\n"
              + "".join(f"  - input: '{text}'\n" for text in inputs))
        done = cli("run", "d.yaml", "--json", "-")
        assert done.code == 1, done.stderr
        return str(done.json["run_id"])

    first, second = run(PARIS, JOKE), run(JOKE, ROME, PARIS)
    result = cli("compare", first, second, "--html", "page.html", "--json", "out.json")
    assert result.code == 0, result.stderr
    differences = result.stdout[result.stdout.index("Conversations whose gates differ"):]
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in differences.splitlines()
            if line.startswith("│")][:2]
    assert rows == [['"Capital of Italy? => Rome"', "status", "-", "ok"],
                    ['"Capital of Italy? => Rome"', "includes(Paris)", "-", "FAIL"]]
    data = json.loads((result.cwd / "out.json").read_text())
    assert {d["item"] for d in data["differences"]} == {'"Capital of Italy? => Rome"'}

    page = (result.cwd / "page.html").read_text()
    summaries = re.findall(r'<details class="conversation" id="(c-\d+)"( open)?>\s*<summary>([^<]*)', page)
    by_name = {name: (anchor, bool(opened)) for anchor, opened, name in summaries}
    assert set(by_name) == {"&#34;Capital of France? =&gt; Paris&#34;", "&#34;Capital of Italy? =&gt; Rome&#34;",
                            "&#34;Tell me a joke =&gt; Why did the chicken cross the…&#34;"}
    assert [name for name, (_, opened) in by_name.items() if opened] == ["&#34;Capital of Italy? =&gt; Rome&#34;"]
    assert page.count("gates differ</span>") == 1
    assert f'href="#{by_name["&#34;Capital of Italy? =&gt; Rome&#34;"][0]}"' in page

    diffed = cli("diff", first, second, "--verbose", "--json", "diff.json")
    names = [item["name"] for item in json.loads((diffed.cwd / "diff.json").read_text())["items"]]
    assert names == ['"Capital of France? => Paris"', '"Tell me a joke => Why did the chicken cross the…"',
                     '"Capital of Italy? => Rome"']
    table = diffed.stdout[diffed.stdout.index("Conversations (A -> B)"):]
    assert "│ 0 " not in table and "│ 1 " not in table and '"Capital of Italy? => Rome"' in table

    # the run report against a baseline: Paris (the baseline's item 0) is missing, and the joke, this run's item 0,
    # does not hide it
    third = run(JOKE, ROME)
    report = cli("report", third, "--baseline", first, "--html", "r.html")
    assert report.code == 0, report.stderr
    page = (report.cwd / "r.html").read_text()
    assert "1 new, 1 missing, 1 unchanged conversations" in " ".join(page.split())
    assert '<tr class="c-missing"><td>&#34;Capital of France? =&gt; Paris&#34;</td>' in page
    assert '<tr class="c-new"><td><a href="#c-1">&#34;Capital of Italy? =&gt; Rome&#34;</a>' in page


@given(st.lists(st.tuples(st.sampled_from(["Paris?", "a joke", "Rome?", ""]), st.booleans()), min_size=1, max_size=6),
       st.randoms(use_true_random=False))
def test_a_conversations_name_never_depends_on_its_position(items: list[tuple[str, bool]], rng: Random) -> None:
    """Whatever order a run holds its conversations in, each is named by its id or its content (the first user
    message, numbered like its identity), never by where it stands."""
    def results(order: list[int]) -> list[ItemResult]:
        seen: dict[str, int] = {}
        out = []
        for position, n in enumerate(order):
            text, explicit = items[n]
            digest = content_digest(text)
            nth = 1 if explicit else seen.get(digest, 0) + 1
            seen[digest] = nth if not explicit else seen.get(digest, 0)
            out.append(ItemResult(position, f"given-{n}" if explicit else str(position), [], "input", "ok", None,
                                  None, turns=[TurnRecord(0, text, [], 0.0)] if text else [],
                                  identity=conversation_identity(f"given-{n}" if explicit else None, digest, nth)))
        return out

    order = list(range(len(items)))
    shuffled = order[:]
    rng.shuffle(shuffled)
    names = conversation_names(results(order))
    assert conversation_names(results(shuffled)) == names
    assert len(set(names.values())) == len(names)  # two conversations never share a name
    for name in names.values():
        assert name.startswith(("given-", '"', "content ")), name
