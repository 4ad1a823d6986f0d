"""Framework agents' own MCP servers under the dataset's control (docs/hermetic.md, "MCP tools"), through the real CLI.

The MCP server is real (``examples/mcp_weather_server.py``), over stdio and over streamable HTTP, and logs each tool
call that really runs; the agents are real PydanticAI agents (``MCPToolset``) and Agents SDK agents
(``MCPServerStdio``) against the loopback scripted model.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO, CliResult
from tests.framework_agents import needs
from tests.test_tools_mcp import ITEMS, SDK_AGENT, http_server, mcp_env, ran, sources  # noqa: F401 - fixtures
from tests.test_tools_mocks import answers

PYDANTIC_MCP = needs("fastmcp")
"""PydanticAI's MCPToolset needs pydantic-ai-slim[mcp] (the FastMCP client)."""

PYDANTIC_AGENT = f'''
import os
import sys
from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

model = OpenAIChatModel("scripted", provider=OpenAIProvider(base_url=os.environ["OPENAI_BASE_URL"],
                                                            api_key=os.environ["OPENAI_API_KEY"]))
weather = MCPToolset(StdioTransport({sys.executable!r}, ["-m", "examples.mcp_weather_server"], cwd={str(REPO)!r},
                                    env=dict(os.environ)), id="weather", init_timeout=120, read_timeout=120)
agent = Agent(model, instructions="Answer with the forecast.", toolsets=[weather])
over_http = Agent(model, toolsets=[MCPToolset(os.environ.get("WEATHER_MCP_URL", "http://127.0.0.1:9/mcp"),
                                              id="weather", init_timeout=120, read_timeout=120)])
broken = Agent(model, toolsets=[MCPToolset(StdioTransport("python", ["no_such_server.py"]), id="broken")])
'''


@pytest.fixture
def agents(workdir: Path, mcp_env: dict[str, str]) -> dict[str, str]:  # noqa: F811 - the fixture imported above
    (workdir / "pai_agents.py").write_text(PYDANTIC_AGENT)
    (workdir / "sdk_agents.py").write_text(SDK_AGENT)
    (workdir / "agents.py").unlink(missing_ok=True)  # the workdir's sample targets would shadow the SDK's package
    return mcp_env


@PYDANTIC_MCP
def test_pydantic_ai_mcp_toolsets_are_recorded_mocked_replayed_and_hermetic(
        write: Callable[..., Path], cli: Callable[..., CliResult], agents: dict[str, str], workdir: Path) -> None:
    write("live.yaml", "target: pai_agents:agent\n" + ITEMS)
    live = cli("run", "live.yaml", "--record-tools", "tapes", "--json", "-", env=agents)
    assert live.code == 0, live.stderr
    assert answers(live) == {"london": ["Today in London: windy, 61°F."], "paris": ["Today in Paris: windy, 61°F."]}
    assert sources(live) == {"london": ["live"], "paris": ["live"]}
    assert ran(workdir) == ["get_weather London today", "get_weather Paris today"]
    write("mocked.yaml", "target: pai_agents:agent\ntools:\n  get_weather:\n    - when: {city: London}\n"
                         "      returns: {condition: snowy, temperature_f: 1}\n"
                         "  weather: {mcp: weather, from_tape: tapes/live.tape.jsonl}\n"
                         + ITEMS.replace("Paris?", "Paris?\n  - id: rome\n    input: What is the weather in Rome?"))
    mocked = cli("run", "mocked.yaml", "--hermetic", "--json", "-", env=agents)
    assert mocked.code == 4, mocked.stderr  # Rome is on no tape: under a whole-server mock, the conversation's error
    said = answers(mocked)
    assert said["london"] == ["Today in London: snowy, 1°F."] and said["paris"] == ["Today in Paris: windy, 61°F."]
    assert sources(mocked)["london"] == ["mock"] and sources(mocked)["paris"] == ["replay"]
    rome = {item["id"]: item for item in mocked.json["items"]}["rome"]
    assert rome["status"] == "error" and "the MCP server weather is mocked from" in rome["error"]
    assert ran(workdir) == ["get_weather London today", "get_weather Paris today"]  # nothing ran again


@PYDANTIC_MCP
def test_pydantic_ai_mcp_over_http_with_faults(write: Callable[..., Path], cli: Callable[..., CliResult],
                                               agents: dict[str, str], http_server: str,  # noqa: F811
                                               workdir: Path) -> None:
    env = {**agents, "WEATHER_MCP_URL": http_server}
    write("d.yaml", "target: pai_agents:over_http\ntools:\n  get_weather:\n    faults: {error_rate: 1, seed: 3}\n"
                    + ITEMS)
    result = cli("run", "d.yaml", "--json", "-", env=env)
    assert result.code in (0, 1), result.stderr
    assert {s for each in sources(result).values() for s in each} == {"fault"}
    assert ran(workdir) == []  # every call failed before it reached the server
    write("live.yaml", "target: pai_agents:over_http\n" + ITEMS)
    live = cli("run", "live.yaml", "--hermetic", "--json", "-", env=env)
    assert live.code == 4, live.stderr
    assert all(item["status"] == "error" and "--hermetic" in item["error"] for item in live.json["items"])
    assert ran(workdir) == []


