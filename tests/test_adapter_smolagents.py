"""The ``smolagents`` adapter through the real CLI (docs/targets/smolagents.md): agents shaped like smolagents' own
``examples/multiple_tools.py`` (a ``CodeAgent`` streaming its output, the same tools in a ``ToolCallingAgent``), their
``OpenAIServerModel`` at the loopback scripted model. Threads (checked in the server's request log), tool calls and
errors, usage, mocks in the CodeAgent's executor thread, ``--hermetic``, tapes and a per-conversation setup."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

from tests.conftest import REPO, CliResult, run_cli
from tests.framework_agents import KEY, mocks_hermetic_and_tapes
from tests.llm_server import LLMServer, Reply, Request, text, tool_call

APPS = "tests.app_agents.smolagents_apps"


def said(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def latest(request: Request) -> str:
    """What the user said since the latest task began (smolagents merges a turn's task into the observation before
    it: "Observation: ... New task: ...")."""
    history = "\n".join(said(m) for m in request.messages if m["role"] == "user")
    return history.rsplit("New task:", 1)[-1].strip()


def task_of(request: Request) -> str:
    return re.split(r"\n(?:Observation:|Call id|Execution logs|Error)", latest(request))[0]


def observed(request: Request) -> str | None:
    """The observation that followed the latest task (a tool's result or error), if any."""
    found = re.search(r"\n((?:Observation:|Call id|Execution logs|Error)[\s\S]*)$", latest(request))
    return found.group(1) if found else None


def model(request: Request) -> Reply:
    """Plays both agents from the request alone: the weather of a city the task names, a currency conversion, or a
    recalled code ('Remember the code K7.' ... 'What is the code?', answered from this request's own history)."""
    task = task_of(request)
    seen = observed(request)
    history = " ".join(said(m) for m in request.messages if m["role"] == "user")
    codes = re.findall(r"code (K\d+)", history)
    calling = bool(request.body.get("tools"))
    if "code" in task:
        answer = f"Noted {codes[-1]}." if task.rstrip().endswith(".") and "Remember" in task else \
            f"The code is {' and '.join(codes)}."
        return tool_call("final_answer", {"answer": answer}, "fa") if calling else \
            text(f"Thought: answer\n<code>\nfinal_answer({answer!r})\n</code>")
    if seen is not None:
        answer = seen.split("Observation:")[-1].strip()[:200]
        return tool_call("final_answer", {"answer": answer}, "fa") if calling else \
            text("Thought: done\n<code>\nfinal_answer(result)\n</code>")
    if "weather" in task:
        city = re.search(r"weather in (\w[\w ]*\w)\?", task)
        arguments = {"location": city.group(1) if city else "nowhere"}
        return tool_call("get_weather", arguments, f"w{len(request.messages)}") if calling else \
            text(f"Thought: weather\n<code>\nresult = get_weather(location={arguments['location']!r})\n"
                 "print(result)\n</code>")
    return text("Thought: convert\n<code>\nresult = convert_currency(amount=5000, from_currency='USD', "
                "to_currency='EUR')\nprint(result)\n</code>")


def run(tmp_path: Path, server: LLMServer, body: str, *args: str) -> CliResult:
    path = tmp_path / "d.yaml"
    path.write_text(textwrap.dedent(body).lstrip("\n"))
    return run_cli(["run", str(path), "--db", str(tmp_path / "e.db"), "--json", "-", *args], REPO,
                   {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": KEY, "NO_PROXY": "127.0.0.1",
                    "EVALCLI_TEST_RECORD": str(tmp_path / "record.jsonl")})


def live_calls(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "record.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def tool_messages(item: dict[str, Any], turn: int = 0) -> list[dict[str, Any]]:
    return [m for m in item["turns"][turn]["output"] if m["role"] == "tool"]


def test_tool_calling_agent_threads_tool_calls_errors_and_usage(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = model
    done = run(tmp_path, llm_server, f"""
        target: {APPS}:calling_agent
        concurrency: 4
        data:
          - id: paris
            turns:
              - input: What is the weather in Paris?
                gates: [{{includes: rainy}}, {{called_tool: get_weather}}]
              - input: What is the weather in Atlantis?
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
    [paris] = tool_messages(items["paris"])
    assert paris["name"] == "get_weather" and "rainy" in paris["content"] and not paris.get("is_error")
    calls = [c for m in items["paris"]["turns"][0]["output"] for c in m.get("tool_calls") or ()]
    assert [(c["id"], json.loads(c["function"]["arguments"])) for c in calls] == [("w2", {"location": "Paris"})]
    [atlantis] = tool_messages(items["paris"], 1)
    assert atlantis["is_error"] is True and "no weather for Atlantis" in atlantis["content"]
    # each conversation's requests hold its own code only: no shared memory between threads
    for request in llm_server.requests:
        history = " ".join(said(m) for m in request.messages)
        assert not ("K1" in history and "K2" in history), history[-500:]
    assert len({item["thread_id"] for item in items.values()}) == 3
    target = done.json["usage"]["purposes"]["target"]
    assert target["calls"] == len(llm_server.requests) and target["prompt_tokens"] == 11 * target["calls"]
    assert target["cost"] > 0  # gpt-4o-mini, priced from litellm's table


def test_code_agent_tools_called_by_its_code_are_recorded_and_mocked(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = model
    done = run(tmp_path, llm_server, f"""
        target: {APPS}:code_agent
        data:
          - id: live
            turns: [{{input: Convert 5000 dollars to Euros, gates: [{{includes: 4500.0 EUR}}, {{called_tool: convert_currency}}]}}]
          - id: mocked
            tools: {{convert_currency: {{returns: 5000 USD is 1 EUR today.}}}}
            turns: [{{input: Convert 5000 dollars to Euros, gates: [{{includes: 1 EUR today}}]}}]
          - id: failing
            turns: [{{input: 'What is the weather in Atlantis?', gates: [{{called_tool: get_weather}}]}}]
    """)
    assert done.code == 0, done.stderr[-3000:]
    items = {item["id"]: item for item in done.json["items"]}
    live = items["live"]["turns"][0]["output"]
    [call] = live[0]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"amount": 5000, "from_currency": "USD", "to_currency": "EUR"}
    assert live[1]["content"] == "5000 USD is equal to 4500.0 EUR."
    [mocked] = tool_messages(items["mocked"])
    assert mocked["source"] == "mock" and mocked["content"] == "5000 USD is 1 EUR today."
    [failed] = tool_messages(items["failing"])
    assert failed["is_error"] is True and "no weather for Atlantis" in failed["content"]
    assert sorted(c["tool"] for c in live_calls(tmp_path)) == ["convert_currency", "get_weather"]  # the mock ran nothing


def test_mocks_hermetic_and_tapes_in_the_code_agents_executor(llm_server: LLMServer, tmp_path: Path) -> None:
    """The code agent's tools run in its executor thread: mocks, ``--hermetic`` and tapes hold there too."""
    llm_server.responder = model
    mocks_hermetic_and_tapes(lambda body, *args: run(tmp_path, llm_server, body, *args), tmp_path,
                             target=f"{APPS}:code_agent", tool="convert_currency", ask="Convert 5000 dollars to Euros",
                             live_answer="4500.0 EUR", mocked_error=False)


def test_setup_gives_each_conversation_its_own_additional_args(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = model
    (tmp_path / "smol_setup.py").write_text("def setup(info):\n    return {'additional_args': {'user': info.item_id}}\n")
    done = run(tmp_path, llm_server, f"""
        target: {APPS}:calling_agent
        target_options: {{setup: smol_setup:setup}}
        gates: [used_no_tools]
        data:
          - {{id: ann, inputs: [Remember the code K5., 'What is the code?']}}
          - {{id: bob, inputs: [Remember the code K6., 'What is the code?']}}
    """)
    assert done.code == 0, done.stderr[-3000:]
    for who, code in (("ann", "K5"), ("bob", "K6")):
        asked = [r for r in llm_server.requests if f"'user': '{who}'" in json.dumps(r.messages)]
        assert asked and all(code in json.dumps(r.messages) for r in asked)
        assert not any(f"'user': '{who}'" in json.dumps(r.messages) for r in llm_server.requests if r not in asked)
