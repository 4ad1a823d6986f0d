"""MCP tools under the dataset's control (docs/hermetic.md, "MCP tools"), through the real CLI.

The MCP server is real (``examples/mcp_weather_server.py``, made with the ``mcp`` package's server), over stdio and
over streamable HTTP, and appends a line to ``WEATHER_MCP_LOG`` whenever one of its tools really runs; the agents
are real (``evalcli.Agent``, the Agents SDK's ``MCPServerStdio``) against the loopback scripted model.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, CliResult
from tests.llm_server import LLMServer, scripted_weather
from tests.reliability_helpers import serving
from tests.test_tools_mocks import answers, tool_results

AGENT = f'''
import os
import evalcli

SERVER = [{sys.executable!r}, "-m", "examples.mcp_weather_server"]
agent = evalcli.Agent(model="openai/scripted", api_base=os.environ["OPENAI_BASE_URL"],
                      mcp=[{{"command": SERVER, "name": "weather", "cwd": {str(REPO)!r}}}])
over_http = evalcli.Agent(model="openai/scripted", api_base=os.environ["OPENAI_BASE_URL"],
                          mcp=[{{"url": os.environ.get("WEATHER_MCP_URL", "http://127.0.0.1:9/mcp"), "name": "weather"}}])
broken = evalcli.Agent(model="openai/scripted", mcp=[{{"command": "python no_such_server.py"}}])
'''

ITEMS = """
data:
  - id: london
    input: What is the weather in London?
  - id: paris
    input: What is the weather in Paris?
scorers:
  - includes: "°F"
