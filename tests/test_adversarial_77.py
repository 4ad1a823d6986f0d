"""Adversarial try (adv44, second round) of "nothing silently wrong" (docs/hermetic.md, docs/budgets.md,
docs/scorers.md#thresholds-compare-with-a-tolerance, docs/history.md): the real CLI in subprocesses, real SQLite files,
real loopback servers. Each test failed on the main this branch started from."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult, run_cli
from tests.llm_server import LLMServer, Reply, Request, completion
from tests.pytest_project import pytest_env
from tests.reliability_helpers import SUBPROCESS_TIMEOUT

TOOLS_AGENT = '''
import os, pathlib, signal

import evalcli

HERE = pathlib.Path(__file__).parent


@evalcli.tool
def lookup(query: str) -> dict:
    """Look something up (the live service: each call is a line in LIVE)."""
    with (HERE / "LIVE").open("a") as out:
        out.write("lookup " + query + "\\n")
    return {"answer": query.upper()}


@evalcli.tool
def other(query: str) -> dict:
    """Another live service, which no mock answers."""
    with (HERE / "LIVE").open("a") as out:
        out.write("other " + query + "\\n")
    return {"answer": query}


def agent(input, **kw):
    """Asks lookup (mocked), and other (not mocked) on d and e; Ctrl-C at c in the first invocation."""
    answer = lookup(query=input)["answer"]
    if input in ("d", "e"):
        other(query=input)
    if input == "c" and not (HERE / "interrupted").exists():
        (HERE / "interrupted").write_text("yes")
        os.kill(os.getpid(), signal.SIGINT)
    return "done " + answer
'''

HERMETIC_DATASET = """
target: adv77_tools:agent
concurrency: 1
tools:
  lookup: {returns: {answer: MOCKED}}
gates:
  - includes: done
data:
  - {id: a, input: a}
  - {id: b, input: b}
  - {id: c, input: c}
  - {id: d, input: d}
  - {id: e, input: e}
"""


def resume_id(result: CliResult) -> str:
    """The run id an interrupted run's line names (``continue with: evalcli run D --resume ID``)."""
    return (result.stdout + result.stderr).split("--resume ", 1)[1].split()[0]


