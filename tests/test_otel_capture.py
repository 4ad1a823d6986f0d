"""Capture (docs/otel.md): the spans a real instrumented agent emits during a turn, tied to its conversation and turn
under concurrency, give a plain-callable target its tool calls and model usage; ``spans: off`` turns it off.
Real PydanticAI and Strands agents over real HTTP to the loopback scripted model, run through the real CLI (Strands in
its own venv, tests/framework_venvs.py)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, CliResult, run_cli
from tests.framework_agents import framework_python
from tests.llm_server import LLMServer, scripted_weather

KEY = "sk-test-not-a-real-key-0123456789"


def run(tmp_path: Path, server: LLMServer, body: str, *args: str, env: dict[str, str] | None = None,
        python: Path | None = None) -> CliResult:
    path = tmp_path / "d.yaml"
    path.write_text(textwrap.dedent(body).lstrip("\n"))
    env = {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": KEY, "NO_PROXY": "127.0.0.1", **(env or {})}
    done = run_cli(["run", str(path), "--db", str(tmp_path / "e.db"), *args], REPO, env, python=python)
    return CliResult(done.code, done.stdout, done.stderr, tmp_path)


CITIES = ["London", "Paris", "Tokyo", "Brooklyn", "Atlantis"]


def calls(item: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for t in item["turns"] for m in t["output"] for c in m.get("tool_calls") or ()]


def test_a_callable_around_an_instrumented_agent_gets_its_tool_calls_and_usage_from_its_spans(
        llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = scripted_weather
    items = "\n".join(f"  - {{id: {c.lower()}, input: 'What is the weather in {c}?'}}" for c in CITIES)
    done = run(tmp_path, llm_server, "target: tests.otel_agents.pydantic_spans:ask\n"
                                     "gates: [{called_tool: get_weather}]\nscorers: [no_tool_errors]\n"
                                     f"data:\n{items}\n", "--json", "-", "--concurrency", "5")
    assert done.code == 0, done.stderr
    result = done.json
    by_id = {i["id"]: i for i in result["items"]}
    assert set(by_id) == {c.lower() for c in CITIES}
    for city in CITIES:  # under concurrency, each conversation got its own agent's calls and no one else's
        item = by_id[city.lower()]
        [call] = calls(item)
        assert call["function"]["name"] == "get_weather"
        assert f'"city": "{city}"' in call["function"]["arguments"]
        output = item["turns"][0]["output"]
        assert [m["role"] for m in output] == ["assistant", "tool", "assistant"]
        assert output[1]["observed"] is True and output[1]["tool_call_id"] == call["id"]
    assert '"rainy"' in by_id["london"]["turns"][0]["output"][1]["content"]
    atlantis = by_id["atlantis"]["turns"][0]["output"][1]
    assert atlantis["is_error"] is True and "no forecast for Atlantis" in atlantis["content"]
    assert by_id["atlantis"]["scores"]["no_tool_errors"] == 0.0
    assert by_id["london"]["scores"]["no_tool_errors"] == 1.0
    rows = done.db("e.db").execute("SELECT item_index, turn_index, model, prompt_tokens, completion_tokens FROM "
                                   "llm_calls WHERE purpose = 'target' ORDER BY item_index").fetchall()
    # two model calls a conversation (the tool call, then the answer), 10 + 10 tokens each as the scripted model says
    assert [tuple(r) for r in rows] == [(i, 0, "scripted", 10, 10) for i in range(len(CITIES)) for _ in range(2)]


def test_a_sync_callable_in_worker_threads_is_captured_too(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = scripted_weather
    items = "\n".join(f"  - {{id: {c.lower()}, input: 'What is the weather in {c}?'}}" for c in CITIES[:3])
    done = run(tmp_path, llm_server, "target: tests.otel_agents.pydantic_spans:ask_sync\n"
                                     "gates: [{called_tool: get_weather}]\n"
                                     f"data:\n{items}\n", "--json", "-", "--concurrency", "3")
    assert done.code == 0, done.stderr
    for item in done.json["items"]:
        [call] = calls(item)
        assert f'"city": "{item["id"].title()}"' in call["function"]["arguments"]


def test_spans_off_records_what_the_callable_returned_only(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = scripted_weather
    done = run(tmp_path, llm_server, """
        target: tests.otel_agents.pydantic_spans:ask
        target_options: {spans: off}
        gates: [{called_tool: get_weather}]
        data:
          - {id: london, input: 'What is the weather in London?'}
        """, "--json", "-")
    assert done.code == 1, done.stderr
    [item] = done.json["items"]
    assert [m["role"] for m in item["turns"][0]["output"]] == ["assistant"]
    assert not done.db("e.db").execute("SELECT * FROM llm_calls WHERE purpose = 'target'").fetchall()


def test_an_agents_sdk_agent_is_seen_through_the_openinference_instrumentor_evalcli_calls(
        llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = scripted_weather
    items = "\n".join(f"  - {{id: {c.lower()}, input: 'What is the weather in {c}?'}}" for c in CITIES[:3])
    body = ("target: tests.otel_agents.agents_openinference:ask\ntarget_options: {instrument: [openinference]}\n"
            f"gates: [{{called_tool: get_weather}}]\ndata:\n{items}\n")
    done = run(tmp_path, llm_server, body, "--json", "-", "--concurrency", "3",
               env={"OPENAI_AGENTS_DISABLE_TRACING": "0"})
    assert done.code == 0, done.stderr
    for item in done.json["items"]:
        [call] = calls(item)
        assert f'"city":"{item["id"].title()}"' in call["function"]["arguments"].replace(" ", "")
        tool = [m for m in item["turns"][0]["output"] if m["role"] == "tool"]
        assert len(tool) == 1 and '"condition"' in tool[0]["content"]
    rows = done.db("e.db").execute("SELECT model, prompt_tokens FROM llm_calls WHERE purpose = 'target'").fetchall()
    assert len(rows) == 6 and all(r["prompt_tokens"] == 10 for r in rows)


STRANDS_RUN = """
target: tests.otel_agents.strands_spans:ask
scorers: [no_tool_errors]
data:
  - id: london
    turns:
      - input: What is the weather in London?
        gates: [{called_tool: get_weather}, {tool_args: {name: get_weather, args: {city: London, day: today}}}]
  - id: paris
    turns:
      - input: What is the weather in Paris?
        gates: [{tool_args: {name: get_weather, args: {city: London}}}]
  - id: atlantis
    input: What is the weather in Atlantis?
  - id: chat
    turns:
      - input: Hello there
        gates: [{called_tool: get_weather}]