"""


@pytest.fixture
def mcp_env(workdir: Path, llm_server: LLMServer) -> dict[str, str]:
    (workdir / "mcp_agents.py").write_text(AGENT)
    llm_server.responder = scripted_weather
    return {"OPENAI_BASE_URL": llm_server.url, "OPENAI_API_KEY": "sk-test-not-a-real-key-0123456789",
            "NO_PROXY": "127.0.0.1", "WEATHER_MCP_LOG": str(workdir / "mcp.log")}


def ran(workdir: Path) -> list[str]:
    log = workdir / "mcp.log"
    return sorted(log.read_text().splitlines()) if log.exists() else []


@pytest.fixture
def http_server(mcp_env: dict[str, str]) -> Iterator[str]:
    with serving("examples.mcp_weather_server", "--http", env={**mcp_env, "PYTHONPATH": str(REPO)}) as port:
        yield f"http://127.0.0.1:{port}/mcp"


def sources(result: CliResult) -> dict[str, list[str]]:
    return {item: [m["source"] for turn in turns for m in turn] for item, turns in tool_results(result).items()}


def test_mcp_tools_run_live_are_mocked_by_name_and_hermetic(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                           mcp_env: dict[str, str], workdir: Path) -> None:
    write("live.yaml", "target: mcp_agents:agent\n" + ITEMS)
    live = cli("run", "live.yaml", "--record-tools", "tapes", "--json", "-", env=mcp_env)
    assert live.code == 0, live.stderr
    assert answers(live) == {"london": ["Today in London: windy, 61°F."], "paris": ["Today in Paris: windy, 61°F."]}
    assert ran(workdir) == ["get_weather London today", "get_weather Paris today"]
    write("mocked.yaml", "target: mcp_agents:agent\ntools:\n  get_weather:\n    - when: {city: London}\n"
                         "      returns: {condition: snowy, temperature_f: 1}\n" + ITEMS)
    mocked = cli("run", "mocked.yaml", "--hermetic", "--json", "-", env=mcp_env)
    assert mocked.code == 4, mocked.stderr  # Paris has no mock: under --hermetic, the conversation's error
    items = {item["id"]: item for item in mocked.json["items"]}
    assert answers(mocked)["london"] == ["Today in London: snowy, 1°F."] and sources(mocked)["london"] == ["mock"]
    assert items["paris"]["status"] == "error" and "--hermetic" in items["paris"]["error"]
    assert 'get_weather({"city":"Paris","day":"today"})' in items["paris"]["error"]
    assert ran(workdir) == ["get_weather London today", "get_weather Paris today"]  # nothing ran again
    # the whole server mocked from the tape the live run recorded
    write("server.yaml", "target: mcp_agents:agent\ntools:\n  weather: {mcp: weather, from_tape: "
                         "tapes/live.tape.jsonl}\n" + ITEMS.replace("Paris?", "Paris?\n  - id: rome\n    input: "
                                                                     "What is the weather in Rome?"))
    replayed = cli("run", "server.yaml", "--hermetic", "--json", "-", env=mcp_env)
    assert replayed.code == 4, replayed.stderr
    said = answers(replayed)
    assert said["london"] == ["Today in London: windy, 61°F."] and said["paris"] == ["Today in Paris: windy, 61°F."]
    assert sources(replayed)["london"] == ["replay"]
    rome = {item["id"]: item for item in replayed.json["items"]}["rome"]
    assert rome["status"] == "error" and "the MCP server weather is mocked from" in rome["error"]
    assert ran(workdir) == ["get_weather London today", "get_weather Paris today"]


def test_mcp_over_streamable_http(write: Callable[..., Path], cli: Callable[..., CliResult], mcp_env: dict[str, str],
                                  http_server: str, workdir: Path) -> None:
    env = {**mcp_env, "WEATHER_MCP_URL": http_server}
    write("d.yaml", "target: mcp_agents:over_http\ntools:\n  get_weather:\n    - when: {city: Paris}\n"
                    "      raises: the weather service is down\n" + ITEMS)
    result = cli("run", "d.yaml", "--json", "-", env=env)
    assert result.code == 0, result.stderr
    assert answers(result) == {"london": ["Today in London: windy, 61°F."],
                               "paris": ["Sorry, I could not get a forecast for Paris."]}
    assert sources(result) == {"london": ["live"], "paris": ["mock"]}
    assert ran(workdir) == ["get_weather London today"]


def test_mcp_mistakes_are_validation_errors(write: Callable[..., Path], cli: Callable[..., CliResult],
                                            mcp_env: dict[str, str]) -> None:
    write("broken.yaml", "target: mcp_agents:broken\n" + ITEMS)
    result = cli("validate", "broken.yaml", env=mcp_env)
    assert result.code == 2, result.stderr
    assert "broken.yaml:1:9: the MCP server 'python no_such_server.py' did not start or list its tools" in result.stderr
    write("unreachable.yaml", "target: mcp_agents:over_http\n" + ITEMS)
    result = cli("validate", "unreachable.yaml", env=mcp_env)
    assert result.code == 2 and "the MCP server http://127.0.0.1:9/mcp did not start" in result.stderr
    write("names.yaml", "target: mcp_agents:agent\ntools:\n  get_wether: {returns: 1}\n"
                        "  server: {mcp: wether, from_tape: t.tape.jsonl}\n" + ITEMS)
    (Path(write("t.tape.jsonl", "")).parent / "t.tape.jsonl").write_text("")
    result = cli("validate", "names.yaml", env=mcp_env)
    assert result.code == 2
    assert "tools.get_wether: the agent has no tool 'get_wether' (did you mean 'get_weather'?)" in result.stderr
    assert "the agent has no MCP server 'wether' (did you mean 'weather'?)" in result.stderr
    assert "Traceback" not in result.stderr


SDK_AGENT = f'''
import os
from agents import Agent, OpenAIChatCompletionsModel, set_tracing_disabled
from agents.mcp import MCPServerStdio
from openai import AsyncOpenAI

set_tracing_disabled(True)
server = MCPServerStdio(params={{"command": {sys.executable!r}, "args": ["-m", "examples.mcp_weather_server"],
                                 "cwd": {str(REPO)!r}, "env": dict(os.environ)}},
                        name="weather", client_session_timeout_seconds=120)
model = OpenAIChatCompletionsModel(model="scripted", openai_client=AsyncOpenAI(base_url=os.environ["OPENAI_BASE_URL"]))
agent = Agent(name="weather", instructions="Answer with the forecast.", model=model, mcp_servers=[server])
'''


def test_agents_sdk_mcp_servers_are_connected_mocked_and_hermetic(write: Callable[..., Path],
                                                                  cli: Callable[..., CliResult],
                                                                  mcp_env: dict[str, str], workdir: Path) -> None:
    (workdir / "sdk_agents.py").write_text(SDK_AGENT)
    (workdir / "agents.py").unlink(missing_ok=True)  # the workdir's sample targets would shadow the SDK's package
    write("live.yaml", "target: sdk_agents:agent\n" + ITEMS)
    live = cli("run", "live.yaml", "--record-tools", "tapes", "--json", "-", env=mcp_env)
    assert live.code == 0, live.stderr
    assert answers(live) == {"london": ["Today in London: windy, 61°F."], "paris": ["Today in Paris: windy, 61°F."]}
    assert ran(workdir) == ["get_weather London today", "get_weather Paris today"]
    write("mocked.yaml", "target: sdk_agents:agent\ntools:\n  get_weather:\n    - when: {city: London}\n"
                         "      returns: {condition: snowy, temperature_f: 1}\n"
                         "  weather: {mcp: weather, from_tape: tapes/live.tape.jsonl}\n" + ITEMS)
    mocked = cli("run", "mocked.yaml", "--hermetic", "--json", "-", env=mcp_env)
    assert mocked.code == 0, mocked.stderr
    assert answers(mocked) == {"london": ["Today in London: snowy, 1°F."], "paris": ["Today in Paris: windy, 61°F."]}
    assert sources(mocked) == {"london": ["mock"], "paris": ["replay"]}
    assert ran(workdir) == ["get_weather London today", "get_weather Paris today"]  # nothing ran again