def test_a_hermetic_run_resumed_as_its_interrupt_says_runs_no_tool_live(tmp_path: Path) -> None:
    """Before: `--hermetic` was not one of the options a run keeps, so the `continue with: evalcli run d.yaml --resume
    RUN` an interrupt prints played the rest live: e's unmocked `other` ran against the live service and the run,
    one verdict, passed with live calls in it."""
    (tmp_path / "adv77_tools.py").write_text(TOOLS_AGENT)
    (tmp_path / "d.yaml").write_text(textwrap.dedent(HERMETIC_DATASET).lstrip())
    first = run_cli(["run", "d.yaml", "--hermetic", "-q"], tmp_path)
    assert first.code == 130, first.stdout + first.stderr
    run = resume_id(first)
    resumed = run_cli(["run", "d.yaml", "--resume", run, "--json", "-", "-q"], tmp_path)
    assert not (tmp_path / "LIVE").exists(), (tmp_path / "LIVE").read_text()
    assert resumed.code == 4, resumed.stderr
    errors = {item["id"]: item["error"] for item in resumed.json["items"] if item["error"]}
    assert set(errors) == {"d", "e"}
    assert '--hermetic: the tool call other({"query":"e"}) has no mock' in errors["e"]
    # a run started without --hermetic is not resumed with it: one run would hold live and hermetic conversations
    (tmp_path / "interrupted").unlink()
    live = run_cli(["run", "d.yaml", "--db", "live.db", "-q"], tmp_path)
    assert live.code == 130, live.stdout + live.stderr
    refused = run_cli(["run", "d.yaml", "--db", "live.db", "--resume", resume_id(live), "--hermetic"], tmp_path)
    assert refused.code == 2, refused.stdout + refused.stderr
    assert "--hermetic (the run has no --hermetic)" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_compare_markdown_says_the_verdict_and_the_conversations_that_differ_as_the_terminal_does(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    """Before: `compare --markdown` (the PR comment) wrote run A's verdict as a bare `passed` though a conversation
    errored in it (the terminal and HTML: `passed on 2 of 3 conversations; 1 errored`), had no conversations or errors
    row, and named no conversation: the one that went from errored to passed was nowhere in it."""
    write("flaky.py", "import os\n\ndef agent(input, **kw):\n    if os.environ.get('BOOM') and input == 'x':\n"
                      "        raise ValueError('kaboom')\n    return 'good ' + input\n")
    write("d.yaml", "target: flaky:agent\ngates:\n  - includes: good\ndata:\n  - {id: first, input: x}\n"
                    "  - {id: second, input: y}\n  - input: 'no id | here'\n")
    a = cli("run", "d.yaml", "--json", "-", "-q", env={"BOOM": "1"})
    assert a.code == 4, a.stderr
    b = cli("run", "d.yaml", "--json", "-", "-q")
    assert b.code == 0, b.stderr
    done = cli("compare", a.json["run_id"], b.json["run_id"], "--markdown", "c.md")
    assert done.code == 0, done.stderr
    markdown = (done.cwd / "c.md").read_text()
    assert "| verdict | passed on 2 of 3 conversations; 1 errored | passed |" in markdown
    assert "| conversations | 3 | 3 |" in markdown and "| errors | 1 | 0 |" in markdown
    assert "#### Conversations whose gates differ" in markdown
    assert "| first | status | error | ok |" in markdown
    assert "second" not in markdown and "no id" not in markdown  # neither differs


def test_a_recording_run_resumed_as_its_interrupt_says_keeps_recording_into_its_tape(tmp_path: Path) -> None:
    """Before: the `continue with: evalcli run d.yaml --resume RUN` an interrupt prints recorded nothing, so the tape
    silently lacked every conversation the resume played (d and e here), though the run was one run. The run keeps its
    folder, so the resume records there, from any working directory."""
    (tmp_path / "adv77_tools.py").write_text(TOOLS_AGENT)
    (tmp_path / "d.yaml").write_text(textwrap.dedent(HERMETIC_DATASET).replace("tools:\n  lookup: {returns: "
                                                                              "{answer: MOCKED}}\n", "").lstrip())
    first = run_cli(["run", "d.yaml", "--record-tools", "tapes", "-q"], tmp_path)
    assert first.code == 130, first.stdout + first.stderr
    tape = tmp_path / "tapes" / "d.tape.jsonl"
    recorded = [json.loads(line)["identity"] for line in tape.read_text().splitlines()]
    assert recorded[:3] == ["id:a", "id:b", "id:c"] and "id:e" not in recorded, recorded
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    resumed = run_cli(["run", "../d.yaml", "--resume", resume_id(first), "--db", "../evalcli.db", "-q"], elsewhere)
    assert resumed.code == 0, resumed.stdout + resumed.stderr
    lines = [json.loads(line) for line in tape.read_text().splitlines()]
    assert [(line["identity"], line["tool"]) for line in lines] == [
        ("id:a", "lookup"), ("id:b", "lookup"), ("id:c", "lookup"), ("id:d", "lookup"), ("id:d", "other"),
        ("id:e", "lookup"), ("id:e", "other")]
    assert not (elsewhere / "tapes").exists()


def answer(request: Request) -> Reply:
    """Every call 100 tokens in and 10 out."""
    return Reply(body=completion(f"ok: {request.messages[-1]['content']}", prompt_tokens=100, completion_tokens=10))


def test_a_conversation_a_budget_stopped_is_limited_in_the_verdict_and_every_list_never_errored(
        write: Callable[..., Path], cli: Callable[..., CliResult], llm_server: LLMServer) -> None:
    """Before: the table said `limited`, but the verdict line said `1 of 4 conversations errored`, the list under it
    `c3  error: limited by the budget ...` (under -q, `Errored conversations (1):`), the Markdown `- c3: error: ...` and the HTML
    report's list `error` (docs/budgets.md: never `error`, the word for a target or scorer that failed)."""
    llm_server.responder = answer
    write("d.yaml", f"target:\n  model: openai/target-m\n  api_base: {llm_server.url}\nconcurrency: 1\n"
                    "gates:\n  - includes: ok\ndata:\n" + "".join(f"  - {{id: c{i}, input: q{i}}}\n" for i in range(8)))
    done = cli("run", "d.yaml", "--json", "-", "--markdown", "s.md", "--html", "r.html", "--max-tokens", "target=300")
    assert done.code == 5, done.stderr
    assert len(llm_server.requests) == 3
    assert done.json["summary"]["errors"] == 1 and done.json["summary"]["limited"] == 1
    assert "verdict: passed on 3 of 4 conversations; 1 limited (exit 5)" in done.stderr
    assert "Failing conversations (1):\n  c3  limited by the budget after 0 turn(s): the target token budget of 300 " \
        "is spent (330 tokens)" in done.stderr
    assert "errored" not in done.stderr and "error:" not in done.stderr
    markdown = (done.cwd / "s.md").read_text()
    assert "**passed on 3 of 4 conversations; 1 limited**" in markdown and "0 errors · 1 limited" in markdown
    assert "- `c3`: limited by the budget after 0 turn(s)" in markdown and "error:" not in markdown
    page = (done.cwd / "r.html").read_text()
    assert ">limited</td>" in page.replace(" ", "") and "passed on 3 of 4 conversations; 1 limited" in page
    shown = cli("show", done.json["run_id"])
    assert "verdict: passed on 3 of 4 conversations; 1 limited (exit 5)" in shown.stdout + shown.stderr
    # a conversation that errored beside one a conversation limit stopped: each counted as what it is
    write("mixed.yaml", "target: agents:boom\ngates:\n  - includes: fine\ndata:\n  - {id: a, input: hi}\n"
                        "  - {id: b, input: boom}\n  - {id: c, limits: {turns: 1}, inputs: [one, two]}\n")
    mixed = cli("run", "mixed.yaml", "-q")
    assert mixed.code == 4, mixed.stderr
    assert "verdict: passed on 1 of 3 conversations; 1 errored, 1 limited (exit 4)" in mixed.stdout
    assert "Errored or limited conversations (2):\n  b  error: turn 0: the target raised ValueError: kaboom" \
        in mixed.stdout
    assert "  c  limited by turns after 1 turn(s)" in mixed.stdout


def test_the_views_runs_list_shows_a_run_that_errored_as_errored_as_evalcli_runs_does(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    """Before: `evalcli runs` said `errored` for a run whose conversation (or scorer) errored, but `evalcli view`'s runs
    list and the run's header showed its bare verdict, a green `passed` (docs/history.md: never `passed`)."""
    from tests.view_helpers import view_server

    write("d.yaml", "target: agents:boom\ngates:\n  - includes: fine\ndata:\n  - {id: a, input: hi}\n"
                    "  - {id: b, input: boom}\n")
    errored = cli("run", "d.yaml", "--json", "-", "-q")
    assert errored.code == 4 and errored.json["verdict"] == "passed"
    write("ok.yaml", "target: agents:boom\ngates:\n  - includes: fine\ndata:\n  - {id: a, input: hi}\n")
    clean = cli("run", "ok.yaml", "--json", "-", "-q")
    assert clean.code == 0
    assert "errored" in cli("runs").stdout
    with view_server(errored.cwd / "evalcli.db") as server:
        status, page = server.get("/api/runs")
        assert status == 200, page
        shown = {run["id"]: (run["verdict"], run["shown"]) for run in page["runs"]}
        assert shown == {errored.json["run_id"]: ("passed", "errored"), clean.json["run_id"]: ("passed", None)}
        status, run = server.get(f"/api/runs/{errored.json['run_id']}")
        assert status == 200 and run["shown"] == "errored"
        status, script = server.get("/static/view.js")
    assert status == 200 and "statusBadge(run.shown || run.verdict || run.status)" in script


def test_pytest_counts_a_limited_conversation_as_limited_and_says_what_stopped_it(workdir: Path) -> None:
    """Before: pytest's summary said `1 of 3 conversations errored ... 2 errored` and the limited conversation's item
    `conversation c errored: limited by turns ...`, though no target or scorer failed on it (docs/pytest.md)."""
    (workdir / "mixed.yaml").write_text("target: agents:boom\ngates:\n  - includes: fine\ndata:\n  - {id: a, input: hi}\n"
                                        "  - {id: b, input: boom}\n  - {id: c, limits: {turns: 1}, inputs: [one, two]}\n")
    (workdir / "pytest.ini").write_text("[pytest]\n")
    played = subprocess.run([sys.executable, "-m", "pytest", "-p", "evalcli.pytest_plugin", "mixed.yaml", "-rA",
                             "-p", "no:cacheprovider"], cwd=workdir, env=pytest_env(), capture_output=True, text=True,
                            timeout=SUBPROCESS_TIMEOUT)
    assert played.returncode == 1, played.stdout + played.stderr
    assert ("verdict passed on 1 of 3 conversations; 1 errored, 1 limited (3 conversations: 0 failed, 1 errored, "
            "1 limited)") in played.stdout
    assert "FAILED mixed.yaml::c - conversation c: limited by turns after 1 turn(s)" in played.stdout
    assert "FAILED mixed.yaml::b - conversation b errored: turn 0" in played.stdout
