"""What the terminal, `show`, the reports and the warnings say is exactly what happened: a verdict that covers only
some conversations says so, ids and dataset paths are never cut in a table, the memory warning says what evalcli
knows, a failed turn shows what the user said, and validation errors read in file order, once each, with the name
that was meant."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from evalcli.reports import TerminalReport, deliver, runs_table
from evalcli.store import Store, load_run
from tests.conftest import REPO, CliResult, run_cli
from tests.reliability_helpers import closed_port

MOSTLY_BROKEN = """
target: agents:boom
gates: [{includes: fine}]
data:
  - {id: good, input: hello}
  - {id: bad-1, input: boom 1}
  - {id: bad-2, input: boom 2}
  - {id: bad-3, input: boom 3}
"""


def test_a_verdict_over_some_conversations_says_so_in_the_terminal_html_and_markdown(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", MOSTLY_BROKEN)
    result = cli("run", "d.yaml", "--html", "r.html", "--markdown", "s.md")
    assert result.code == 4
    assert "verdict: passed on 1 of 4 conversations; 3 errored (exit 4)" in result.stdout, result.stdout
    page = (result.cwd / "r.html").read_text()
    assert '<span class="verdict v-errors">passed on 1 of 4 conversations; 3 errored</span>' in page
    assert 'class="verdict v-passed"' not in page
    assert '<span>0 failed</span>' in page and '<span class="s-error">3 errored</span>' in page
    summary = (result.cwd / "s.md").read_text()
    assert summary.startswith("### ❌ evalcli `d.yaml`: **passed on 1 of 4 conversations; 3 errored**"), summary
    write("ok.yaml", "target: agents:echo\ngates: [{includes: said}]\ndata: [{input: hi}]\n")
    clean = cli("run", "ok.yaml", "--html", "ok.html")
    assert "verdict: passed   conversations: 1   errors: 0" in clean.stdout
    head = (clean.cwd / "ok.html").read_text().split("</header>")[0]
    assert '<span class="verdict v-passed">passed</span>' in head and 'class="s-failed"' not in head


LONG_ID = "brooklyn-weather-tomorrow-and-the-day-after-tomorrow"
WIDE = f"""
target: agents:echo
gates: [{{includes: said}}]
scorers: [{{includes: said}}, {{excludes: zzz}}, {{similarity: "you said something long"}}, {{matches: 'said \\w+'}}]
data:
  - {{id: {LONG_ID}, input: hello}}
  - {{id: calm, input: fine}}
