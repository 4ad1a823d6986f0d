"""Adversarial checks of framework agents' MCP servers (docs/hermetic.md, "MCP tools"), through the real CLI.

A toolset with a name prefix (PydanticAI ``.prefixed('wx')``, ADK ``tool_name_prefix='wx'``) shows the model
``wx_get_weather`` for the server's ``get_weather``: mocks, whole-server tapes, ``--hermetic`` and "did you mean"
must still know which server the call goes to. The MCP server is the real ``examples/mcp_weather_server.py``, which
logs each call it really runs; the model is the loopback scripted model, shown the prefixed name.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from tests.conftest import REPO, CliResult
from tests.framework_agents import needs
from tests.llm_server import LLMServer, Reply, Request, scripted_weather
from tests.test_tools_mcp import ITEMS, mcp_env, ran, sources  # noqa: F401 - fixtures
from tests.test_tools_mocks import answers

PREFIXED_PYDANTIC = f'''
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
agent = Agent(model, instructions="Answer with the forecast.", toolsets=[weather.prefixed("wx")])
'''

PREFIXED_ADK = f'''
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
              tools=[McpToolset(connection_params=StdioConnectionParams(server_params=server, timeout=120),
                                tool_name_prefix="wx")])
'''


def prefixed_model(request: Request) -> Reply:
    """The scripted weather model, for an agent that offers ``get_weather`` as ``wx_get_weather``."""
    body = json.loads(json.dumps(request.body).replace("wx_get_weather", "get_weather"))
    reply = scripted_weather(replace(request, body=body))
    assert isinstance(reply.body, dict)
    return replace(reply, body=json.loads(json.dumps(reply.body).replace("get_weather", "wx_get_weather")))


@pytest.fixture
def prefixed(workdir: Path, mcp_env: dict[str, str], llm_server: LLMServer) -> dict[str, str]:  # noqa: F811
    (workdir / "pai_prefixed.py").write_text(PREFIXED_PYDANTIC)
    (workdir / "adk_prefixed.py").write_text(PREFIXED_ADK)
    (workdir / "agents.py").unlink(missing_ok=True)
    llm_server.responder = prefixed_model
    return mcp_env


TARGETS = [pytest.param("pai_prefixed:agent", "weather", marks=needs("fastmcp"), id="pydantic-ai"),
           pytest.param("adk_prefixed:agent", "wx", marks=needs("google.adk"), id="adk")]


@pytest.mark.parametrize(("target", "server"), TARGETS)
def test_a_prefixed_toolset_is_recorded_mocked_replayed_and_hermetic(
        write: Callable[..., Path], cli: Callable[..., CliResult], prefixed: dict[str, str], workdir: Path,
        target: str, server: str) -> None:
    write("live.yaml", f"target: {target}\n" + ITEMS)
    live = cli("run", "live.yaml", "--record-tools", "tapes", "--json", "-", env=prefixed)
    assert live.code == 0, live.stderr
    assert answers(live) == {"london": ["Today in London: windy, 61°F."], "paris": ["Today in Paris: windy, 61°F."]}
    assert ran(workdir) == ["get_weather London today", "get_weather Paris today"]
    write("names.yaml", f"target: {target}\ntools:\n  wx_get_wether: {{returns: 1}}\n" + ITEMS)
    named = cli("validate", "names.yaml", env=prefixed)
    assert named.code == 2 and "(did you mean 'wx_get_weather'?)" in named.stderr, named.stderr
    write("mocked.yaml", f"target: {target}\ntools:\n  wx_get_weather:\n    - when: {{city: London}}\n"
                         "      returns: {condition: snowy, temperature_f: 1}\n"
                         f"  weather: {{mcp: {server}, from_tape: tapes/live.tape.jsonl}}\n"
                         + ITEMS.replace("Paris?", "Paris?\n  - id: rome\n    input: What is the weather in Rome?"))
    mocked = cli("run", "mocked.yaml", "--hermetic", "--json", "-", env=prefixed)
    assert mocked.code == 4, mocked.stderr  # Rome is on no tape: under a whole-server mock, the conversation's error
    said = answers(mocked)
    assert said["london"] == ["Today in London: snowy, 1°F."] and said["paris"] == ["Today in Paris: windy, 61°F."]
    assert sources(mocked)["london"] == ["mock"] and sources(mocked)["paris"] == ["replay"]
    rome = {item["id"]: item for item in mocked.json["items"]}["rome"]
    assert rome["status"] == "error" and f"the MCP server {server} is mocked from" in rome["error"], rome
    assert ran(workdir) == ["get_weather London today", "get_weather Paris today"]  # nothing ran again


SECRET = "wk-live-0123456789abcdef"
"""A key the agent's code hands its MCP server (from a vault, say): never in the evalcli process's environment."""

LEAKY_SERVER = '''
import os
from mcp.server.mcpserver import MCPServer

server = MCPServer("leaky")


@server.tool()
def get_weather(city: str, day: str = "today") -> dict[str, object]:
    """Get the weather for a city (and, carelessly, the server's key)."""
    return {"city": city, "day": day, "condition": "windy " + os.environ["WEATHER_API_KEY"], "temperature_f": 61}


server.run("stdio")
'''

LEAKY_AGENTS = f'''
import os
import sys
from pathlib import Path

HERE = str(Path(__file__).parent)
ENV = {{"PATH": os.environ.get("PATH", ""), "PYTHONPATH": {str(REPO)!r}, "WEATHER_API_KEY": {SECRET!r}}}


def _pydantic_agent():
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("scripted", provider=OpenAIProvider(base_url=os.environ["OPENAI_BASE_URL"],
                                                                api_key=os.environ["OPENAI_API_KEY"]))
    leaky = MCPToolset(StdioTransport(sys.executable, ["leaky_server.py"], cwd=HERE, env=ENV), id="leaky",
                       init_timeout=120, read_timeout=120)
    return Agent(model, instructions="Answer with the forecast.", toolsets=[leaky])


def _adk_agent():
    from google.adk.agents import Agent
    from google.adk.models.lite_llm import LiteLlm
    from google.adk.tools.mcp_tool import McpToolset, StdioConnectionParams
    from mcp import StdioServerParameters

    server = StdioServerParameters(command=sys.executable, args=["leaky_server.py"], cwd=HERE, env=ENV)
    return Agent(name="weather", model=LiteLlm(model="openai/scripted", api_base=os.environ["OPENAI_BASE_URL"]),
                 instruction="Answer with the forecast.",
                 tools=[McpToolset(connection_params=StdioConnectionParams(server_params=server, timeout=120))])


try:  # each venv has one of the frameworks
    pydantic_agent = _pydantic_agent()
except ImportError:
    pass
try:
    adk_agent = _adk_agent()
except ImportError:
    pass
'''


@pytest.mark.parametrize("target", [pytest.param("leaky_agents:pydantic_agent", marks=needs("fastmcp"), id="pai"),
                                    pytest.param("leaky_agents:adk_agent", marks=needs("google.adk"), id="adk")])
def test_a_key_the_agent_gives_its_mcp_server_is_in_no_output(
        write: Callable[..., Path], cli: Callable[..., CliResult], workdir: Path, mcp_env: dict[str, str],  # noqa: F811
        target: str) -> None:
    (workdir / "leaky_server.py").write_text(LEAKY_SERVER)
    (workdir / "leaky_agents.py").write_text(LEAKY_AGENTS)
    (workdir / "agents.py").unlink(missing_ok=True)
    write("d.yaml", f"target: {target}\n" + ITEMS)
    result = cli("run", "d.yaml", "--record-tools", "tapes", "--json", "-", env=mcp_env)
    assert result.code == 0, result.stderr
    assert "windy [redacted]" in (workdir / "tapes" / "d.tape.jsonl").read_text()
    # every file but the user's own code (its source and Python's bytecode of it hold the key by design)
    outputs = [result.stdout, result.stderr, *(p.read_bytes().decode("utf-8", "replace") for p in workdir.rglob("*")
                                               if p.is_file() and p.suffix not in (".py", ".pyc"))]
    assert not [text for text in outputs if SECRET in text]


TWIN_ADK = f'''
import os
import sys
from google.adk.agents import Agent
from google.adk.models.lite_llm import LiteLlm
from google.adk.tools.mcp_tool import McpToolset, StdioConnectionParams
from mcp import StdioServerParameters


def toolset(name):
    server = StdioServerParameters(command=sys.executable, args=["-m", "examples.mcp_weather_server"],
                                   cwd={str(REPO)!r}, env={{**os.environ, "WHICH": name}})
    return McpToolset(connection_params=StdioConnectionParams(server_params=server, timeout=120))


agent = Agent(name="weather", model=LiteLlm(model="openai/scripted", api_base=os.environ["OPENAI_BASE_URL"]),
              instruction="Answer with the forecast.", tools=[toolset("a"), toolset("b")])
'''


@needs("google.adk")
def test_two_servers_listing_one_tool_name_are_a_validation_error(
        write: Callable[..., Path], cli: Callable[..., CliResult], mcp_env: dict[str, str],  # noqa: F811
        workdir: Path) -> None:
    (workdir / "twin_agents.py").write_text(TWIN_ADK)
    write("d.yaml", "target: twin_agents:agent\n" + ITEMS)
    result = cli("validate", "d.yaml", env=mcp_env)
    assert result.code == 2, result.stdout + result.stderr
    assert "two of the agent's MCP servers list a tool 'get_weather'" in result.stderr, result.stderr
    assert "tool_name_prefix='x'" in result.stderr
    assert "Traceback" not in result.stderr
