"""Adversarial try (adv20) of evalcli's own models built without pydantic's plugins (docs/performance.md "Pydantic's
plugins") and of response messages the store cannot write (docs/targets/python.md "Return value"): the real CLI, a
real plugin distribution on the path, real SQLite files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli
from tests.llm_server import LLMServer, verdict
from tests.plugin_packages import SEEING_PLUGIN, models_seen, seeing_plugin

AGENT = '''
from pydantic import BaseModel

class AtImport(BaseModel):
    x: int

def answer(input, **kw):
    return "Sunny"
'''
SCORER = '''
def check(output, **kw):
    return True
'''


def _project(tmp_path: Path) -> dict[str, str]:
    site = seeing_plugin(tmp_path / "site")
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "my_scorer.py").write_text(SCORER)
    return {"PYTHONPATH": f"{site}:{tmp_path}:{REPO}", "SEEN_MODELS": str(tmp_path / "seen.jsonl"), "OPENAI_API_KEY": "x"}


def _seen(tmp_path: Path) -> list[tuple[str, str]]:
    return models_seen(tmp_path / "seen.jsonl")


def _evalclis(seen: list[tuple[str, str]]) -> list[str]:
    return sorted({name for module, name in seen if module.startswith("evalcli")})


def test_a_plugin_sees_no_model_of_evalclis_judges_python_scorers_limits_or_turns(tmp_path: Path) -> None:
    # the judges' and the python kind's modules were imported with plugins on (scorers/kinds.py _kind), and so were
    # the dataset file's models (limits, turns: dataset/load.py): the plugin saw JudgeArgs, PythonArgs, ItemFile, ...
    env = _project(tmp_path)
    (tmp_path / "d.yaml").write_text("""
target: agent:answer
limits: {turns: 5}
scorers:
  - {python: my_scorer:check}
  - {judge: {criterion: says sunny, model: openai/judge, api_base: "http://127.0.0.1:9/v1"}}
  - {rubric: {criteria: [is sunny], model: openai/judge, api_base: "http://127.0.0.1:9/v1"}}
data:
  - {input: hi, limits: {seconds: 30}}
  - turns: [{input: a}, {input: b}]
""")
    result = run_cli(["validate", "d.yaml"], tmp_path, env, fresh=True)
    assert result.code == 0, result.stderr
    seen = _seen(tmp_path)
    assert ("agent", "AtImport") in seen  # the plugin is found and sees the user's model
    assert _evalclis(seen) == []


@pytest.mark.parametrize("target", ["{http: {url: 'http://127.0.0.1:9/chat', response: {text: reply}}}",
                                    "{model: openai/foo}"])
def test_a_plugin_sees_no_model_of_evalclis_own_targets(tmp_path: Path, target: str) -> None:
    env = _project(tmp_path)
    (tmp_path / "d.yaml").write_text(f"target: {target}\ngates: [{{includes: x}}]\ndata:\n  - input: hi\n")
    (tmp_path / "seen.jsonl").write_text('["agent", "AtImport"]\n')  # no user model here: the plugin is found anyway
    result = run_cli(["validate", "d.yaml"], tmp_path, env, fresh=True)
    assert result.code == 0, result.stderr
    assert _evalclis(_seen(tmp_path)) == []


@pytest.mark.parametrize("command", ["scorers", "schema"])
def test_a_plugin_sees_no_model_of_evalcli_in_scorers_or_schema(tmp_path: Path, command: str) -> None:
    env = _project(tmp_path)
    result = run_cli([command], tmp_path, env, fresh=True)
    assert result.code == 0, result.stderr
    assert _evalclis(_seen(tmp_path)) == []


def test_a_user_plugin_failing_on_evalclis_models_does_not_break_the_python_kind(tmp_path: Path) -> None:
    # a plugin raising on every model it is shown made evalcli refuse its own 'python' kind ("reinstall evalcli")
    env = _project(tmp_path)
    (tmp_path / "site" / "seeing_plugin.py").write_text(SEEING_PLUGIN.replace("with open", "raise RuntimeError('plugin')\n"
                                                                       "        with open"))
    (tmp_path / "d.yaml").write_text("target: agent:answer\nscorers: [{python: my_scorer:check}]\ndata:\n  - input: hi\n")
    (tmp_path / "agent.py").write_text("def answer(input, **kw):\n    return 'Sunny'\n")
    result = run_cli(["validate", "d.yaml"], tmp_path, env, fresh=True)
    assert result.code == 0, result.stderr


@pytest.mark.parametrize("judge", ["{rubric: {criteria: [is sunny], model: openai/judge, api_base: URL}}",
                                   "{completeness: {model: openai/judge, api_base: URL}}",
                                   "{grounded: {model: openai/judge, api_base: URL}}",
                                   "{knowledge_retention: {model: openai/judge, api_base: URL}}",
                                   "{role_adherence: {role: a weather bot, model: openai/judge, api_base: URL}}",
                                   "{judge: {criterion: says sunny, model: openai/judge, api_base: URL}}"])
def test_a_plugin_sees_no_verdict_model_a_judge_makes_at_its_first_call(tmp_path: Path, llm_server: LLMServer,
                                                                        judge: str) -> None:
    env = _project(tmp_path)
    llm_server.responder = lambda request: verdict(True)
    (tmp_path / "d.yaml").write_text(f"""
