"""Mocks of framework agents' tools (docs/hermetic.md) through the real CLI, against the loopback scripted model: PydanticAI
function tools, Agents SDK function tools (on a handoff agent too), LangGraph tools run by ``create_agent``'s and
``create_react_agent``'s ``ToolNode``. The mocked value reaches the answer and the real tool never runs (it writes a
marker); the agent object is never changed (a second, unmocked dataset on the same module still runs it live)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult, run_cli
from tests.framework_agents import KEY, NEW_FRAMEWORKS, framework_python
from tests.llm_server import LLMServer, scripted_weather

AGENTS = '''
import os, pathlib
from typing import Any

URL, KEY = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
MARK = pathlib.Path(__file__).with_name("ran.txt")


def get_weather(city: str, day: str = "today") -> dict:
    """Get the weather forecast for a city."""
    with MARK.open("a") as f:
        f.write(f"get_weather {city}\\n")
    return {"city": city, "day": day, "condition": "sunny", "temperature_f": 70}


def pydantic_ai_agent() -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    return Agent(OpenAIChatModel("m", provider=OpenAIProvider(base_url=URL, api_key=KEY)), tools=[get_weather])


def _sdk_model() -> Any:
    from agents import OpenAIChatCompletionsModel
    from openai import AsyncOpenAI

    return OpenAIChatCompletionsModel(model="m", openai_client=AsyncOpenAI(base_url=URL, api_key=KEY, max_retries=0))


def openai_agents_agent() -> Any:
    from agents import Agent, function_tool

    forecaster = Agent(name="forecaster", model=_sdk_model(), tools=[function_tool(get_weather)])
    return Agent(name="triage", model=_sdk_model(), handoffs=[forecaster], tools=[function_tool(get_weather)])


def _chat() -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model="m", base_url=URL, api_key=KEY, use_responses_api=False, max_retries=0)


def create_agent_agent() -> Any:
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    return create_agent(_chat(), tools=[tool(get_weather)])


def create_react_agent_agent() -> Any:
    import warnings

    from langchain_core.tools import tool
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(_chat(), tools=[tool(get_weather)])


def google_adk_agent() -> Any:
    from google.adk.agents import LlmAgent
    from google.adk.models.lite_llm import LiteLlm

    def report(tool: Any, args: Any, tool_context: Any, error: Exception) -> dict:
        return {"error": str(error)}  # the model hears of the failure (ADK's default: the run ends)

    return LlmAgent(name="weather", model=LiteLlm(model="openai/m", api_base=URL, api_key=KEY), tools=[get_weather],
                    on_tool_error_callback=report)


def strands_agent() -> Any:
    from strands import Agent, tool
    from strands.models.openai import OpenAIModel

    model = OpenAIModel(client_args={"base_url": URL, "api_key": KEY, "max_retries": 0, "timeout": 120}, model_id="m")
    return Agent(model=model, tools=[tool(get_weather)])


agent = globals()[os.environ["FRAMEWORK"] + "_agent"]()
'''

FRAMEWORKS = ["pydantic_ai", "openai_agents", "create_agent", "create_react_agent", *NEW_FRAMEWORKS]

MOCKED = """
target: fw_tools:agent
tools:
  get_weather:
    - when: {city: London}
      returns: {condition: snowy, temperature_f: 1}
    - when: {city: Paris}
      raises: the weather service is down
data:
  - id: london
    input: What is the weather in London?
  - id: paris
    input: What is the weather in Paris?
  - id: tokyo
    input: What is the weather in Tokyo?
    tools:
      get_weather: {returns: {condition: hail, temperature_f: 33}}
scorers:
  - includes: "°F"
