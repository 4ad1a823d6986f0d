"""Adversarial try 69: what a run prints and writes when the agent, its tools and its scorers write hostile text
(docs/history.md#what-a-terminal-is-sent, docs/ci.md#the-markdown-summary-shows-text-as-written), broken as users
would: the real CLI in subprocesses, real SQLite files. Each test failed on the main this branch started from.

- An agent's reply, a tool's name or result, or an exception's message holding ``ESC [2J`` (clear the screen),
  ``ESC ]52`` (write the clipboard), ``ESC ]8`` (a link) or a NUL reached the terminal as written: in ``run``'s
  failing conversations and in every part of ``show``'s transcript. A right-to-left override (U+202E) in an id
  turned the rest of its table row around.
- A 3,000-character id took a table's whole width: ``run``'s and ``diff``'s conversation tables showed no status,
  no gates, no A or B.
- A scorer's reason (or an error) holding ``\\r`` started lines of the Markdown summary (a heading, a table); a
  ``<!--`` hid the rest of it, a ``</details>`` closed its block, ``[text](url)`` made a link; an id holding a
  backtick broke out of its code span.

What held: the HTML report opened in Chromium with ``</script>``, ``<img onerror>`` and ``javascript:`` links in
replies, tool results and ids ran no script and asked for nothing; JUnit parsed with every control character and
U+FFFE in ids and reasons; a lone surrogate in an id is refused at load (exit 2); a reply of 10 MB runs and
reports; ``LANG=C`` and ``NO_COLOR`` print the same words; exit codes matched docs/reference/exit-codes.md.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

from markdown_it import MarkdownIt

from tests.conftest import CliResult
from tests.reliability_helpers import SUBPROCESS_TIMEOUT, cli_env

TERMINAL_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

HOSTILE_AGENT = r'''
import json

ESC = "\x1b"
CLEAR = ESC + "[2J" + ESC + "[H"
LINK = ESC + "]8;;https://evil.example/\x07click here" + ESC + "]8;;\x07"
CLIPBOARD = ESC + "]52;c;ZXZpbA==\x07"
HOSTILE = CLEAR + LINK + CLIPBOARD + " nul\x00 csi\x9b31m FAILED\rPASSED done"


def agent(input: str):
    if input == "raise":
        raise RuntimeError("boom " + HOSTILE)
    call = {"id": "c1", "type": "function",
            "function": {"name": "lookup" + ESC + "[31m", "arguments": json.dumps({"q": HOSTILE})}}
    return [{"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": HOSTILE},
            {"role": "assistant", "content": HOSTILE}]


agent.memory = True
'''


def controls(text: str) -> list[str]:
    return sorted({repr(c) for c in TERMINAL_CONTROLS.findall(text)})


def test_no_terminal_control_character_an_agent_writes_reaches_the_terminal(
        write: Callable[..., Path], cli: Callable[..., CliResult], workdir: Path) -> None:
    write("agent.py", HOSTILE_AGENT)
    write("d.yaml", """
        target: agent:agent
        gates: [{includes: nothing-like-this}]
        data:
          - {id: "turned-\\u202Earound", input: hello}
          - {id: raises, input: raise}
        """)
    run = cli("run", "d.yaml", "--db", "t.db")
    assert run.code == 1, run.stderr  # a gate missed, and an item errored: 1 comes first
    assert not controls(run.stdout + run.stderr), (controls(run.stdout + run.stderr), run.stdout)
    assert "[2J[H]8;;https://evil.example/click here]8;;]52;c;ZXZpbA==" in run.stdout  # shown, as inert text
    for item in ("turned-\u202earound", "raises", "0"):
        shown = cli("show", "latest", item, "--db", "t.db")
        assert shown.code == 0, shown.stderr
        assert not controls(shown.stdout + shown.stderr), (item, controls(shown.stdout + shown.stderr), shown.stdout)
        assert "lookup[31m" in shown.stdout or item == "raises"
    # the show command printed for the conversation whose id holds U+202E finds it, pasted into bash
    line = next(line.strip() for line in run.stdout.splitlines() if "evalcli show" in line and "turned" in line)
    assert "$'turned-\\u202earound'" in line, line
    pasted = subprocess.run(["bash", "-c", line.replace("evalcli show", "python -m evalcli show", 1)], cwd=workdir,
                            env=cli_env(), capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    assert pasted.returncode == 0 and "Conversation turned-around" in pasted.stdout, pasted.stderr


def test_a_very_long_id_leaves_the_other_columns_their_room(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    long_id = "x" * 3000
    write("agent.py", "def agent(input):\n    return 'fine' if input == 'one' else 'other'\n")
    write("d.yaml", f"""
        target: agent:agent
        gates: [{{includes: fine}}]
        data:
          - {{id: {long_id}, input: one}}
          - {{id: short, input: two}}
        """)
    run = cli("run", "d.yaml", "--db", "t.db")
    assert run.code == 1, run.stderr
    header = next(line for line in run.stdout.splitlines() if "┃ item" in line)
    assert "status" in header and "gates" in header, header
    short = next(line for line in run.stdout.splitlines() if "│ short" in line)
    assert "0/1" in short and "ok" in short, short
    assert all(len(line) <= 160 for line in run.stdout.splitlines())
    assert run.stdout.replace("│", "").replace(" ", "").replace("\n", "").count("x" * 3000) == 0  # folded...
    assert "".join(line.split("│")[1].strip() for line in run.stdout.splitlines()
                   if line.startswith("│ x")) == long_id  # ...never cut
    write("agent.py", "def agent(input):\n    return 'other'\n")
    assert cli("run", "d.yaml", "--db", "t.db").code == 1
    first, second = [row[0] for row in run.db("t.db").execute("SELECT id FROM runs ORDER BY id")]
    diff = cli("diff", first, second, "--db", "t.db", "-v")
    assert diff.code == 1, diff.stderr  # the first conversation passed in A and fails in B
    header = next(line for line in diff.stdout.splitlines() if "┃ item" in line)
    assert re.search(r"┃ A +┃ B +┃", header), header


def test_the_markdown_summary_shows_hostile_text_as_written(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("agent.py", HOSTILE_AGENT)
    write("gates.py", '''
        from evalcli import Score

        def hostile(run):
            return Score(0.0, reason="r1\\r\\r# Pwned\\r\\r| a | b |\\r|---|---|\\r<!-- hide the rest\\r"
                                     "</details> <img src=x onerror=alert(1)> [click](https://evil.example) end\\x1b[2J")
        ''')
    write("d.yaml", """
        target: agent:agent
        gates: [{python: "gates:hostile"}]
        data:
          - {id: "tick`quote", input: hello}
          - {id: raises, input: raise}
          - {id: last, input: hello}
        """)
    run = cli("run", "d.yaml", "--db", "t.db", "--markdown", "summary.md", "--junit", "junit.xml")
    assert run.code == 1, run.stderr
    text = (run.cwd / "summary.md").read_text(encoding="utf-8")
    assert not controls(text.replace("\n", "")), controls(text)
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    kinds = [t.type for t in tokens]
    assert kinds.count("heading_open") == 1, text  # the summary's own, no "# Pwned"
    assert kinds.count("table_open") == 1, text  # the gates' table, no injected one
    html = [t.content for t in tokens if t.type == "html_block"] + [
        c.content for t in tokens if t.children for c in t.children if c.type == "html_inline"]
    assert html == ["<details><summary>Failing conversations (3)</summary>\n", "</details>\n"], html
    links = [c for t in tokens if t.children for c in t.children if c.type == "link_open"]
    assert not links, text
    codes = [c.content for t in tokens if t.children for c in t.children if c.type == "code_inline"]
    assert "tick`quote" in codes and "raises" in codes and "last" in codes, codes
    items = [t for t in tokens if t.type == "list_item_open"]
    assert len(items) == 3, text
    import xml.etree.ElementTree as ET

    ET.parse(run.cwd / "junit.xml")  # held: XML 1.0 cannot hold a control character, and none is written


def test_a_terminal_20_columns_wide_still_shows_each_conversations_status_and_gates(
        write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("agent.py", "def agent(input):\n    return 'fine' if input == 'one' else 'other'\n")
    write("d.yaml", """
        target: agent:agent
        gates: [{includes: fine}]
        scorers: [{includes: other}]
        data:
          - {id: passes, input: one}
          - {id: misses, input: two}
        """)
    # rich reads a terminal's width from COLUMNS; FORCE_COLOR makes the pipe a terminal to it
    run = cli("run", "d.yaml", env=cli_env(COLUMNS="20", FORCE_COLOR="1"))
    assert run.code == 1, run.stderr
    plain = re.sub("\x1b\\[[0-9;]*m", "", run.stdout)
    conversations = plain.split("Conversations", 1)[1].split("Gates", 1)[0]
    flat = " ".join(conversations.split())
    assert "passes form input turns 1 #1 0 gates 1/1 status ok" in flat, plain
    assert "misses form input turns 1 #1 1 gates 0/1 status ok" in flat, plain
    gates = plain.split("Gates", 1)[1].split("Scores", 1)[0]
    assert "0.5" in gates and "FAIL" in gates, plain  # the gate's figures, beside its folded id
    scores = plain.split("Scores", 1)[1]
    assert re.search(r"│ 0\.5 +│", scores), plain


def test_pytest_failure_texts_hold_no_terminal_control_character(tmp_path: Path) -> None:
    from tests.pytest_project import run_pytest, write_project

    write_project(tmp_path, {"agent.py": HOSTILE_AGENT, "d.yaml": """
        target: agent:agent
        gates: [{includes: nothing-like-this}]
        data:
          - {id: "turned-\\u202Earound", input: hello}
          - {id: raises, input: raise}
        """})
    result = run_pytest(tmp_path, "d.yaml", "--junitxml=junit.xml")
    assert result.code == 1, result.out
    failures = result.out[result.out.index("FAILURES"):result.out.index("short test summary")]
    # each failure's text; its header is pytest's, of the item's name: the dataset's id as written
    texts = "\n".join(line for line in failures.splitlines() if not line.startswith("_"))
    assert not controls(texts), (controls(texts), failures)
    summary = result.out[result.out.index("short test summary"):]
    assert "raised RuntimeError: boom [2J[H]8;;" in summary and not controls(summary.replace("turned-\u202e", "")), (
        controls(summary), summary)
    assert "$'turned-\\u202earound'" in failures, failures