target: agent:answer
scorers:
  - {judge.replace("URL", repr(llm_server.url))}
data:
  - input: hi
""")
    result = run_cli(["run", "d.yaml", "--db", "x.db"], tmp_path, env, fresh=True)
    assert result.code in (0, 1, 4), result.stderr
    assert llm_server.requests
    assert _evalclis(_seen(tmp_path)) == []


def _stored(db: Path) -> dict[str, str]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT item_id, coalesce(error, status) FROM items").fetchall())


def test_a_long_integer_a_target_made_writable_is_its_conversations_error_with_workers_too(tmp_path: Path) -> None:
    # stored under the worker's raised limit, the run's own process could not read it back (exit 70):
    # tests/test_adversarial_54.py
    (tmp_path / "agent.py").write_text("import sys\n\ndef answer(input, **kw):\n    sys.set_int_max_str_digits(0)\n"
                                       "    return [{'role': 'assistant', 'content': 'Sunny', 'n': 10 ** 5000}]\n")
    (tmp_path / "d.yaml").write_text("target: agent:answer\ngates: [{includes: Sunny}]\ndata:\n  - {id: a, input: a}\n"
                                     "  - {id: b, input: b}\n")
    result = run_cli(["run", "d.yaml", "--db", "x.db", "--workers", "2"], tmp_path)
    assert result.code == 4, result.stderr
    assert "could not store" not in result.stderr
    assert {item: error.split(" (")[0] for item, error in _stored(tmp_path / "x.db").items()} == {
        "a": "turn 0: response message 0 cannot be written as JSON", "b": "turn 0: response message 0 cannot be written as JSON"}


def test_a_message_with_a_lone_surrogate_is_its_conversations_error_not_lost(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text("def answer(input, **kw):\n    text = 'Sunny' if input == 'ok' else 'Sunny \\ud800'\n"
                                       "    return [{'role': 'assistant', 'content': text}]\n")
    (tmp_path / "d.yaml").write_text("target: agent:answer\ngates: [{includes: Sunny}]\ndata:\n  - {id: ok, input: ok}\n"
                                     "  - {id: bad, input: bad}\n")
    result = run_cli(["run", "d.yaml", "--db", "x.db"], tmp_path)
    assert result.code == 4, result.stderr
    assert "could not store" not in result.stderr
    assert _stored(tmp_path / "x.db") == {"ok": "ok", "bad": "turn 0: response message 0 holds text that is not Unicode "
                                          "(\\ud800, a lone surrogate): it cannot be stored as JSON; return plain "
                                          "data (the value's text, or a copy a JSON encoder can write)"}


LANGGRAPH = '''
from typing import Annotated, TypedDict
from langchain_core.messages import AIMessage
from langgraph.graph import StateGraph, START, END
from langgraph.graph.message import add_messages

class State(TypedDict):
    messages: Annotated[list, add_messages]

def node(state):
    extra = [{"type": "data", "d": {(1, 2): 3}}] if state["messages"][-1].content == "bad" else []
    return {"messages": [AIMessage(content=[{"type": "text", "text": "Sunny"}, *extra])]}

builder = StateGraph(State)
builder.add_node("n", node)
builder.add_edge(START, "n")
builder.add_edge("n", END)
graph = builder.compile()
'''


def test_a_langgraph_message_the_store_cannot_write_is_its_conversations_error(tmp_path: Path) -> None:
    pytest.importorskip("langgraph")
    (tmp_path / "lg.py").write_text(LANGGRAPH)
    (tmp_path / "d.yaml").write_text("target: lg:graph\ngates: [{includes: Sunny}]\ndata:\n  - {id: ok, input: ok}\n"
                                     "  - {id: bad, input: bad}\n")
    result = run_cli(["run", "d.yaml", "--db", "x.db"], tmp_path, {"PYTHONPATH": f"{tmp_path}:{REPO}"}, fresh=True)
    assert "could not store" not in result.stderr
    rows = _stored(tmp_path / "x.db")
    assert rows.get("ok") == "ok" and "cannot be written as JSON" in rows.get("bad", ""), rows


def test_a_long_integer_past_a_lower_digit_limit_the_target_set_is_its_conversations_error(tmp_path: Path) -> None:
    # integers under 4,000 digits were taken as writable without a look: past a limit the target lowered (1,000) the
    # store could not write them and both conversations were lost with the run passing (exit 0)
    (tmp_path / "agent.py").write_text("import sys\n\ndef answer(input, **kw):\n    sys.set_int_max_str_digits(1000)\n"
                                       "    n = 10 ** 2000 if input == 'long' else 10 ** 500\n"
                                       "    return [{'role': 'assistant', 'content': 'Sunny', 'n': n}]\n")
    (tmp_path / "d.yaml").write_text("target: agent:answer\ngates: [{includes: Sunny}]\ndata:\n  - {id: ok, input: ok}\n"
                                     "  - {id: long, input: long}\n")
    result = run_cli(["run", "d.yaml", "--db", "x.db"], tmp_path)
    assert result.code == 4, result.stderr
    assert "could not store" not in result.stderr
    rows = _stored(tmp_path / "x.db")
    assert rows["ok"] == "ok"
    assert rows["long"].startswith("turn 0: response message 0 cannot be written as JSON (ValueError: Exceeds the limit")
