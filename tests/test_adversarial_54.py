"""Adversarial try (adv21) of a turn's messages checked and serialised once, when the turn is recorded
(``evalcli/stored_json.py``, docs/targets/python.md "Return value"): the real CLI, real SQLite files."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli
from tests.llm_server import LLMServer, text

SECRET = "sk-proj-Adv21SecretValue0123456789"

SHARED = '''
import os

shared = {"role": "assistant", "content": "A"}

def answer(input, **kw):
    # turn "one" returns a message the agent keeps; the next turn changes it after it was returned
    if input == "one":
        shared.pop("loop", None)
        shared["content"] = "A " + os.environ.get("OPENAI_API_KEY", "")
        return [shared]
    if input == "two":
        shared["content"] = "B"
    if input == "loop":
        shared["loop"] = shared
    return "second"
'''
SCORER = '''
def ok(run):
    return True
'''


def _project(tmp_path: Path, agent: str, turns: str) -> None:
    (tmp_path / "agent.py").write_text(agent)
    (tmp_path / "my_scorer.py").write_text(SCORER)
    (tmp_path / "d.yaml").write_text(f"target: agent:answer\ngates: [{{python: my_scorer:ok}}]\ndata:\n  - {turns}\n")


def _outputs(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [row[0] for row in conn.execute("SELECT output FROM turns ORDER BY item_index, turn_index")]


def _items(db: Path) -> dict[str, str]:
    with sqlite3.connect(db) as conn:
        return {row[0]: row[2] or row[1] for row in conn.execute("SELECT item_id, status, error FROM items")}


def test_a_message_changed_after_its_turn_is_stored_as_returned_with_a_secret_or_without(tmp_path: Path) -> None:
    # the writer bound the text made when the turn was recorded ("A ..."), but with a secret anywhere in the
    # conversation it serialised the messages again as they were then ("B"): what was stored hung on a secret
    _project(tmp_path, SHARED, "turns: [{input: one}, {input: two}]")
    plain = run_cli(["run", "d.yaml", "--db", "plain.db"], tmp_path)
    assert plain.code == 0, plain.stderr
    secret = run_cli(["run", "d.yaml", "--db", "secret.db"], tmp_path, {"OPENAI_API_KEY": SECRET})
    assert secret.code == 0, secret.stderr
    assert [json.loads(t)[0]["content"] for t in _outputs(tmp_path / "plain.db")] == ["A ", "second"]
    assert [json.loads(t)[0]["content"] for t in _outputs(tmp_path / "secret.db")] == ["A [redacted]", "second"]
    assert SECRET not in (tmp_path / "secret.db").read_bytes().decode("utf-8", "replace")


def test_a_message_made_to_hold_itself_after_its_turn_is_not_lost_when_the_conversation_holds_a_secret(
        tmp_path: Path) -> None:
    # stored as "A [redacted]" when its turn was recorded, it was serialised again by the writer, which looped:
    # "could not store all of run: ValueError: Circular reference detected" with the run passing (exit 0)
    _project(tmp_path, SHARED, "turns: [{input: one}, {input: loop}]")
    result = run_cli(["run", "d.yaml", "--db", "x.db"], tmp_path, {"OPENAI_API_KEY": SECRET})
    assert result.code == 0, result.stderr
    assert "could not store" not in result.stderr
    assert [json.loads(t)[0]["content"] for t in _outputs(tmp_path / "x.db")] == ["A [redacted]", "second"]


def test_a_message_made_to_hold_itself_after_its_turn_is_not_lost_under_repeat(tmp_path: Path) -> None:
    # --repeat stores each play's turns (the plays table) serialised again from the messages as they were then:
    # "could not store all of run: RecursionError" with the run passing, no secret needed
    _project(tmp_path, SHARED, "turns: [{input: one}, {input: loop}]")
    result = run_cli(["run", "d.yaml", "--db", "x.db", "--repeat", "2"], tmp_path)
    assert result.code == 0, result.stderr
    assert "could not store" not in result.stderr
    assert [json.loads(t)[0]["content"] for t in _outputs(tmp_path / "x.db")] == ["A ", "second"]
    with sqlite3.connect(tmp_path / "x.db") as conn:
        plays = [json.loads(row[0]) for row in conn.execute("SELECT turns FROM plays ORDER BY play")]
    assert [[turn["output"][0]["content"] for turn in play] for play in plays] == [["A ", "second"]] * 2


def test_a_message_holding_itself_from_a_target_that_raised_the_recursion_limit_is_its_error_not_a_crash(
        tmp_path: Path) -> None:
    # the C encoder, made without its check of values holding themselves, recursed until the C stack overflowed:
    # the whole run died of SIGSEGV (before stored_json, the message was walked first: the conversation's error)
    agent = ("import sys\n\ndef answer(input, **kw):\n    sys.setrecursionlimit(1_000_000)\n"
             "    m = {'role': 'assistant', 'content': 'x'}\n    if input == 'loop':\n        m['self'] = m\n"
             "    return [m]\n")
    _project(tmp_path, agent, "{id: loop, input: loop}\n  - {id: ok, input: ok}")
    result = run_cli(["run", "d.yaml", "--db", "x.db"], tmp_path)
    assert result.code == 4, (result.code, result.stderr)
    assert _items(tmp_path / "x.db") == {
        "ok": "ok", "loop": "turn 0: response message 0 holds itself at ['self']: it cannot be stored as JSON; return "
                            "plain data (the value's text, or a copy a JSON encoder can write)"}


def test_a_value_whose_text_fails_with_a_lone_surrogate_is_its_conversations_error_not_lost(tmp_path: Path) -> None:
    # the conversation's error quoted the exception's text, lone surrogate and all: the writer could not store the
    # error ("could not store all of run: UnicodeEncodeError")
    agent = ("class Odd:\n    def __str__(self):\n        raise ValueError('no \\ud800 here')\n\n"
             "def answer(input, **kw):\n    return [{'role': 'assistant', 'content': Odd() if input == 'odd' else 'x'}]\n")
    _project(tmp_path, agent, "{id: odd, input: odd}\n  - {id: ok, input: ok}")
    result = run_cli(["run", "d.yaml", "--db", "x.db"], tmp_path)
    assert result.code == 4, result.stderr
    assert "could not store" not in result.stderr
    items = _items(tmp_path / "x.db")
    assert items["ok"] == "ok"
    assert items["odd"] == ("turn 0: response message 0 cannot be written as JSON (ValueError: no \\ud800 here): it "
                            "cannot be stored as JSON; return plain data (the value's text, or a copy a JSON encoder "
                            "can write)")


def test_a_target_exception_with_a_lone_surrogate_is_its_conversations_error_not_lost(tmp_path: Path) -> None:
    agent = ("def answer(input, **kw):\n    if input == 'bad':\n        raise RuntimeError('bad \\ud800 thing')\n"
             "    return 'x'\n")
    _project(tmp_path, agent, "{id: bad, input: bad}\n  - {id: ok, input: ok}")
    result = run_cli(["run", "d.yaml", "--db", "x.db"], tmp_path)
    assert result.code == 4, result.stderr
    assert "could not store" not in result.stderr
    assert _items(tmp_path / "x.db") == {"ok": "ok", "bad": "turn 0: the target raised RuntimeError: bad \\ud800 thing"}


def test_an_integer_a_worker_made_writable_by_raising_its_digit_limit_does_not_end_the_run(tmp_path: Path) -> None:
    # stored by the worker under its own limit (0: none), the text was read back by the run's process under Python's
    # (4,300 digits) to report it: "internal error: ValueError: Exceeds the limit", exit 70, the conversations after
    # it unstored; `evalcli show` of the stored one failed the same way
    agent = ("import sys\n\ndef answer(input, **kw):\n    sys.set_int_max_str_digits(0)\n"
             "    return [{'role': 'assistant', 'content': 'x', 'n': 10 ** 5000 if input == 'long' else 1}]\n")
    _project(tmp_path, agent, "{id: long, input: long}\n  - {id: ok, input: ok}")
    result = run_cli(["run", "d.yaml", "--db", "x.db", "--workers", "2"], tmp_path)
    assert result.code == 4, (result.code, result.stderr)
    assert "internal error" not in result.stderr and "could not store" not in result.stderr
    items = _items(tmp_path / "x.db")
    assert items["ok"] == "ok"
    assert items["long"].startswith("turn 0: response message 0 cannot be written as JSON (ValueError: Exceeds the "
                                    "limit (4300 digits)"), items
    with sqlite3.connect(tmp_path / "x.db") as conn:
        run_id = conn.execute("SELECT id FROM runs").fetchone()[0]
    for item in ("0", "1"):
        shown = run_cli(["show", run_id, item, "--db", "x.db"], tmp_path)
        assert shown.code == 0, shown.stderr


@pytest.mark.parametrize("workers", [[], ["--workers", "2"]])
def test_non_ascii_messages_are_stored_as_json_dumps_writes_them(tmp_path: Path, workers: list[str]) -> None:
    agent = ("def answer(input, **kw):\n    return [{'role': 'assistant', 'content': 'h\\u00e9llo \\u2713 \\U0001f600 '"
             " + input, '\\u00fc': ['\\u4e2d', 1.5, None]}]\n")
    _project(tmp_path, agent, "{id: a, input: \"z\\u00df\"}\n  - {id: b, input: b}")
    result = run_cli(["run", "d.yaml", "--db", "x.db", *workers], tmp_path)
    assert result.code == 0, result.stderr
    expected = [json.dumps([{"role": "assistant", "content": f"h\u00e9llo \u2713 \U0001f600 {i}",
                             "\u00fc": ["\u4e2d", 1.5, None]}], ensure_ascii=False, default=str) for i in ("z\u00df", "b")]
    with sqlite3.connect(tmp_path / "x.db") as conn:
        raw = [row[0] for row in conn.execute("SELECT CAST(output AS BLOB) FROM turns ORDER BY item_index")]
    assert raw == [e.encode("utf-8") for e in expected]


@pytest.mark.parametrize("env", [{}, {"OPENAI_API_KEY": SECRET}])
def test_a_scorer_writing_into_output_does_not_change_the_stored_turn(tmp_path: Path, env: dict[str, str]) -> None:
    agent = ("import os\n\ndef answer(input, **kw):\n"
             "    return [{'role': 'assistant', 'content': 'Sunny ' + os.environ.get('OPENAI_API_KEY', '')}]\n")
    _project(tmp_path, agent, "{id: a, input: a}")
    (tmp_path / "my_scorer.py").write_text("def ok(run):\n    for m in run.output:\n        m['content'] = 'MUTATED'\n"
                                           "    run.output.append({'role': 'assistant', 'content': 'added'})\n"
                                           "    return True\n")
    result = run_cli(["run", "d.yaml", "--db", "x.db"], tmp_path, env)
    assert result.code == 0, result.stderr
    expected = "Sunny [redacted]" if env else "Sunny "
    assert [json.loads(t) for t in _outputs(tmp_path / "x.db")] == [[{"role": "assistant", "content": expected}]]


LANGGRAPH = '''
from typing import Annotated, Any, TypedDict
from langchain_core.messages import AIMessage
from langgraph.graph import StateGraph, START, END
from langgraph.graph.message import add_messages

class State(TypedDict):
    messages: Annotated[list, add_messages]
    note: Any

def node(state):
    note = "bad \\ud800" if state["messages"][-1].content == "bad" else "fine"
    return {"messages": [AIMessage(content="Sunny")], "note": note}

builder = StateGraph(State)
builder.add_node("n", node)
builder.add_edge(START, "n")
builder.add_edge("n", END)
graph = builder.compile()
'''


def test_a_langgraph_state_the_store_cannot_write_is_its_conversations_error_not_lost(tmp_path: Path) -> None:
    # the messages were checked when the turn was recorded, the final state (the turn's structured result) was not:
    # "could not store all of run: UnicodeEncodeError" with the run passing (exit 0)
    pytest.importorskip("langgraph")
    (tmp_path / "lg.py").write_text(LANGGRAPH)
    (tmp_path / "d.yaml").write_text("target: lg:graph\ngates: [{includes: Sunny}]\ndata:\n  - {id: ok, input: ok}\n"
                                     "  - {id: bad, input: bad}\n")
    result = run_cli(["run", "d.yaml", "--db", "x.db"], tmp_path, {"PYTHONPATH": f"{tmp_path}:{REPO}"}, fresh=True)
    assert result.code == 4, result.stderr
    assert "could not store" not in result.stderr
    assert _items(tmp_path / "x.db") == {"ok": "ok", "bad": "turn 0: the structured result holds text that is not "
                                         "Unicode (\\ud800, a lone surrogate): it cannot be stored as JSON"}
    with sqlite3.connect(tmp_path / "x.db") as conn:
        assert conn.execute("SELECT structured FROM turns WHERE item_id = 'ok'").fetchone()[0] == '{"note": "fine"}'


@pytest.mark.xfail(strict=True, reason="scorers see the messages as they are when scoring (a target changed one it "
                   "keeps after returning it), the store the text made when the turn was recorded: a gate fails on "
                   "words `evalcli show` does not show; a snapshot for the scorers (json.loads of output_text, or a "
                   "deep copy) changes the objects a scorer gets and costs a turn more: left for a decision")
def test_the_scorers_see_the_messages_the_turn_returned_as_the_store_does(tmp_path: Path) -> None:
    _project(tmp_path, SHARED, "turns: [{input: one}, {input: two}]")
    (tmp_path / "d.yaml").write_text((tmp_path / "d.yaml").read_text().replace("{python: my_scorer:ok}",
                                                                                "{includes: A}"))
    result = run_cli(["run", "d.yaml", "--db", "x.db"], tmp_path)
    assert [json.loads(t)[0]["content"] for t in _outputs(tmp_path / "x.db")] == ["A ", "second"]
    assert result.code == 0, result.stdout  # includes(A) read "B second": turn 0 as the target changed it later


@pytest.mark.parametrize("secret", ['Zq"9\\x/\u00e9-Secret-Value-77', "tab\there-Secret-Value-3"])
def test_a_secret_json_escapes_in_a_message_is_redacted_from_the_text_made_when_the_turn_was_recorded(
        tmp_path: Path, secret: str) -> None:
    # the writer redacts the recorded text (Texts.output): the secret is found as JSON escaped it, key and value
    agent = ("import os\n\ndef answer(input, **kw):\n    s = os.environ['MY_API_KEY']\n"
             "    return [{'role': 'assistant', 'content': 'x ' + s, s: 1, 'tab': '\\t' + s + '\\n'}]\n")
    _project(tmp_path, agent, "{id: a, input: a}")
    result = run_cli(["run", "d.yaml", "--db", "x.db"], tmp_path, {"MY_API_KEY": secret})
    assert result.code == 0, result.stderr
    assert _outputs(tmp_path / "x.db") == ['[{"role": "assistant", "content": "x [redacted]", "[redacted]": 1, '
                                           '"tab": "\\t[redacted]\\n"}]']
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("x.db*"))
    assert not any(form.encode() in stored for form in (secret, json.dumps(secret)[1:-1],
                                                        json.dumps(secret, ensure_ascii=False)[1:-1]))


def test_a_message_nesting_deeper_than_evalcli_reads_back_is_its_conversations_error(tmp_path: Path) -> None:
    agent = ("import sys\n\ndef answer(input, **kw):\n    sys.setrecursionlimit(20_000)\n    v = 'leaf'\n"
             "    for _ in range(3000 if input == 'deep' else 5):\n        v = [v]\n"
             "    return [{'role': 'assistant', 'content': 'x', 'deep': v}]\n")
    _project(tmp_path, agent, "{id: deep, input: deep}\n  - {id: ok, input: ok}")
    result = run_cli(["run", "d.yaml", "--db", "x.db"], tmp_path)
    assert result.code == 4, (result.code, result.stderr)
    items = _items(tmp_path / "x.db")
    assert items["ok"] == "ok"
    assert items["deep"].startswith("turn 0: response message 0 nests lists and mappings deeper than 900 levels"), items
    with sqlite3.connect(tmp_path / "x.db") as conn:
        run_id = conn.execute("SELECT id FROM runs").fetchone()[0]
    for item in ("deep", "ok"):
        shown = run_cli(["show", run_id, item, "--db", "x.db"], tmp_path)
        assert shown.code == 0, shown.stderr


def test_a_simulated_users_message_with_a_lone_surrogate_is_its_conversations_error_not_lost(
        write: Callable[..., Path], workdir: Path, llm_server: LLMServer) -> None:
    # the simulator's reply (JSON escaping "\\ud800") was sent and recorded as the turn's input: the writer could not
    # store it ("could not store all of run: UnicodeEncodeError")
    llm_server.responder = lambda request: text("user \ud800 message")
    write("d.yaml", """
        target: agents:scripted
        gates: [{includes: reply}]
        data:
          - id: chat
            simulate: {goal: chat, max_turns: 2, model: openai/sim}
          - {id: ok, input: hi}
    """)
    done = run_cli(["run", "d.yaml", "--db", "x.db", "--no-cache"], workdir,
                   env={"OPENAI_API_BASE": llm_server.url, "EVALCLI_LLM_RETRIES": "0"})
    assert "could not store" not in done.stderr
    items = _items(workdir / "x.db")
    assert items["chat"] == ("turn 0: the simulated user (model openai/sim) wrote text that is not Unicode (\\ud800, a "
                             "lone surrogate): it cannot be sent or stored"), items


def test_a_scorers_error_with_a_lone_surrogate_does_not_lose_the_conversation(tmp_path: Path) -> None:
    _project(tmp_path, "def answer(input, **kw):\n    return 'x'\n", "{id: a, input: a}")
    (tmp_path / "my_scorer.py").write_text("def ok(run):\n    raise ValueError('scorer \\ud800 failed')\n")
    result = run_cli(["run", "d.yaml", "--db", "x.db"], tmp_path)
    assert "could not store" not in result.stderr
    with sqlite3.connect(tmp_path / "x.db") as conn:
        outcomes = json.loads(conn.execute("SELECT outcomes FROM items").fetchone()[0])
    assert outcomes["gates"]["python(my_scorer:ok)"]["error"] == "ValueError: scorer \\ud800 failed"


def test_a_reason_with_a_lone_surrogate_is_stored_as_its_escape_not_lost(tmp_path: Path, llm_server: LLMServer) -> None:
    # a judge's reasoning (from its model's JSON reply) or a python scorer's reason holding a lone surrogate: the
    # writer lost the conversation ("could not store all of run: UnicodeEncodeError") and the run passed (exit 0)
    llm_server.responder = lambda request: text(json.dumps({"satisfied": True, "reasoning": "Sunny \ud800 indeed"}))
    (tmp_path / "agent.py").write_text("def answer(input, **kw):\n    return 'Sunny'\n")
    (tmp_path / "my_scorer.py").write_text("from evalcli import Score\n\ndef check(output, **kw):\n"
                                           "    return Score(1.0, 'custom \\ud800 reason')\n")
    (tmp_path / "scorers.yaml").write_text(f"""scorers:
  sunny-judge: {{judge: {{criterion: says sunny, model: openai/judge, api_base: "{llm_server.url}"}}}}
  custom: {{python: my_scorer:check}}