"""


@pytest.mark.parametrize("conventions", ["", "gen_ai_latest_experimental"], ids=["message-events", "latest"])
def test_a_strands_agent_behind_a_plain_function_is_recorded_from_strands_own_spans(
        conventions: str, llm_server: LLMServer, tmp_path: Path) -> None:
    """Strands' telemetry on, no adapter: its ``execute_tool`` spans give the tool calls (arguments and results from
    the per-message events by default, from ``gen_ai.tool.call.*`` under the latest conventions), its ``chat`` spans
    the usage; tool checks pass and fail on them as on an adapter's record."""
    python = framework_python("strands")
    llm_server.responder = scripted_weather
    done = run(tmp_path, llm_server, STRANDS_RUN, "--json", "-", "--concurrency", "4",
               env={"OTEL_SEMCONV_STABILITY_OPT_IN": conventions}, python=python)
    assert done.code == 1, done.stderr[-3000:]  # the two gates that must fail, and only those
    by_id = {i["id"]: i for i in done.json["items"]}
    failed = {i: sorted(g for turn in item["turns"] for g, o in turn["outcomes"]["gates"].items() if not o["passed"])
              for i, item in by_id.items()}
    assert failed == {"london": [], "paris": ["tool_args(get_weather, {city: London})"], "atlantis": [],
                      "chat": ["called_tool(get_weather)"]}, failed
    for city in ("london", "paris", "atlantis"):  # each conversation got its own agent's call, under concurrency
        [call] = calls(by_id[city])
        assert json.loads(call["function"]["arguments"]) == {"city": city.title(), "day": "today"}
        output = by_id[city]["turns"][0]["output"]
        assert [m["role"] for m in output] == ["assistant", "tool", "assistant"]
        assert output[1]["observed"] is True and output[1]["tool_call_id"] == call["id"]
    london = by_id["london"]["turns"][0]["output"]
    assert json.loads(london[1]["content"]) == {"city": "London", "day": "today", "condition": "rainy",
                                                "temperature_f": 54}  # the tool's text, not Strands' content blocks
    assert london[2]["content"] == "Today in London: rainy, 54°F."
    atlantis = by_id["atlantis"]["turns"][0]["output"][1]
    assert atlantis["is_error"] is True and "no forecast for 'Atlantis'" in atlantis["content"]
    assert {i: item["scores"]["no_tool_errors"] for i, item in by_id.items()} == {
        "london": 1.0, "paris": 1.0, "atlantis": 0.0, "chat": 1.0}
    assert calls(by_id["chat"]) == []
    rows = done.db("e.db").execute("SELECT item_index, model, prompt_tokens, completion_tokens FROM llm_calls "
                                   "WHERE purpose = 'target' ORDER BY item_index").fetchall()
    # the chat spans: two model calls for a forecast (the tool call, then the answer), one for the greeting
    assert [tuple(r) for r in rows] == [(i, "scripted", 10, 10) for i, n in enumerate([2, 2, 2, 1]) for _ in range(n)]


