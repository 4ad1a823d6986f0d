"""The ``crewai`` adapter through the real CLI (docs/targets/crewai.md), in a venv of its own (tests/framework_venvs.py:
crewai pins pydantic<2.13): CrewAI's own example shapes (an ``Agent`` run with ``kickoff``, the quick-start crew,
crewAI-examples' ``surprise_trip``), their ``LLM`` at the loopback scripted model. Threads (checked in the server's
request log), tool calls and errors by the name the model sees, usage, mocks, ``--hermetic``, tapes, a
per-conversation setup, and CrewAI's console output kept out of evalcli's."""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, SUBPROCESS_TIMEOUT, CliResult, cli_base_env
from tests.doc_blocks import read_page
from tests.framework_agents import KEY, mocks_hermetic_and_tapes
from tests.framework_venvs import venv_or_skip
from tests.llm_server import LLMServer, Reply, Request, scripted_weather, text, tool_call

APPS = "tests.app_agents.crewai_apps"
SEARCH = "search_the_internet"
"""The search tool as the model sees it (CrewAI's name for ``@tool("Search the internet")``)."""
QUIET = {"CREWAI_DISABLE_TELEMETRY": "true", "CREWAI_DISABLE_TRACKING": "true", "CREWAI_TRACING_ENABLED": "false",
         "OTEL_SDK_DISABLED": "true", "CREWAI_DISABLE_VERSION_CHECK": "true"}
pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def python() -> Path:
    return venv_or_skip("crewai")