""")
    (tmp_path / "d.yaml").write_text("target: agent:answer\nscorers: [sunny-judge, custom]\ndata:\n  - {id: a, input: hi}\n")
    result = run_cli(["run", "d.yaml", "--db", "x.db", "--scorers", "scorers.yaml"], tmp_path,
                     {"PYTHONPATH": f"{tmp_path}:{REPO}", "OPENAI_API_KEY": "x"})
    assert result.code == 0, result.stderr
    assert "could not store" not in result.stderr
    with sqlite3.connect(tmp_path / "x.db") as conn:
        reasons = dict(conn.execute("SELECT scorer_id, reason FROM scores").fetchall())
        outcomes = json.loads(conn.execute("SELECT outcomes FROM items WHERE item_id = 'a'").fetchone()[0])
    assert reasons["custom"] == "custom \\ud800 reason" and "Sunny \\ud800 indeed" in reasons["sunny-judge"], reasons
    assert outcomes["scorers"]["custom"]["reason"] == "custom \\ud800 reason"


ERRING_KIND = '''
from pydantic import BaseModel
from evalcli.results import Outcome
from evalcli.scorers import Kind

class Args(BaseModel):
    value: str = "x"

class Erring:
    async def score(self, run):
        return Outcome(error="model \\ud800 refused", reason="half \\ud800 said")

KIND = Kind(name="erring", args=Args, main="value", build=lambda args, context: Erring(), summary="errs",
            example="erring: x")
'''


@pytest.mark.parametrize("role", ["gates", "scorers"])
def test_an_errored_outcomes_reason_with_a_lone_surrogate_is_stored_as_its_escape(tmp_path: Path, role: str) -> None:
    # a plugin scorer's outcome that is an error and keeps a reason holding a lone surrogate: only the error was
    # escaped, so the writer lost the conversation ("could not store all of run") and the run went on
    from tests.plugin_packages import installed
    installed(tmp_path, "erring-kinds", {"evalcli.scorers": {"erring": "erring_kinds:KIND"}},
              {"erring_kinds.py": ERRING_KIND})
    (tmp_path / "agent.py").write_text("def answer(input, **kw):\n    return 'Sunny'\n")
    (tmp_path / "d.yaml").write_text(f"target: agent:answer\n{role}: [{{erring: x}}]\ndata:\n  - {{id: a, input: hi}}\n")
    result = run_cli(["run", "d.yaml", "--db", "x.db"], tmp_path, {"PYTHONPATH": f"{tmp_path}:{REPO}"})
    assert "could not store" not in result.stderr, result.stderr
    with sqlite3.connect(tmp_path / "x.db") as conn:
        outcomes = json.loads(conn.execute("SELECT outcomes FROM items WHERE item_id = 'a'").fetchone()[0])
    (outcome,) = outcomes[role].values()
    assert outcome["reason"] == "half \\ud800 said" and outcome["error"] == "model \\ud800 refused", outcome
    assert outcome.get("score") == (0.0 if role == "gates" else None), outcome
