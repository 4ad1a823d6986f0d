"""Adversarial checks of the ``crewai`` adapter through the real CLI (docs/targets/crewai.md), in the crewai venv
(tests/framework_venvs.py), against the loopback scripted model (tests/llm_server.py)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.framework_venvs import venv_or_skip
from tests.llm_server import LLMServer, Reply, Request, text, tool_call
from tests.test_adapter_crewai import run, said

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def python() -> Path:
    return venv_or_skip("crewai")

APP = '''
import asyncio, os
from crewai import LLM, Agent, Crew, Process, Task
from crewai.tools import tool
from tests.app_agents import KEY, URL, record

@tool("lookup")
def lookup(query: str) -> str:
    """Look a query up."""
    record(event="live", tool="lookup", query=query)
    if "boom" in query:
        raise RuntimeError("lookup exploded")
    return f"found {query}"

@tool("alookup")
async def alookup(query: str) -> str:
    """Look a query up, asynchronously."""
    await asyncio.sleep(0)
    record(event="live", tool="alookup", query=query)
    return f"async found {query}"

llm = LLM(model="openai/gpt-4o-mini", base_url=URL, api_key="sk-secret-in-llm-config-9999", max_retries=0)
agent = Agent(role="Helper", goal="Answer", backstory="You help.", tools=[lookup], llm=llm)
aagent = Agent(role="Helper", goal="Answer", backstory="You help.", tools=[alookup], llm=llm)
plain_crew = Crew(agents=[agent], tasks=[Task(description="Answer the question.", expected_output="An answer",
                                              agent=agent)])
crew = Crew(agents=[agent], tasks=[Task(description="Answer: {question}", expected_output="An answer", agent=agent)])
two_inputs = Crew(agents=[agent], tasks=[Task(description="Answer {question} for {city}", expected_output="An answer",
                                              agent=agent)])
def steps(step):
    record(event="step")
cb_crew = Crew(agents=[agent], tasks=[Task(description="Answer: {question}", expected_output="An answer",
                                           agent=agent)], step_callback=steps, cache=True)
worker = Agent(role="Worker", goal="Do the work", backstory="You work.", tools=[lookup], llm=llm,
               allow_delegation=False)
managed = Crew(agents=[worker], tasks=[Task(description="Answer: {question}", expected_output="An answer")],
               process=Process.hierarchical, manager_llm=LLM(model="openai/gpt-4o-mini", base_url=URL, api_key=KEY,
                                                             max_retries=0))
'''


def model(request: Request) -> Reply:
    """Call the one tool once with the user's question, then answer with what it returned."""
    messages = request.messages
    last = messages[-1]
    if last["role"] == "tool":
        return text(f"Result: {said(last)}")
    tools = [t["function"]["name"] for t in request.body.get("tools") or ()]
    asked = said([m for m in messages if m["role"] == "user"][-1])
    if tools:
        return tool_call(tools[0], {"query": asked[-40:]}, f"c{len(messages)}")
    return text(f"Plain: {asked[-40:]}")


def app_run(tmp_path: Path, server: LLMServer, py: Path, body: str, *args: str) -> Any:
    (tmp_path / "advapp.py").write_text(APP)
    server.responder = model
    return run(py, tmp_path, server, body, *args)


def test_inputs_from_must_be_an_input_even_of_a_crew_naming_none(python: Path, llm_server: LLMServer,
                                                                 tmp_path: Path) -> None:
    """A crew whose tasks name no ``{input}`` took any ``inputs_from`` and ran every conversation without the user
    message (the model never saw it): now it is refused before anything runs (exit 2), saying what to write."""
    done = app_run(tmp_path, llm_server, python, """
        target: advapp:plain_crew
        target_options: {inputs_from: question}
        gates: [{excludes: nothing}]
        data: [{id: a, input: what is the capital of Peru}]
    """)
    assert done.code == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "'inputs_from: question' is not an input of the crew" in done.stderr
    assert "write {question} in a task's description" in done.stderr and "Traceback" not in done.stderr
    assert llm_server.requests == []


def test_concurrent_first_turns_do_not_race_openais_lazy_models(python: Path, llm_server: LLMServer,
                                                                tmp_path: Path) -> None:
    """CrewAI's OpenAI provider parses each reply with the openai SDK's models, which pydantic builds lazily on first
    use; turns run in threads, and 16 first replies arriving together made some conversations fail with
    ``PydanticUserError: ... BaseModel cannot be instantiated directly``. Every conversation now plays, each on its
    own history (the request log)."""
    (tmp_path / "advapp.py").write_text(APP)
    llm_server.responder = lambda request: dataclasses.replace(model(request), delay=0.5)
    items = "\n".join(f"  - {{id: i{i}, input: 'code K{i}X'}}" for i in range(16))
    for attempt in range(3):  # the race is a matter of timing: three runs, each a fresh process
        done = run(python, tmp_path, llm_server, f"target: advapp:agent\nconcurrency: 16\n"
                                                 f"gates: [{{excludes: nothing}}]\ndata:\n{items}\n")
        errors = [item["error"] for item in done.json["items"] if item["status"] != "ok"]
        assert errors == [] and done.code == 0, (attempt, errors[:2])
    for request in llm_server.requests:
        assert len(set(re.findall(r"K\d+X", json.dumps(request.messages)))) == 1