def said(message: dict[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


def model(request: Request) -> Reply:
    """CrewAI's agents, from the request alone: a search for the weather, activities or restaurants (the result
    repeated), a report from a task's context, an itinerary as JSON, a code recalled from this request's history."""
    messages = request.messages
    last = messages[-1]
    if last["role"] == "tool":
        return text(f"Found: {said(last)}")
    task = said(last)
    asked = re.search(r"Current Task: (.*)", task)
    ask = asked.group(1) if asked else task
    found = re.search(r"(weather in [A-Za-z ]+|activities in \w+|restaurants in \w+)", ask)
    research = re.search(r"research about (.*)\.", ask)
    if request.body.get("tools") and (found or research):
        query = found.group(1) if found else research.group(1) if research else ask
        return tool_call(SEARCH, {"query": query}, f"call{len(messages)}")
    if "Compile the itinerary" in ask:
        return text(json.dumps({"name": "Lisbon Loop", "day_plans": ["tram 28", "Time Out Market"], "hotel": "Baixa"}))
    if "write a report" in ask:
        context = task.split("This is the context you're working with:")[-1].strip()
        return text(f"Report: {context}")
    codes = re.findall(r"code (K\d+)", " ".join(said(m) for m in messages if m["role"] == "user"))
    if "Remember" in ask:
        return text(f"Noted {codes[-1]}.")
    return text(f"The code is {' and '.join(codes) or 'unknown'}.")


def run(python: Path, tmp_path: Path, server: LLMServer, body: str, *args: str) -> CliResult:
    path = tmp_path / "d.yaml"
    path.write_text(textwrap.dedent(body).lstrip("\n"))
    env = {**cli_base_env(), **QUIET, "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": KEY, "NO_PROXY": "127.0.0.1",
           "CREWAI_STORAGE_DIR": str(tmp_path / "crewai"), "EVALCLI_TEST_RECORD": str(tmp_path / "record.jsonl"),
           "PYTHONPATH": f"{REPO}:{tmp_path}"}
    done = subprocess.run([str(python), "-m", "evalcli", "run", str(path), "--db", str(tmp_path / "e.db"), "--json",
                           "-", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    return CliResult(done.returncode, done.stdout, done.stderr, REPO)


def live_calls(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "record.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def tool_messages(item: dict[str, Any], turn: int = 0) -> list[dict[str, Any]]:
    return [m for m in item["turns"][turn]["output"] if m["role"] == "tool"]


def test_agent_threads_tool_calls_errors_and_usage(python: Path, llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = model
    done = run(python, tmp_path, llm_server, f"""
        target: {APPS}:researcher
        concurrency: 4
        data:
          - id: sf
            turns:
              - {{input: 'weather in San Francisco?', gates: [{{includes: partly cloudy}}, {{called_tool: {SEARCH}}}]}}
              - input: weather in Atlantis
          - id: k1
            turns:
              - input: Remember the code K1.
              - {{input: 'What is the code?', gates: [{{includes: The code is K1.}}]}}
          - id: k2
            turns:
              - input: Remember the code K2.
              - {{input: 'What is the code?', gates: [{{includes: The code is K2.}}]}}
    """)
    assert done.code == 0, done.stderr[-3000:]  # done.json parsed the whole stdout: no CrewAI panel reached it
    items = {item["id"]: item for item in done.json["items"]}
    [found] = tool_messages(items["sf"])
    assert found["name"] == SEARCH and "partly cloudy" in found["content"] and not found.get("is_error")
    calls = [c for m in items["sf"]["turns"][0]["output"] for c in m.get("tool_calls") or ()]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"query": "weather in San Francisco"}]
    [failed] = tool_messages(items["sf"], 1)
    assert failed["is_error"] is True and "nothing found for weather in Atlantis" in failed["content"]
    for request in llm_server.requests:  # each conversation's requests hold its own code only
        history = json.dumps(request.messages)
        assert not ("K1" in history and "K2" in history), history[-500:]
    assert len({item["thread_id"] for item in items.values()}) == 3
    target_usage = done.json["usage"]["purposes"]["target"]
    assert target_usage["calls"] == len(llm_server.requests) and target_usage["prompt_tokens"] == 11 * target_usage["calls"]
    assert target_usage["cost"] > 0  # gpt-4o-mini, priced from litellm's table
    assert "Tool Execution" not in done.stderr and "╭" not in done.stdout


def test_crews_take_their_input_from_the_user_message(python: Path, llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = model
    quick = run(python, tmp_path, llm_server, f"""
        target: {APPS}:crew
        target_options: {{inputs_from: topic}}
        gates: [{{called_tool: {SEARCH}}}, {{includes: 'Report: Found: San Francisco'}}]
        data: [{{id: sf, input: weather in San Francisco}}]
    """)
    assert quick.code == 0, quick.stderr[-3000:]
    [item] = quick.json["items"]
    output = item["turns"][0]["output"]
    assert [m["role"] for m in output] == ["assistant", "tool", "assistant", "assistant"]
    assert output[-1]["content"].startswith("Report: Found: San Francisco")
    assert quick.json["usage"]["purposes"]["target"]["calls"] == len(llm_server.requests) == 3
    trip = run(python, tmp_path, llm_server, f"""
        target: {APPS}:trip_crew
        target_options:
          inputs_from: destination
          inputs: {{origin: NYC, age: 31, hotel_location: Baixa, flight_information: TP1, trip_duration: 3 days}}
        gates: [{{called_tool: {SEARCH}}}]
        data: [{{id: lisbon, tools: {{{SEARCH}: {{returns: Mocked list of places.}}}}, input: Lisbon}}]
    """)
    assert trip.code == 0, trip.stderr[-3000:]
    [item] = trip.json["items"]
    assert item["turns"][0]["structured"] == {"name": "Lisbon Loop", "day_plans": ["tram 28", "Time Out Market"],
                                              "hotel": "Baixa"}
    results = tool_messages(item)
    assert len(results) == 2 and {m["source"] for m in results} == {"mock"}  # both agents' calls answered by the mock
    assert [c["query"] for c in live_calls(tmp_path)] == ["weather in San Francisco"]  # the quick-start crew's only


def test_mocks_hermetic_and_tapes(python: Path, llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = model
    mocks_hermetic_and_tapes(lambda body, *args: run(python, tmp_path, llm_server, body, *args), tmp_path,
                             target=f"{APPS}:researcher", tool=SEARCH, ask="weather in San Francisco?",
                             live_answer="partly cloudy")


def test_setup_gives_each_conversation_its_history_and_a_crew_needs_inputs_from(python: Path, llm_server: LLMServer,
                                                                                tmp_path: Path) -> None:
    llm_server.responder = model
    (tmp_path / "crew_setup.py").write_text(textwrap.dedent("""
        def setup(info):
            return {"history": [{"role": "user", "content": f"Remember the code {info.metadata['code']}."},
                                {"role": "assistant", "content": "Noted."}]}
    """))
    done = run(python, tmp_path, llm_server, f"""
        target: {APPS}:researcher
        target_options: {{setup: crew_setup:setup}}
        data:
          - {{id: a, metadata: {{code: K7}}, turns: [{{input: 'What is the code?', gates: [{{includes: The code is K7.}}]}}]}}
          - {{id: b, metadata: {{code: K8}}, turns: [{{input: 'What is the code?', gates: [{{includes: The code is K8.}}]}}]}}
    """)
    assert done.code == 0, done.stderr[-3000:]
    bad = run(python, tmp_path, llm_server, f"""
        target: {APPS}:crew
        data: [{{id: a, input: weather}}]
    """)
    assert bad.code == 2 and "a Crew needs 'inputs_from'" in bad.stderr and "topic" in bad.stderr, bad.stderr[-2000:]


@pytest.mark.parametrize("name", ["crewai_weather.yaml", "crewai_crew.yaml"])
def test_the_docs_examples_run(name: str, python: Path, llm_server: LLMServer, tmp_path: Path) -> None:
    """docs/targets/crewai.md's datasets, run against the examples' scripted model: every gate passes."""
    [block] = [b for b in read_page(REPO / "docs/targets/crewai.md").blocks if b.file == name]
    llm_server.responder = scripted_weather
    done = run(python, tmp_path, llm_server, block.text)
    assert done.code == 0, done.stdout[-3000:] + done.stderr[-3000:]
    items = {item["id"]: item for item in done.json["items"]}
    assert all(item["status"] == "ok" and set(item["gate_scores"].values()) == {1.0} for item in items.values()), items
    if "unknown-city" in items:
        [failed] = tool_messages(items["unknown-city"])
        assert failed["is_error"] is True and failed["source"] == "mock" and "Atlantis" in failed["content"]