"""


def run(folder: Path, server: LLMServer, framework: str, dataset: str, *args: str) -> CliResult:
    (folder / "fw_tools.py").write_text(AGENTS)
    (folder / "d.yaml").write_text(textwrap.dedent(dataset).lstrip("\n"))
    env = {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": KEY, "OPENAI_AGENTS_DISABLE_TRACING": "1",
           "NO_PROXY": "127.0.0.1", "FRAMEWORK": framework}
    return run_cli(["run", "d.yaml", "--json", "-", *args], folder, env, python=framework_python(framework))


def answers(result: CliResult) -> dict[str, list[str]]:
    return {item["id"]: [m["content"] for turn in item["turns"] for m in turn["output"]
                         if m["role"] == "assistant" and m.get("content")] for item in result.json["items"]}


def results(result: CliResult) -> dict[str, list[dict[str, Any]]]:
    return {item["id"]: [m for turn in item["turns"] for m in turn["output"] if m["role"] == "tool"]
            for item in result.json["items"]}


def marker(folder: Path) -> str:
    path = folder / "ran.txt"
    return path.read_text() if path.exists() else ""


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_mocked_tools_of_framework_agents(framework: str, llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = scripted_weather
    done = run(tmp_path, llm_server, framework, MOCKED)
    assert done.code == 0, done.stderr[-3000:]
    said = answers(done)
    assert said["london"][-1] == "Today in London: snowy, 1°F."
    assert said["paris"][-1] == "Sorry, I could not get a forecast for Paris."
    assert said["tokyo"][-1] == "Today in Tokyo: hail, 33°F."
    found = results(done)
    assert [m["source"] for r in found.values() for m in r] == ["mock", "mock", "mock"]
    assert found["paris"][0]["is_error"] is True  # a mock's `raises` is the framework's own tool error
    assert marker(tmp_path) == ""  # the real tool never ran
    # the same agent module, unmocked: the real tool runs (the mocks changed nothing on the agent)
    live = run(tmp_path, llm_server, framework, """
        target: fw_tools:agent
        data:
          - id: rome
            input: What is the weather in Rome?
        scorers:
          - includes: "°F"
    """)
    assert live.code == 0, live.stderr[-3000:]
    assert answers(live)["rome"][-1] == "Today in Rome: sunny, 70°F."
    assert marker(tmp_path) == "get_weather Rome\n"


def test_a_handoff_agents_tools_are_mocked_too(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = scripted_weather
    done = run(tmp_path, llm_server, "openai_agents", """
        target: fw_tools:agent
        tools:
          get_weather: {returns: {condition: misty, temperature_f: 45}}
        data:
          - id: handed
            input: Ask the forecaster about the weather in London
        scorers:
          - includes: "°F"
    """)
    assert done.code == 0, done.stderr[-3000:]
    [item] = done.json["items"]
    output = item["turns"][0]["output"]
    assert [m.get("name") for m in output if m["role"] == "assistant" and m.get("content")] == ["forecaster"]
    assert answers(done)["handed"][-1] == "Today in London: misty, 45°F."
    assert [m.get("source") for m in results(done)["handed"]] == [None, "mock"]  # a handoff is not a tool
    assert marker(tmp_path) == ""


def test_a_handoff_is_not_a_tool_and_never_live_under_hermetic(llm_server: LLMServer, tmp_path: Path) -> None:
    llm_server.responder = scripted_weather
    done = run(tmp_path, llm_server, "openai_agents", """
        target: fw_tools:agent
        tools:
          get_weather: {returns: {condition: misty, temperature_f: 45}}
        data:
          - id: handed
            input: Ask the forecaster about the weather in London
        gates:
          - called_tool: get_weather
    """, "--hermetic")
    assert done.code == 0, done.stderr[-3000:]
    [item] = done.json["items"]
    output = item["turns"][0]["output"]
    [handoff] = [m for m in output if m["role"] == "tool" and m.get("handoff")]
    assert "source" not in handoff  # not a tool: neither live nor mocked
    calls = [c["function"]["name"] for m in output for c in m.get("tool_calls") or ()]
    assert calls[0].startswith("transfer_to_") and calls[1:] == ["get_weather"]
    assert [m.get("source") for m in output if m["role"] == "tool" and not m.get("handoff")] == ["mock"]
    assert marker(tmp_path) == ""


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_tool_names_and_when_keys_are_checked_against_the_agent(framework: str, llm_server: LLMServer,
                                                                tmp_path: Path) -> None:
    (tmp_path / "fw_tools.py").write_text(AGENTS)
    (tmp_path / "d.yaml").write_text(textwrap.dedent("""
        target: fw_tools:agent
        tools:
          get_wether: {returns: 1}
          get_weather: {when: {town: London}, returns: 1}
        data:
          - input: hi
        scorers:
          - includes: x
    """).lstrip("\n"))
    env = {"OPENAI_BASE_URL": llm_server.url, "OPENAI_API_KEY": KEY, "FRAMEWORK": framework}
    done = run_cli(["validate", "d.yaml"], tmp_path, env, python=framework_python(framework))
    assert done.code == 2, done.stderr
    assert "d.yaml:3:3: dataset: tools.get_wether: the agent has no tool 'get_wether' (did you mean " \
           "'get_weather'?)" in done.stderr
    assert "d.yaml:4:24: dataset: tools.get_weather: 'when' names 'town', which is not a parameter of " \
           "get_weather" in done.stderr


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_each_conversation_keeps_its_own_mocks_at_concurrency(framework: str, llm_server: LLMServer,
                                                              tmp_path: Path) -> None:
    llm_server.responder = scripted_weather
    items = "\n".join(f"""
          - id: c{n}
            input: What is the weather in London?
            tools:
              get_weather: {{returns: {{condition: c{n}, temperature_f: {n}}}, delay: 0.1}}""" for n in range(16))
    done = run(tmp_path, llm_server, framework, f"""
        target: fw_tools:agent
        concurrency: 16
        data:{items}
        scorers:
          - includes: "°F"
    """)
    assert done.code == 0, done.stderr[-3000:]
    said = answers(done)
    assert all(said[f"c{n}"][-1] == f"Today in London: c{n}, {n}°F." for n in range(16)), said
    assert marker(tmp_path) == ""
