"""Framework agents tried as a user who already has one would (docs/targets/): each framework's own documented
agent shape, run through the real CLI against the loopback scripted model. What broke: a litellm-backed agent (ADK's
``LiteLlm``) whose model could not be reached named ``https://api.openai.com/v1`` as the URL it tried, whatever its
``api_base``; and targets of the wrong kind (a framework's agent class, a function that builds the agent, an
uncompiled ``StateGraph``, an ADK ``Runner``) passed validation or were told to point at "PydanticAI, the OpenAI
Agents SDK or LangGraph" only. Each test failed before its fix."""

from __future__ import annotations

import json
import re
import socket
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO, CliResult, run_cli
from tests.framework_agents import needs
from tests.llm_server import LLMServer, Reply, Request, text, tool_call

ADK_AGENT = '''
import os
from google.adk.agents import Agent
from google.adk.models.lite_llm import LiteLlm


def lookup(code: str) -> dict:
    """Look a code up.

    Args:
        code: the code.
    """
    return {"status": f"code {code} is valid"}


# ADK's quick-start agent, its model behind an OpenAI-compatible server through LiteLlm
root_agent = Agent(name="assistant", model=LiteLlm(model="openai/gpt-4o-mini", api_base=os.environ["MODEL_URL"],
                                                   api_key="sk-offline", num_retries=0),
                   instruction="Be concise.", tools=[lookup])
'''

ONE_ITEM = "gates: [no_tool_errors]\ndata:\n  - id: one\n    input: Please look up K1000.\n"


def run(tmp_path: Path, module: str, source: str, target: str, *args: str, command: str = "run",
        env: dict[str, str] | None = None) -> CliResult:
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
    (tmp_path / "d.yaml").write_text(f"target: {target}\n" + ONE_ITEM)
    extra = ("--db", str(tmp_path / "e.db"), "--json", "-") if command == "run" else ()
    done = run_cli([command, "d.yaml", *extra, *args], tmp_path, {"NO_PROXY": "127.0.0.1", **(env or {})})
    return CliResult(done.code, done.stdout, done.stderr, tmp_path)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@needs("google.adk")
def test_an_adk_agent_whose_local_model_is_down_names_the_url_it_tried(tmp_path: Path) -> None:
    port = closed_port()
    done = run(tmp_path, "adk_app", ADK_AGENT, "adk_app:root_agent", env={"MODEL_URL": f"http://127.0.0.1:{port}/v1"})
    assert done.code == 4, done.stderr
    error = done.json["items"][0]["error"]
    # before: "... (requesting https://api.openai.com/v1)": litellm's placeholder request, as if OPENAI_BASE_URL were unset
    assert "api.openai.com" not in error, error
    assert "Connection error." in error, error  # ADK re-raises litellm's error without the request it came from


LITELLM_APP = '''
import os
import litellm


async def ask(input: str) -> str:
    """An app calling its model through litellm itself: a callable target."""
    reply = await litellm.acompletion(model="openai/gpt-4o-mini", api_base=os.environ["MODEL_URL"], api_key="sk-offline",
                                      messages=[{"role": "user", "content": input}], num_retries=0, max_retries=0)
    return reply.choices[0].message.content
'''


def test_a_litellm_app_whose_local_model_is_down_names_the_url_it_really_tried(tmp_path: Path) -> None:
    port = closed_port()
    done = run(tmp_path, "app", LITELLM_APP, "app:ask", env={"MODEL_URL": f"http://127.0.0.1:{port}/v1"})
    assert done.code == 4, done.stderr
    error = done.json["items"][0]["error"]
    assert "api.openai.com" not in error, error  # before: "(requesting https://api.openai.com/v1)"
    assert f"(requesting http://127.0.0.1:{port}/v1/chat/completions)" in error, error


@needs("google.adk")
def test_an_adk_agent_whose_model_answers_garbage_names_no_url_it_did_not_try(tmp_path: Path,
                                                                             llm_server: LLMServer) -> None:
    llm_server.responder = lambda request: Reply(body="<html>502 from the proxy</html>")
    done = run(tmp_path, "adk_app", ADK_AGENT, "adk_app:root_agent", env={"MODEL_URL": llm_server.url})
    assert done.code == 4, done.stderr
    error = done.json["items"][0]["error"]
    assert error.startswith("turn 0: the target raised InternalServerError"), error
    assert "api.openai.com" not in error, error  # before: "(requesting https://api.openai.com/v1)"
    assert len(llm_server.requests) == 1


