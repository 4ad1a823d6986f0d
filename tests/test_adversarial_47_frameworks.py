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
