"""Framework agents through the real CLI: the example datasets against the loopback server playing the model,
64 conversations in flight on one agent object, an error mid-run, and validation (options, forced adapters)."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, CliResult, run_cli
from tests.framework_agents import KEY, NEW_FRAMEWORKS, framework_python, no_crosstalk
from tests.llm_server import BusyLLMServer, InFlight, LLMServer, scripted_weather, slow, text, tool_call

FRAMEWORKS = ["pydantic_ai", "openai_agents", "langgraph", *NEW_FRAMEWORKS]


def env(server: LLMServer) -> dict[str, str]:
    return {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": KEY, "EVALCLI_AGENT_MODEL": "scripted",
            "OPENAI_AGENTS_DISABLE_TRACING": "1", "NO_PROXY": "127.0.0.1"}


# The same small agent in each framework, its model at $OPENAI_BASE_URL: a `lookup` tool that crashes on "crash".
AGENTS = '''
import os
from typing import Any

URL, KEY = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]


def lookup(key: str) -> str:
    """Look a key up."""
    if key == "crash":
        raise RuntimeError("the lookup service is down")
    return f"value of {key}"


def pydantic_ai_agent() -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    return Agent(OpenAIChatModel("m", provider=OpenAIProvider(base_url=URL, api_key=KEY)), tools=[lookup])


def openai_agents_agent() -> Any:
    from agents import Agent, OpenAIChatCompletionsModel, function_tool
    from openai import AsyncOpenAI

    model = OpenAIChatCompletionsModel(model="m", openai_client=AsyncOpenAI(base_url=URL, api_key=KEY, max_retries=0))
    return Agent(name="a", model=model, tools=[function_tool(lookup, failure_error_function=None)])


def langgraph_agent() -> Any:
    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    return create_agent(ChatOpenAI(model="m", base_url=URL, api_key=KEY, use_responses_api=False, max_retries=0),
                        tools=[tool(lookup)])


def google_adk_agent() -> Any:
    from google.adk.agents import LlmAgent
    from google.adk.models.lite_llm import LiteLlm

    return LlmAgent(name="a", model=LiteLlm(model="openai/m", api_base=URL, api_key=KEY), tools=[lookup])


def strands_agent() -> Any:
    from strands import Agent, tool
    from strands.models.openai import OpenAIModel

    model = OpenAIModel(client_args={"base_url": URL, "api_key": KEY, "max_retries": 0, "timeout": 120}, model_id="m")
    return Agent(model=model, tools=[tool(lookup)])


agent = globals()[os.environ["FRAMEWORK"] + "_agent"]()
'''


def write_agent(folder: Path) -> None:
    (folder / "fw_agent.py").write_text(AGENTS)


def dataset(folder: Path, body: str) -> str:
    path = folder / "d.yaml"
    path.write_text(textwrap.dedent(body).lstrip("\n"))
    return str(path)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_example_dataset_passes_and_records_what_happened(framework: str, llm_server: LLMServer,
                                                          tmp_path: Path) -> None:
    llm_server.responder = scripted_weather
    done = run_cli(["run", f"datasets/frameworks/{framework}.yaml", "--db", str(tmp_path / "e.db"), "--json", "-"],
                   REPO, env(llm_server), python=framework_python(framework))
    assert done.code == 0, done.stderr
    report = done.json
    assert report["verdict"] == "passed" and report["summary"]["errors"] == 0
    items = {item["id"]: item for item in report["items"]}
    [failed_call] = [m for m in items["unknown-city"]["turns"][0]["output"] if m["role"] == "tool"]
    assert failed_call["is_error"] is True
    tomorrow = items["london-two-days"]["turns"][1]["output"]
    arguments = json.loads(tomorrow[0]["tool_calls"][0]["function"]["arguments"])
    assert arguments == {"city": "London", "day": "tomorrow"}  # recalled from turn 1 of the same thread
    assert len({item["thread_id"] for item in report["items"]}) == len(report["items"])


@pytest.fixture
def busy_server() -> Iterator[LLMServer]:
    server = BusyLLMServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.timing  # 56 of 64 in flight at once: a framework's CPU per call on a loaded machine spreads them out
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_64_conversations_in_flight_on_one_agent_without_crosstalk(framework: str, busy_server: LLMServer,
                                                                  tmp_path: Path) -> None:
    flight = InFlight(no_crosstalk(), delay=0.3)
    busy_server.responder = flight
    llm_server = busy_server
    write_agent(tmp_path)
    items = "\n".join(f"  - {{id: c{i}, turns: [{{input: 'Remember the code K{i}.'}}, "
                      f"{{input: 'What is the code?', gates: [{{includes: 'The code is K{i}.'}}]}}]}}"
                      for i in range(64))
    path = dataset(tmp_path, f"target: fw_agent:agent\nconcurrency: 64\ngates: [used_no_tools]\ndata:\n{items}\n")
    done = run_cli(["run", path, "--db", str(tmp_path / "c.db"), "--json", "-"], tmp_path,
                   {**env(llm_server), "FRAMEWORK": framework}, python=framework_python(framework))
    assert done.code == 0, done.stderr[-3000:]
    report = done.json
    assert report["verdict"] == "passed" and report["summary"]["errors"] == 0
    for item in report["items"]:
        assert item["turns"][1]["output"][-1]["content"] == f"The code is K{item['id'][1:]}."
    assert flight.peak >= 56, flight.peak  # the conversations really were in flight together


@pytest.mark.parametrize("framework", [f for f in FRAMEWORKS if getattr(f, "values", (f,))[0] != "strands"])
def test_exception_mid_run_is_the_conversations_error_and_keeps_the_tool_call(framework: str, llm_server: LLMServer,
                                                                             tmp_path: Path) -> None:
    llm_server.push(tool_call("lookup", {"key": "crash"}, "c1"))
    write_agent(tmp_path)
    path = dataset(tmp_path, "target: fw_agent:agent\ngates: [called_tool: lookup]\ndata:\n  - {id: boom, input: Crash}\n")
    done = run_cli(["run", path, "--db", str(tmp_path / "x.db"), "--json", "-"], tmp_path,
                   {**env(llm_server), "FRAMEWORK": framework})
    assert done.code == 4, done.stderr[-3000:]
    [item] = done.json["items"]
    assert item["status"] == "error" and "the lookup service is down" in item["error"]
    calls = [c["id"] for m in item["turns"][0]["output"] for c in m.get("tool_calls") or ()]
    # the Agents SDK saves a model step only once its tools have run: its call is taken from the run's hooks, which
    # saw the reply (docs/targets/frameworks.md, "Calls as the model made them")
    assert calls == ["c1"]


def test_a_strands_tool_that_raises_is_a_tool_error_and_the_run_goes_on(llm_server: LLMServer, tmp_path: Path) -> None:
    """Strands reports a tool's exception to the model as an error result (``status: error``): not the run's end."""
    llm_server.push(tool_call("lookup", {"key": "crash"}, "c1"), text("The lookup failed."))
    write_agent(tmp_path)
    path = dataset(tmp_path, "target: fw_agent:agent\ngates: [called_tool: lookup]\nscorers: [no_tool_errors]\n"
                             "data:\n  - {id: boom, input: Crash}\n")
    done = run_cli(["run", path, "--db", str(tmp_path / "x.db"), "--json", "-"], tmp_path,
                   {**env(llm_server), "FRAMEWORK": "strands"}, python=framework_python("strands"))
    assert done.code == 0, done.stderr[-3000:]
    [item] = done.json["items"]
    [result] = [m for m in item["turns"][0]["output"] if m["role"] == "tool"]
    assert result["is_error"] is True and "the lookup service is down" in result["content"]
    assert item["outcomes"]["scorers"]["no_tool_errors"]["score"] == 0
    assert item["turns"][0]["output"][-1]["content"] == "The lookup failed."


@pytest.mark.parametrize(("framework", "option", "accepted"), [
    ("pydantic_ai", "context", "deps"), ("openai_agents", "deps", "max_turns"), ("langgraph", "deps", "context")])
def test_an_option_the_framework_does_not_take_is_a_validation_error(framework: str, option: str, accepted: str,
                                                                     tmp_path: Path) -> None:
    write_agent(tmp_path)
    path = dataset(tmp_path, f"target: fw_agent:agent\ntarget_options: {{{option}: 1}}\ngates: [used_no_tools]\n"
                             "data: [{input: hi}]\n")
    done = run_cli(["validate", path], tmp_path, {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": KEY,
                                                  "FRAMEWORK": framework})
    assert done.code == 2
    assert f"'{option}' is not an option of" in done.stderr and accepted in done.stderr


@pytest.mark.parametrize(("framework", "forced"), [("pydantic_ai", "langgraph"), ("langgraph", "openai_agents")])
def test_a_forced_adapter_that_does_not_fit_is_a_validation_error(framework: str, forced: str, tmp_path: Path) -> None:
    write_agent(tmp_path)
    path = dataset(tmp_path, f"target: fw_agent:agent\ntarget_options: {{adapter: {forced}}}\n"
                             "gates: [used_no_tools]\ndata: [{input: hi}]\n")
    done = run_cli(["run", path, "--db", str(tmp_path / "x.db")], tmp_path,
                   {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": KEY, "FRAMEWORK": framework})
    assert done.code == 2
    assert f"which the {forced} adapter does not take" in done.stderr and f"recognised it as '{framework}'" in done.stderr


def test_forcing_a_framework_adapter_on_a_plain_function_fails(write: Callable[..., Path],
                                                              cli: Callable[..., CliResult]) -> None:
    write("d.yaml", "target: agents:echo\ntarget_options: {adapter: pydantic_ai}\ngates: [used_no_tools]\n"
                    "data: [{input: hi}]\n")
    done = cli("validate", "d.yaml")
    assert done.code == 2 and "which the pydantic_ai adapter does not take" in done.stderr


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_turn_timeout_applies_to_the_frameworks_run(framework: str, llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = lambda request: slow(text("too late"), 5)
    write_agent(tmp_path)
    path = dataset(tmp_path, "target: fw_agent:agent\ngates: [used_no_tools]\ndata: [{id: slow, input: hi}]\n")
    done = run_cli(["run", path, "--db", str(tmp_path / "x.db"), "--json", "-", "--turn-timeout", "0.5"], tmp_path,
                   {**env(llm_server), "FRAMEWORK": framework}, python=framework_python(framework))
    assert done.code == 4, done.stderr[-3000:]
    assert "did not answer within 0.5s" in done.json["items"][0]["error"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_one_invocation_runs_the_same_framework_dataset_twice(framework: str, llm_server: LLMServer,
                                                              tmp_path: Path) -> None:
    """Frameworks keep HTTP clients per process; every dataset of one invocation shares one event loop, so the
    second dataset's conversations find those clients on a live loop."""
    llm_server.responder = scripted_weather
    path = f"datasets/frameworks/{framework}.yaml"
    done = run_cli(["run", path, path, "--db", str(tmp_path / "twice.db"), "--json", "-"], REPO, env(llm_server),
                   python=framework_python(framework))
    assert done.code == 0, done.stderr[-3000:]
    runs = done.json["runs"]
    assert [run["summary"]["errors"] for run in runs] == [0, 0]
    assert all(run["verdict"] == "passed" for run in runs)