CLASSES = [
    pytest.param("from pydantic_ai import Agent\n", "Agent", "pydantic_ai.agent.Agent", "pydantic_ai",
                 marks=needs("pydantic_ai"), id="pydantic-ai"),
    pytest.param("from agents import Agent\n", "Agent", "agents.agent.Agent", "openai_agents",
                 marks=needs("agents"), id="openai-agents"),
    pytest.param("from smolagents import ToolCallingAgent\n", "ToolCallingAgent", "smolagents.agents.ToolCallingAgent",
                 "smolagents", marks=needs("smolagents"), id="smolagents"),
]


@pytest.mark.parametrize(("source", "name", "qualified", "adapter"), CLASSES)
def test_a_frameworks_agent_class_named_as_the_target_is_exit_2_naming_the_fix(
        tmp_path: Path, source: str, name: str, qualified: str, adapter: str) -> None:
    done = run(tmp_path, "app", source, f"app:{name}", command="validate")
    # before: "ok" (a class is callable), then every conversation failed at run time (Agent("...") builds an agent)
    assert done.code == 2, done.stdout + done.stderr
    assert f"target 'app:{name}' is the class {qualified}, not an agent: the {adapter} adapter runs an agent your " \
           "code builds from it" in done.stderr, done.stderr
    assert f"hint: point at the agent object: e.g. 'agent = {name}(...)' in your module" in done.stderr
    assert "Traceback" not in done.stderr


FACTORY = '''
from pydantic_ai import Agent


def make_agent() -> Agent:
    """The app builds its agent in a function (one per request)."""
    return Agent("test", instructions="Be concise.")
'''


@needs("pydantic_ai")
def test_a_function_that_builds_the_agent_named_as_the_target_is_exit_2_naming_the_fix(tmp_path: Path) -> None:
    done = run(tmp_path, "app", FACTORY, "app:make_agent", command="validate")
    # before: "ok", then "the target raised TypeError: make_agent() takes 0 positional arguments but 1 was given"
    assert done.code == 2, done.stdout + done.stderr
    assert "target 'app:make_agent': make_agent() takes no argument for the user's message, so no turn can call it" \
        in done.stderr, done.stderr
    assert "point at the agent it returns instead (e.g. 'agent = make_agent()' in your module" in done.stderr


def test_a_function_taking_the_message_keyword_only_or_by_star_args_still_validates(tmp_path: Path) -> None:
    source = "def star(*args, **kw):\n    return 'ok'\n\n\ndef plain(input, *, memory=None):\n    return 'ok'\n"
    for target in ("app:star", "app:plain"):
        done = run(tmp_path, "app", source, target, command="validate")
        assert done.code == 0, done.stderr


PARTS = '''
from google.adk.agents import Agent
from google.adk.runners import InMemoryRunner
from langgraph.graph import MessagesState, StateGraph

builder = StateGraph(MessagesState)
builder.add_node("answer", lambda state: {"messages": []})
builder.set_entry_point("answer")
root_agent = Agent(name="assistant", model="gemini-2.0-flash")
runner = InMemoryRunner(agent=root_agent)
settings = 42
'''


@needs("google.adk")
@needs("langgraph")
@pytest.mark.parametrize(("target", "said", "hint"), [
    ("app:builder", "is a StateGraph", "point at the compiled graph ('graph = builder.compile()' in your module"),
    ("app:runner", "is an InMemoryRunner", "point at the agent the runner runs ('target: module:root_agent'"),
    ("app:settings", "is an int", "an agent of a framework evalcli has an adapter for (crewai, google_adk, langgraph, "
                                  "llama_index, openai_agents, pydantic_ai, smolagents, strands"),
])
def test_an_object_that_is_not_an_agent_is_told_what_to_point_at(tmp_path: Path, target: str, said: str,
                                                                  hint: str) -> None:
    done = run(tmp_path, "app", PARTS, target, command="validate")
    assert done.code == 2, done.stdout + done.stderr
    # before: "is a int", "is a InMemoryRunner", and every hint "... an agent of PydanticAI, the OpenAI Agents SDK or
    # LangGraph", whichever framework the object came from
    assert f"target '{target}' {said}: it has no generate() and is not callable" in done.stderr, done.stderr
    assert hint in done.stderr, done.stderr