def test_a_langgraph_agent_is_seen_through_the_langchain_openinference_instrumentor(
        llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = scripted_weather
    items = "\n".join(f"  - {{id: {c.lower()}, input: 'What is the weather in {c}?'}}" for c in CITIES[:3])
    items += "\n  - {id: atlantis, input: 'What is the weather in Atlantis?'}"
    body = ("target: tests.otel_agents.langgraph_openinference:ask\ntarget_options: {instrument: [openinference]}\n"
            f"gates: [{{called_tool: get_weather}}]\nscorers: [no_tool_errors]\ndata:\n{items}\n")
    done = run(tmp_path, llm_server, body, "--json", "-", "--concurrency", "4")
    assert done.code == 0, done.stderr
    by_id = {i["id"]: i for i in done.json["items"]}
    for city in CITIES[:3]:
        item = by_id[city.lower()]
        [call] = calls(item)
        assert call["function"]["name"] == "get_weather"
        assert json.loads(call["function"]["arguments"])["city"] == city
        output = item["turns"][0]["output"]
        assert [m["role"] for m in output] == ["assistant", "tool", "assistant"]
        assert output[1]["observed"] is True and '"condition"' in output[1]["content"]
        assert item["scores"]["no_tool_errors"] == 1.0
    atlantis = [m for m in by_id["atlantis"]["turns"][0]["output"] if m["role"] == "tool"]
    assert len(atlantis) == 1 and "no forecast for Atlantis" in atlantis[0]["content"]
    assert atlantis[0]["is_error"] is True and by_id["atlantis"]["scores"]["no_tool_errors"] == 0.0
    rows = done.db("e.db").execute("SELECT item_index, model, prompt_tokens, completion_tokens FROM llm_calls "
                                   "WHERE purpose = 'target' ORDER BY item_index").fetchall()
    # two model calls a conversation (the tool call, then the answer), 10 + 10 tokens each as the scripted model says
    assert [tuple(r) for r in rows] == [(i, "scripted", 10, 10) for i in range(4) for _ in range(2)]