"""


def rendered(render: Callable[[Console], None], width: int) -> str:
    out = io.StringIO()
    render(Console(file=out, width=width, highlight=False, markup=False, soft_wrap=False))
    return out.getvalue()


def test_ids_and_dataset_paths_are_never_cut_in_a_table(workdir: Path, write: Callable[..., Path],
                                                        cli: Callable[..., CliResult]) -> None:
    path = "datasets/forgetful-weather-conversations-of-the-whole-team.yaml"
    write(path, WIDE)
    first = cli("run", path, "--json", "-").json["run_id"]
    second = cli("run", path, "--json", "-").json["run_id"]
    off_tty = cli("run", path).stdout + cli("runs").stdout  # not a terminal: 160 columns
    assert LONG_ID in off_tty and path in off_tty and "…" not in off_tty, off_tty
    store = Store.existing(workdir / "evalcli.db")
    try:
        run = load_run(store, second)

        def conversations(console: Console) -> None:
            report = TerminalReport(console, run.result, run.plan.scorer_ids, run.plan.gate_ids)
            deliver(run.items(), [report])
            report.close()

        for width in (80, 160):
            table = rendered(conversations, width)
            assert LONG_ID in table and "…" not in table, table
            assert "#1 = includes(said), #2 = excludes(zzz)" in table or width == 160
            runs = rendered(lambda console: console.print(runs_table(store)), width)
            assert path in runs and first in runs and second in runs, runs
    finally:
        store.close()
    turns = write("t.yaml", "target: agents:echo\ndata:\n  - turns: [{input: a, gates: [{includes: said}]}]\n")
    titles = cli("run", str(turns)).stdout.splitlines()
    assert "Turn results (mean per turn index across conversations)" in titles
    same = cli("diff", first, second)
    assert same.code == 0 and "Conversations (A -> B): 2 unchanged conversations not shown" in same.stdout
    assert same.stdout.count("┏") == 2  # the scorer and gate tables; no empty conversations table


PLAIN = '''
_history = {}

def remembers(input, *, memory=None):
    """Keeps its own history per thread: evalcli cannot see it."""
    past = _history.setdefault(memory["thread"], [])
    past.append(input)
    return "said " + " then ".join(past)
'''


def test_the_memory_warning_states_what_is_known_and_how_to_silence_it(write: Callable[..., Path],
                                                                       cli: Callable[..., CliResult]) -> None:
    write("plain.py", PLAIN)
    write("d.yaml", "target: plain:remembers\nscorers: [{includes: then}]\ndata: [{inputs: [a, b]}]\n")
    warned = cli("run", "d.yaml").stderr
    assert "target plain:remembers has no 'memory' attribute: if it keeps no history of its own per thread, no turn " \
           "of its 1 multi-turn conversation can recall the earlier ones (they run anyway); if it does keep one, say " \
           "so with 'memory = True' on the target or 'target_has_memory: true' in the dataset" in warned, warned
    write("d.yaml", "target: plain:remembers\ntarget_has_memory: true\nscorers: [{includes: then}]\n"
                    "data: [{inputs: [a, b]}]\n")
    quiet = cli("run", "d.yaml")
    assert quiet.code == 0 and "memory" not in quiet.stderr, quiet.stderr


def test_a_turn_that_failed_shows_what_the_user_said(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", "target: agents:boom\ngates: [{includes: fine}]\ndata: [{id: first, inputs: [boom now, then]}]\n")
    result = cli("run", "d.yaml", "--html", "r.html", "--json", "-")
    turns = result.json["items"][0]["turns"]
    assert [(t["index"], t["input"], t["output"]) for t in turns] == [(0, "boom now", [])]
    shown = cli("show", "latest", "first").stdout
    assert "(item 0, inputs, 1 turn)" in shown and "User: boom now" in shown, shown
    assert "turn 0: the target raised ValueError: kaboom from the target" in shown
    page = (result.cwd / "r.html").read_text()
    assert "boom now" in page.split('id="evalcli-transcripts"')[0]  # the list shows the first message


MISTAKES = """
target: shop:shopbot
scorers:
  - includs: x
  - judge: {criterion: ok, model: "${UNSET_MODEL_VARIABLE}"}
data:
  - inputs: add eggs
  - turns:
      - inptu: hello
"""


def test_validation_errors_read_in_file_order_once_each_with_the_name_meant(write: Callable[..., Path],
                                                                            cli: Callable[..., CliResult]) -> None:
    write("shop.py", "def shop_bot(input, **kw):\n    return 'ok'\n")
    write("d.yaml", MISTAKES)
    result = cli("validate", "d.yaml")
    assert result.code == 2
    errors = [line.removeprefix("error: ") for line in result.stderr.splitlines() if not line.startswith("  hint")]
    assert errors == [
        "d.yaml:1:9: target 'shop:shopbot': module 'shop' has no attribute 'shopbot' (did you mean 'shop_bot'?)",
        "d.yaml:3:5: unknown scorer kind 'includs' (did you mean 'includes'?)",
        "d.yaml:4:35: environment variable UNSET_MODEL_VARIABLE is not set",
        "d.yaml:6:13: item 0: 'inputs' must be a non-empty array of messages, got a string",
        "d.yaml:8:9: item 1: turn 0: unknown key 'inptu' (did you mean 'input'?)",
    ], result.stderr
    assert "write 'inputs: [add eggs]' (a list), or 'input: add eggs' for a single turn" in result.stderr
    assert "--debug" in cli("validate", "-h").stdout  # what the internal-error hint tells every command to add


def test_a_framework_agent_that_cannot_reach_its_model_names_the_url_it_tried(tmp_path: Path) -> None:
    pytest.importorskip("pydantic_ai")
    base = f"http://127.0.0.1:{closed_port()}/v1"
    env = {"OPENAI_BASE_URL": base, "OPENAI_API_KEY": "sk-test-0123456789abcdef", "EVALCLI_LLM_RETRIES": "0"}
    result = run_cli(["run", "datasets/frameworks/pydantic_ai.yaml", "--limit", "1", "--db", str(tmp_path / "f.db"),
                      "--json", "-"], REPO, env)
    error = json.loads(result.stdout)["items"][0]["error"]
    assert f"(requesting {base}/chat/completions)" in error, error
