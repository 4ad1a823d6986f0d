"""A hierarchical CrewAI crew's delegation through the real CLI (docs/targets/crewai.md, "Delegation"), in the crewai
venv (tests/framework_venvs.py), against the loopback scripted model (tests/llm_server.py): the manager's "Delegate
work to coworker" is a handoff between the crew's own agents, recorded as one and allowed under ``--hermetic``; the
coworker's own tools stay under the conversation's tool plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.framework_venvs import venv_or_skip
from tests.llm_server import LLMServer, Reply, Request, text, tool_call
from tests.test_adapter_crewai import live_calls, run, said

pytestmark = pytest.mark.slow

APP = '''
from crewai import LLM, Agent, Crew, Process, Task
from crewai.tools import tool
from tests.app_agents import KEY, URL, record

@tool("lookup")
def lookup(query: str) -> str:
    """Look a query up."""
    record(event="live", tool="lookup", query=query)
    return f"found {query}"

llm = LLM(model="openai/gpt-4o-mini", base_url=URL, api_key=KEY, max_retries=0)
worker = Agent(role="Worker", goal="Do the work", backstory="You work.", tools=[lookup], llm=llm,
               allow_delegation=False)
managed = Crew(agents=[worker], tasks=[Task(description="Answer: {question}", expected_output="An answer")],
               process=Process.hierarchical, manager_llm=llm)
'''
DELEGATE = "delegate_work_to_coworker"


@pytest.fixture(scope="session")
def python() -> Path:
    return venv_or_skip("crewai")


def model(request: Request) -> Reply:
    """The manager delegates the task to the Worker, then answers with what it said; the Worker looks it up."""
    messages = request.messages
    tools = [t["function"]["name"] for t in request.body.get("tools") or ()]
    if messages[-1]["role"] == "tool":
        return text(f"{'Manager' if DELEGATE in tools else 'Worker'}: {said(messages[-1])}")
    if DELEGATE in tools:
        return tool_call(DELEGATE, {"task": "Look up the capital of Peru", "context": "The user asks.",
                                    "coworker": "Worker"}, "d1")
    return tool_call("lookup", {"query": "capital of Peru"}, "l1") if "lookup" in tools else text("no tools")


def delegation(tmp_path: Path, server: LLMServer, python: Path, *args: str) -> Any:
    (tmp_path / "hier.py").write_text(APP)
    server.responder = model
    return run(python, tmp_path, server, """
        target: hier:managed
        target_options: {inputs_from: question}
        tools: {lookup: {returns: Lima (mocked)}}
        gates: [{includes: "Manager: Worker: Lima (mocked)"}]
        data: [{id: peru, input: "What is the capital of Peru?"}]
    """, *args)


def test_a_managers_delegation_is_a_handoff_allowed_under_hermetic(python: Path, llm_server: LLMServer,
                                                                   tmp_path: Path) -> None:
    done = delegation(tmp_path, llm_server, python, "--hermetic")
    assert done.code == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [item] = done.json["items"]
    output = item["turns"][0]["output"]
    [handed] = [m for m in output if m["role"] == "tool" and m["name"] == DELEGATE]
    assert handed["handoff"] is True and "source" not in handed and "Worker: Lima (mocked)" in handed["content"]
    [looked] = [m for m in output if m["role"] == "tool" and m["name"] == "lookup"]
    assert looked["source"] == "mock" and looked["observed"] is True  # the Worker's call, seen by the plan
    calls = [c["function"] for m in output for c in m.get("tool_calls") or ()]
    assert json.loads(calls[0]["arguments"])["coworker"] == "Worker"
    assert live_calls(tmp_path) == []


def test_the_coworkers_own_tools_stay_under_hermetic(python: Path, llm_server: LLMServer, tmp_path: Path) -> None:
    (tmp_path / "hier.py").write_text(APP)
    llm_server.responder = model
    done = run(python, tmp_path, llm_server, """
        target: hier:managed
        target_options: {inputs_from: question}
        gates: [{excludes: nothing}]
        data: [{id: peru, input: "What is the capital of Peru?"}]
    """, "--hermetic")
    assert done.code == 4, done.stdout[-3000:] + done.stderr[-3000:]
    error = done.json["items"][0]["error"]
    assert "--hermetic: the tool call lookup(" in error and DELEGATE not in error.split("lookup(")[0]
    assert live_calls(tmp_path) == []
