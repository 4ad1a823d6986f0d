"""``evalcli show RUN ITEM`` of a conversation with a very long text shows its first 100,000 characters and counts
the rest (docs/reference/cli.md); ``--json -`` keeps the whole text. Through the real CLI."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.conftest import run_cli

AGENT = '''
def agent(input, **kw):
    call = {"id": "c1", "type": "function", "function": {"name": "fetch", "arguments": "{}"}}
    return [{"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "r" * 130_000},
            {"role": "assistant", "content": "w" * 250_000 + "THE-LAST-WORD"}]
'''


def test_show_cuts_a_long_text_and_says_how_much_is_left(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "d.yaml").write_text("target: agent:agent\ngates: [{includes: THE-LAST-WORD}]\ndata: [{id: a, input: hi}]\n")
    assert run_cli(["run", "d.yaml", "--quiet"], tmp_path).code == 0
    run_id = sqlite3.connect(tmp_path / "evalcli.db").execute("SELECT id FROM runs").fetchone()[0]
    shown = run_cli(["show", run_id, "a"], tmp_path)
    assert shown.code == 0, shown.stderr
    assert "[150,013 more characters: evalcli show RUN ITEM --json - has the whole text]" in shown.stdout
    assert "[30,000 more characters" in shown.stdout  # the tool result's ("r" * 130,000, as written)
    assert "wTHE-LAST-WORD" not in shown.stdout and shown.stdout.count("w") >= 100_000
    whole = run_cli(["show", run_id, "a", "--json", "-"], tmp_path)
    assert whole.code == 0, whole.stderr
    texts = [m["content"] for t in json.loads(whole.stdout)["item"]["turns"] for m in t["output"] if m["role"] == "assistant"]
    assert texts[-1] == "w" * 250_000 + "THE-LAST-WORD"