@pytest.mark.parametrize("target", [pytest.param("pai_agents:agent", marks=PYDANTIC_MCP),
                                    pytest.param("sdk_agents:agent", marks=needs("agents"))])
def test_mcp_tool_names_are_checked_before_the_run(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                   agents: dict[str, str], target: str) -> None:
    write("names.yaml", f"target: {target}\ntools:\n  get_wether: {{returns: 1}}\n"
                        "  server: {mcp: wether, from_tape: t.tape.jsonl}\n" + ITEMS)
    write("t.tape.jsonl", "")
    result = cli("validate", "names.yaml", env=agents)
    assert result.code == 2, result.stderr
    assert "tools.get_wether: the agent has no tool 'get_wether' (did you mean 'get_weather'?)" in result.stderr
    assert "the agent has no MCP server 'wether' (did you mean 'weather'?)" in result.stderr
    assert "Traceback" not in result.stderr


@PYDANTIC_MCP
def test_a_framework_mcp_server_that_does_not_start_is_a_validation_error(
        write: Callable[..., Path], cli: Callable[..., CliResult], agents: dict[str, str]) -> None:
    write("broken.yaml", "target: pai_agents:broken\n" + ITEMS)
    result = cli("validate", "broken.yaml", env=agents)
    assert result.code == 2, result.stderr
    assert "broken.yaml:1:9: the MCP server 'python no_such_server.py' did not start or list its tools" in result.stderr
    write("unreachable.yaml", "target: pai_agents:over_http\n" + ITEMS)
    result = cli("validate", "unreachable.yaml", env=agents)
    assert result.code == 2 and "the MCP server http://127.0.0.1:9/mcp did not start" in result.stderr
    assert "Traceback" not in result.stderr


ADK_AGENT = f'''
import os
import sys
from google.adk.agents import Agent
from google.adk.models.lite_llm import LiteLlm
from google.adk.tools.mcp_tool import McpToolset, StdioConnectionParams
from mcp import StdioServerParameters

server = StdioServerParameters(command=sys.executable, args=["-m", "examples.mcp_weather_server"], cwd={str(REPO)!r},
                               env=dict(os.environ))
agent = Agent(name="weather", model=LiteLlm(model="openai/scripted", api_base=os.environ["OPENAI_BASE_URL"]),
              instruction="Answer with the forecast.",
              tools=[McpToolset(connection_params=StdioConnectionParams(server_params=server, timeout=120))])
'''


@needs("google.adk")
def test_adk_mcp_toolsets_are_recorded_mocked_replayed_and_checked(write: Callable[..., Path],
                                                                   cli: Callable[..., CliResult],
                                                                   agents: dict[str, str], workdir: Path) -> None:
    (workdir / "adk_agents.py").write_text(ADK_AGENT)
    write("live.yaml", "target: adk_agents:agent\n" + ITEMS)
    live = cli("run", "live.yaml", "--record-tools", "tapes", "--json", "-", env=agents)
    assert live.code == 0, live.stderr
    assert answers(live) == {"london": ["Today in London: windy, 61°F."], "paris": ["Today in Paris: windy, 61°F."]}
    assert ran(workdir) == ["get_weather London today", "get_weather Paris today"]
    write("mocked.yaml", "target: adk_agents:agent\ntools:\n  get_weather:\n    - when: {city: London}\n"
                         "      returns: {condition: snowy, temperature_f: 1}\n"
                         "  weather: {mcp: mcp_weather_server, from_tape: tapes/live.tape.jsonl}\n" + ITEMS)
    mocked = cli("run", "mocked.yaml", "--hermetic", "--json", "-", env=agents)
    assert mocked.code == 0, mocked.stderr
    assert answers(mocked) == {"london": ["Today in London: snowy, 1°F."], "paris": ["Today in Paris: windy, 61°F."]}
    assert sources(mocked) == {"london": ["mock"], "paris": ["replay"]}
    assert ran(workdir) == ["get_weather London today", "get_weather Paris today"]  # nothing ran again
    write("names.yaml", "target: adk_agents:agent\ntools:\n  get_wether: {returns: 1}\n" + ITEMS)
    named = cli("validate", "names.yaml", env=agents)
    assert named.code == 2 and "(did you mean 'get_weather'?)" in named.stderr, named.stderr