CREW_APP = '''
import os
from crewai import LLM, Agent, Crew, Task
from crewai.tools import tool


@tool("lookup")
def lookup(code: str) -> str:
    """Look a code up."""
    return f"code {code} is valid"


llm = LLM(model="openai/gpt-4o-mini", base_url=os.environ["OPENAI_BASE_URL"], api_key="sk-offline")
agent = Agent(role="Assistant", goal="Answer", backstory="You help.", tools=[lookup], llm=llm)
crew = Crew(agents=[agent], tasks=[Task(description="Answer: {question}", expected_output="an answer", agent=agent)])
'''


def crew_model(request: Request) -> Reply:
    """A model that ends its answers with a newline, as many do: a lookup, then what it found."""
    last = request.messages[-1]
    if last["role"] == "tool":
        return text(f"Found: {last['content']}\n")
    return tool_call("lookup", {"code": "K1000"}, f"call_{len(request.messages)}")


@pytest.mark.parametrize(("target", "options"), [("crew_app:agent", ""),
                                                  ("crew_app:crew", "target_options: {inputs_from: question}\n")],
                         ids=["agent", "crew"])
def test_a_crewai_answer_ending_in_a_newline_is_recorded_once(tmp_path: Path, llm_server: LLMServer, target: str,
                                                              options: str) -> None:
    from tests.framework_venvs import venv_or_skip

    python = venv_or_skip("crewai")
    llm_server.responder = crew_model
    (tmp_path / "crew_app.py").write_text(CREW_APP)
    (tmp_path / "d.yaml").write_text(f"target: {target}\n{options}" + ONE_ITEM)
    env = {"OPENAI_BASE_URL": llm_server.url, "OPENAI_API_KEY": "sk-offline", "NO_PROXY": "127.0.0.1",
           "CREWAI_STORAGE_DIR": str(tmp_path / "crewai"), "PYTHONPATH": f"{REPO}:{tmp_path}"}
    done = run_cli(["run", "d.yaml", "--db", str(tmp_path / "e.db"), "--json", "-"], tmp_path, env, python=python)
    assert done.code == 0, done.stderr
    output = json.loads(done.stdout)["items"][0]["turns"][0]["output"]
    answers = [m["content"] for m in output if m["role"] == "assistant" and m.get("content")]
    # before: ['Found: code K1000 is valid', 'Found: code K1000 is valid\n']: the executor's message, then the
    # kickoff's raw output again, as the crew's answer
    assert [a.strip() for a in answers] == ["Found: code K1000 is valid"], output
    assert [m["role"] for m in output] == ["assistant", "tool", "assistant"], output


SMOL_APP = '''
import os
from smolagents import OpenAIServerModel, ToolCallingAgent, tool


@tool
def lookup(code: str) -> str:
    """Look a code up.

    Args:
        code: the code.
    """
    return f"code {code} is valid"


model = OpenAIServerModel(model_id="gpt-4o-mini", api_base=os.environ["OPENAI_BASE_URL"], api_key="sk-offline")
agent = ToolCallingAgent(tools=[lookup], model=model)
'''

THREE = ("gates: [no_tool_errors]\ndata:\n" + "".join(f"  - id: c{i}\n    input: Please look up K100{i}.\n"
                                                     for i in range(3)))


def first_request_hangs(answer: Callable[[Request], Reply]) -> Callable[[Request], Reply]:
    """The server's first request (whichever conversation's turn it is) takes 10 s; every other one is quick."""
    lock, seen = threading.Lock(), []

    def responder(request: Request) -> Reply:
        with lock:
            seen.append(request)
            first = len(seen) == 1
        reply = answer(request)
        reply.delay = 10.0 if first else 0.0
        return reply
    return responder


def smol_model(request: Request) -> Reply:
    last = request.messages[-1]
    said = last["content"] if isinstance(last["content"], str) else " ".join(p.get("text", "") for p in last["content"])
    if "Observation" in said or last["role"] == "tool":
        return tool_call("final_answer", {"answer": said[-40:]}, f"f{len(request.messages)}")
    return tool_call("lookup", {"code": re.findall(r"K\d+", said)[-1]}, f"l{len(request.messages)}")


