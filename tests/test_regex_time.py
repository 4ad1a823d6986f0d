"""A dataset's regular expression that backtracks without end is stopped and said, not a run that never ends
(docs/checks.md, "A regex that never ends"): through the real CLI, and the one function's rule by itself."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from evalcli import regex_time
from tests.conftest import CliResult

AGENT = '''
import json

def agent(input, **kw):
    text = input
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"q": text})}}
    return [{"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {"role": "assistant", "content": text}]
'''

BOMB = "a" * 40 + "b"


def test_a_backtracking_pattern_is_that_checks_error_and_the_run_ends(write: Callable[..., Path],
                                                                       cli: Callable[..., CliResult]) -> None:
    write("slow_agent.py", AGENT)
    write("d.yaml", f"""
        target: slow_agent:agent
        data:
          - id: bomb
            input: "{BOMB}"
          - id: plain
            input: "aaa"
        gates:
          - matches: '(a+)+$'
        scorers:
          - tool_args: {{name: lookup, args: {{q: "/^(a|aa)+$/"}}}}
        """)
    result = cli("run", "d.yaml", "--json", "-")  # before: never ended (the subprocess's time limit)
    assert result.code == 1, result.stderr
    items = {item["id"]: item for item in result.json["items"]}
    assert items["plain"]["passed"] is True
    gate = items["bomb"]["outcomes"]["gates"]["matches((a+)+$)"]
    assert gate["score"] == 0 and "RegexTooSlow" in gate["error"] and "/(a+)+$/" in gate["error"], gate
    assert "41 characters" in gate["error"] and "backtracks" in gate["error"]
    scorer = next(iter(items["bomb"]["outcomes"]["scorers"].values()))
    assert scorer["score"] is None and "/^(a|aa)+$/" in scorer["error"], scorer
    assert list(items["plain"]["scores"].values()) == [1.0]
    stored = json.loads(result.db().execute("SELECT outcomes FROM items WHERE item_id = 'bomb'").fetchone()[0])
    assert "backtracks" in json.dumps(stored)


def test_the_limit_is_set_only_where_it_can_be_and_leaves_nothing_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(regex_time, "LIMIT", 0.2)
    with pytest.raises(regex_time.RegexTooSlow, match=r"0\.2 s on a text of 41 characters"):
        regex_time.search("(a+)+$", BOMB)
    assert signal.getsignal(signal.SIGALRM) == signal.SIG_DFL and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert regex_time.search(r"\d+", "it is 42 today").group(0) == "42"
    assert regex_time.search(r"\d+", "it is 42", whole=True) is None
    assert regex_time.search(r"it is \d+", "it is 42", whole=True) is not None
    # another thread (where Python runs no signal handler) and someone else's alarm: the pattern runs as re runs it
    found: list[object] = []
    worker = threading.Thread(target=lambda: found.append(regex_time._can_time()))
    worker.start()
    worker.join()
    assert found == [False]
    previous = signal.signal(signal.SIGALRM, lambda *_: None)
    try:
        assert regex_time._can_time() is False
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert regex_time._can_time() is True
