"""The ``llama_index`` adapter through the real CLI (docs/targets/llama-index.md), in a venv of its own
(tests/framework_venvs.py: llama-index-llms-openai pins openai<3): agents shaped like run-llama's
``agent_workflow_basic`` (a streaming ``FunctionAgent``, the same agent in an ``AgentWorkflow``) and a ``ReActAgent``,
their ``OpenAILike`` LLM at the loopback scripted model. Threads (checked in the server's request log), tool calls and
errors, usage, mocks, ``--hermetic``, tapes and a per-conversation setup."""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, SUBPROCESS_TIMEOUT, CliResult, cli_base_env
from tests.framework_agents import KEY, mocks_hermetic_and_tapes
from tests.framework_venvs import venv_or_skip
from tests.llm_server import LLMServer, Reply, Request, text, tool_call

APPS = "tests.app_agents.llama_index_apps"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def python() -> Path:
    return venv_or_skip("llama-index")


def said(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def answer_for(task: str, history: str) -> str:
    codes = re.findall(r"code (K\d+)", history)
    if "Remember" in task:
        return f"Noted {codes[-1]}."
    return f"The code is {' and '.join(codes) or 'unknown'}."


def model(request: Request) -> Reply:
    """A FunctionAgent's model (tools in the request) or a ReActAgent's (the ReAct format in text), from the request
    alone: a search for a question about the weather, the result repeated, a code recalled from this request's own
    history."""
    messages = request.messages
    users = [said(m) for m in messages if m["role"] == "user"]
    history = " ".join(users)
    last = messages[-1]
    if request.body.get("tools"):
        if last["role"] == "tool":
            return text(f"Found: {said(last)}")
        if "weather" in users[-1]:
            return tool_call("search_web", {"query": users[-1]}, f"call{len(messages)}")
        return text(answer_for(users[-1], history))
    observation = re.findall(r"Observation: (.*)", said(last)) if last["role"] == "user" else []
    task = [u for u in users if not u.startswith("Observation")][-1]
    if observation:
        return text(f"Thought: I can answer without using any more tools.\nAnswer: Found: {observation[-1]}")
    if "weather" in task:
        return text(f'Thought: I need to search.\nAction: search_web\nAction Input: {{"query": "{task}"}}')
    return text(f"Thought: I can answer without using any more tools.\nAnswer: {answer_for(task, history)}")


def run(python: Path, tmp_path: Path, server: LLMServer, body: str, *args: str) -> CliResult:
    path = tmp_path / "d.yaml"
    path.write_text(textwrap.dedent(body).lstrip("\n"))
    env = {**cli_base_env(), "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": KEY, "NO_PROXY": "127.0.0.1",
           "EVALCLI_TEST_RECORD": str(tmp_path / "record.jsonl"), "PYTHONPATH": f"{REPO}:{tmp_path}"}
    done = subprocess.run([str(python), "-m", "evalcli", "run", str(path), "--db", str(tmp_path / "e.db"), "--json",
                           "-", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    return CliResult(done.returncode, done.stdout, done.stderr, REPO)


def live_calls(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "record.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def tool_messages(item: dict[str, Any], turn: int = 0) -> list[dict[str, Any]]:
    return [m for m in item["turns"][turn]["output"] if m["role"] == "tool"]


@pytest.mark.parametrize("target", ["agent", "workflow", "react_agent"])
def test_threads_tool_calls_errors_and_usage(target: str, python: Path, llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = model
    done = run(python, tmp_path, llm_server, f"""
        target: {APPS}:{target}
        concurrency: 4
        data:
          - id: sf
            turns:
              - {{input: 'weather in San Francisco?', gates: [{{includes: partly cloudy}}, {{called_tool: search_web}}]}}
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
    assert done.code == 0, done.stderr[-3000:]
    items = {item["id"]: item for item in done.json["items"]}
    [found] = tool_messages(items["sf"])
    assert found["name"] == "search_web" and "partly cloudy" in found["content"] and not found.get("is_error")
    calls = [c for m in items["sf"]["turns"][0]["output"] for c in m.get("tool_calls") or ()]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"query": "weather in San Francisco?"}]
    [failed] = tool_messages(items["sf"], 1)
    assert failed["is_error"] is True and "nothing found for weather in Atlantis" in failed["content"]
    for request in llm_server.requests:  # each conversation's requests hold its own code only
        history = json.dumps(request.messages)
        assert not ("K1" in history and "K2" in history), history[-500:]
    assert len({item["thread_id"] for item in items.values()}) == 3
    target_usage = done.json["usage"]["purposes"]["target"]
    assert target_usage["calls"] == len(llm_server.requests) and target_usage["prompt_tokens"] == 11 * target_usage["calls"]
    assert target_usage["cost"] > 0  # gpt-4o-mini, priced from litellm's table


def test_mocks_hermetic_and_tapes(python: Path, llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = model
    mocks_hermetic_and_tapes(lambda body, *args: run(python, tmp_path, llm_server, body, *args), tmp_path,
                             target=f"{APPS}:agent", tool="search_web", ask="weather in San Francisco?",
                             live_answer="partly cloudy")


def test_setup_and_yaml_give_each_conversation_its_own_chat_history(python: Path, llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = model
    (tmp_path / "li_setup.py").write_text(textwrap.dedent("""
        from llama_index.core.llms import ChatMessage


        def setup(info):
            return {"chat_history": [ChatMessage(role="user", content=f"Remember the code {info.metadata['code']}.")]}
    """))
    done = run(python, tmp_path, llm_server, f"""
        target: {APPS}:agent
        target_options: {{setup: li_setup:setup}}
        data:
          - {{id: a, metadata: {{code: K7}}, turns: [{{input: 'What is the code?', gates: [{{includes: The code is K7.}}]}}]}}
          - {{id: b, metadata: {{code: K8}}, turns: [{{input: 'What is the code?', gates: [{{includes: The code is K8.}}]}}]}}
    """)
    assert done.code == 0, done.stderr[-3000:]
    from_yaml = run(python, tmp_path, llm_server, f"""
        target: {APPS}:workflow
        gates: [{{includes: The code is K9.}}]
        data:
          - id: c
            target_options: {{chat_history: [{{role: user, content: Remember the code K9.}}]}}
            turns: [{{input: 'What is the code?'}}, {{input: 'And the code again?'}}]
    """)
    assert from_yaml.code == 0, from_yaml.stderr[-3000:]
    [item] = from_yaml.json["items"]
    assert [t["output"][-1]["content"] for t in item["turns"]] == ["The code is K9.", "The code is K9."]