def three_at_once(tmp_path: Path, server: LLMServer, module: str, source: str, target: str,
                  python: Path | None = None) -> dict[str, str | None]:
    (tmp_path / f"{module}.py").write_text(source)
    (tmp_path / "d.yaml").write_text(f"target: {target}\n" + THREE)
    env = {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "sk-offline", "NO_PROXY": "127.0.0.1",
           "CREWAI_STORAGE_DIR": str(tmp_path / "crewai"), "PYTHONPATH": f"{REPO}:{tmp_path}"}
    done = run_cli(["run", "d.yaml", "--db", str(tmp_path / "e.db"), "--json", "-", "--concurrency", "3",
                    "--turn-timeout", "5"], tmp_path, env, python=python)
    assert done.code == 4, done.stderr
    return {item["id"]: item.get("error") for item in json.loads(done.stdout)["items"]}


def one_timed_out(errors: dict[str, str | None]) -> None:
    # before: all three "did not answer within 5s": the two quick ones waited for the first turn, which plays
    # alone, and that wait counted against their own timeout
    assert sorted(str(e) for e in errors.values()) == ["None", "None", "turn 0: the target did not answer within 5s"], \
        errors


@needs("smolagents")
def test_a_smolagents_first_turn_that_hangs_times_out_alone(tmp_path: Path, llm_server: LLMServer) -> None:
    llm_server.responder = first_request_hangs(smol_model)
    one_timed_out(three_at_once(tmp_path, llm_server, "smol_app", SMOL_APP, "smol_app:agent"))


def test_a_crewai_first_kickoff_that_hangs_times_out_alone(tmp_path: Path, llm_server: LLMServer) -> None:
    from tests.framework_venvs import venv_or_skip

    python = venv_or_skip("crewai")
    llm_server.responder = first_request_hangs(crew_model)
    one_timed_out(three_at_once(tmp_path, llm_server, "crew_app", CREW_APP, "crew_app:agent", python))


STOPPING_AGENT = '''
import os
from agents import Agent, OpenAIChatCompletionsModel, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

set_tracing_disabled(True)


@function_tool
def lookup(code: str) -> str:
    """Look a code up."""
    return f"code {code} is valid"


# the SDK's "tool use behavior" guide: the first tool's output is the final output, no second model call
agent = Agent(name="Lookup Agent", instructions="Look codes up.", tools=[lookup], tool_use_behavior="stop_on_first_tool",
              model=OpenAIChatCompletionsModel(model="gpt-4o-mini",
                                               openai_client=AsyncOpenAI(base_url=os.environ["OPENAI_BASE_URL"])))
'''


@needs("agents")
def test_an_agents_sdk_run_stopped_at_a_tools_output_records_that_output_as_the_answer(
        tmp_path: Path, llm_server: LLMServer) -> None:
    llm_server.responder = lambda request: tool_call("lookup", {"code": "K1000"}, "call_1")
    (tmp_path / "app.py").write_text(STOPPING_AGENT)
    (tmp_path / "d.yaml").write_text("target: app:agent\ngates: [{called_tool: lookup}, {includes: K1000 is valid}]\n"
                                     "data:\n  - id: one\n    input: Please look up K1000.\n")
    done = run_cli(["run", "d.yaml", "--db", str(tmp_path / "e.db"), "--json", "-"], tmp_path,
                   {"OPENAI_BASE_URL": llm_server.url, "OPENAI_API_KEY": "sk-offline", "NO_PROXY": "127.0.0.1"})
    # before: exit 1, "'k1000 is valid' not found in (no assistant text)": final_output, which the app shows, was lost
    assert done.code == 0, done.stdout[-2000:]
    output = json.loads(done.stdout)["items"][0]["turns"][0]["output"]
    assert output[-1] == {"role": "assistant", "content": "code K1000 is valid", "name": "Lookup Agent"}, output
    assert [m["role"] for m in output] == ["assistant", "tool", "assistant"], output
    assert len(llm_server.requests) == 1


DIRECT_LLAMA = '''
import os
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.tools import FunctionTool
from llama_index.llms.openai_like import OpenAILike


def lookup(code: str) -> str:
    """Look a code up."""
    return f"code {code} is valid"


llm = OpenAILike(model="gpt-4o-mini", api_base=os.environ["OPENAI_BASE_URL"], api_key="sk-offline", is_chat_model=True,
                 is_function_calling_model=True)
# LlamaIndex's return_direct tool: its output is the agent's answer, with no model call after it
agent = FunctionAgent(tools=[FunctionTool.from_defaults(lookup, return_direct=True)], llm=llm, system_prompt="Be concise.")
'''


def test_a_llama_index_return_direct_tools_output_is_recorded_as_the_answer(tmp_path: Path,
                                                                            llm_server: LLMServer) -> None:
    from tests.framework_venvs import venv_or_skip

    python = venv_or_skip("llama-index")
    llm_server.responder = lambda request: tool_call("lookup", {"code": "K1000"}, "call_1")
    (tmp_path / "llama_app.py").write_text(DIRECT_LLAMA)
    (tmp_path / "d.yaml").write_text("target: llama_app:agent\ngates: [{called_tool: lookup}, {includes: K1000 is valid}]\n"
                                     "data:\n  - id: one\n    input: Please look up K1000.\n")
    env = {"OPENAI_BASE_URL": llm_server.url, "OPENAI_API_KEY": "sk-offline", "NO_PROXY": "127.0.0.1",
           "PYTHONPATH": f"{REPO}:{tmp_path}"}
    done = run_cli(["run", "d.yaml", "--db", str(tmp_path / "e.db"), "--json", "-"], tmp_path, env, python=python)
    # before: exit 1, "not found in (no assistant text)": the handler's AgentOutput, the run's answer, was not recorded
    assert done.code == 0, done.stdout[-2000:] + done.stderr
    output = json.loads(done.stdout)["items"][0]["turns"][0]["output"]
    assert [(m["role"], m.get("content")) for m in output] == [
        ("assistant", None), ("tool", "code K1000 is valid"), ("assistant", "code K1000 is valid")], output
    assert len(llm_server.requests) == 1


STREAMING_APP = '''
import os
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

model = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(base_url=os.environ["OPENAI_BASE_URL"], api_key="sk-offline"))
agent = Agent(model, instructions="Be concise.")


async def ask(input: str):
    """The app's streaming handler (PydanticAI's run_stream, as its chat app streams to the browser)."""
    async with agent.run_stream(input) as result:
        async for chunk in result.stream_text(delta=True):
            yield chunk


def words(input: str):
    """A sync generator, as a WSGI app streams."""
    yield "Code "
    yield "K1000 is valid"


def mixed(input: str):
    yield "Code "
    yield 1000
'''


@needs("pydantic_ai")
def test_a_streaming_target_is_recorded_as_the_answer_its_chunks_make(tmp_path: Path, llm_server: LLMServer) -> None:
    llm_server.responder = lambda request: text("Code K1000 is valid")
    (tmp_path / "stream_app.py").write_text(STREAMING_APP)
    env = {"OPENAI_BASE_URL": llm_server.url, "OPENAI_API_KEY": "sk-offline", "NO_PROXY": "127.0.0.1"}
    for target in ("stream_app:ask", "stream_app:words"):
        (tmp_path / "d.yaml").write_text(f"target: {target}\ngates: [{{includes: K1000 is valid}}]\n"
                                         "data:\n  - id: one\n    input: Please look up K1000.\n")
        done = run_cli(["run", "d.yaml", "--db", str(tmp_path / "e.db"), "--json", "-"], tmp_path, env)
        # before: exit 4, "the target returned async_generator, not a response" (generator for the sync one)
        assert done.code == 0, done.stdout[-2000:] + done.stderr
        output = json.loads(done.stdout)["items"][0]["turns"][0]["output"]
        assert output == [{"role": "assistant", "content": "Code K1000 is valid"}], output
    (tmp_path / "d.yaml").write_text("target: stream_app:mixed\ngates: [{includes: K1000}]\ndata:\n  - input: hi\n")
    done = run_cli(["run", "d.yaml", "--db", str(tmp_path / "e.db"), "--json", "-"], tmp_path, env)
    assert done.code == 4
    assert json.loads(done.stdout)["items"][0]["error"] == \
        "turn 0: the target streamed int, str chunks; stream text (str) or message dicts, one kind"
