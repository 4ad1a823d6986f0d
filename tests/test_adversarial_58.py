"""Adversarial try (adv25) of hermetic worlds as users meet them (docs/hermetic.md: MCP tools, faults, tapes,
``--hermetic``; docs/targets/a2a.md): the real CLI, real MCP servers made with the ``mcp`` package, a real ADK agent
and ``evalcli.Agent`` against the loopback scripted model."""

from __future__ import annotations

import http.server
import json
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from tests.conftest import REPO, CliResult
from tests.framework_agents import needs
from tests.reliability_helpers import cli_env, run_cli
from tests.test_tools_mocks import answers, marker, tool_results

CITIES = ["London", "Paris", "Tokyo", "Rome", "Oslo", "Lima"]
ITEMS = "data:\n" + "".join(f'  - {{id: {c.lower()}, input: "What is the weather in {c}?"}}\n' for c in CITIES) + \
    'scorers:\n  - includes: "°F"\n'


def fault_table(result: CliResult) -> dict[str, list[tuple[str | None, str | None]]]:
    return {item: [(m.get("source"), m.get("fault")) for turn in turns for m in turn]
            for item, turns in tool_results(result).items()}


def test_a_tape_recorded_under_faults_replays_under_the_same_faults(write: Callable[..., Path],
                                                                  cli: Callable[..., CliResult],
                                                                  agent_env: dict[str, str], workdir: Path) -> None:
    """A tape records the world, faults go on top (docs/hermetic.md). A call a malformed fault hit did run live, but
    the tape left it out with the failures: replayed under the same faults and --hermetic, those conversations missed
    the tape (`has no mock (and the tape has no answer for it)`) though the record run knew the answer. The tape keeps
    the world's answer of such a call; a failure or timeout, which never ran, is still left out."""
    faults = "tools:\n  get_weather: {faults: {malformed_rate: 0.5, error_rate: 0.3, seed: 4}}\n"
    write("d.yaml", "target: tool_agents:agent\n" + faults + ITEMS)
    live = cli("run", "d.yaml", "--record-tools", "tapes", "--json", "-", env=agent_env)
    assert live.code == 0, live.stderr
    table = fault_table(live)
    assert {"malformed", "error", None} <= {fault for calls in table.values() for _, fault in calls}
    lines = [json.loads(line) for line in (workdir / "tapes" / "d.tape.jsonl").read_text().splitlines()]
    tape = {line["identity"]: line for line in lines}
    assert sorted(tape) == sorted(f"id:{item}" for item, calls in table.items() if calls != [("fault", "error")])
    for item, calls in table.items():
        if calls == [("fault", "malformed")]:  # the whole answer, as the live tool gave it
            assert tape[f"id:{item}"]["result"]["temperature_f"] == 70, tape[f"id:{item}"]
    write("r.yaml", "target: tool_agents:agent\n" + faults.replace("tools:\n", "tools:\n  replay: tapes/d.tape.jsonl\n")
          + ITEMS)
    ran = marker(workdir)
    replayed = cli("run", "r.yaml", "--hermetic", "--json", "-", env=agent_env)
    assert replayed.code == 0, replayed.stderr
    assert answers(replayed) == answers(live)
    assert {item: [fault for _, fault in calls] for item, calls in fault_table(replayed).items()} == \
        {item: [fault for _, fault in calls] for item, calls in table.items()}
    assert marker(workdir) == ran  # nothing ran live


ADK_AGENT = '''
import os
import pathlib

from google.adk.agents import Agent
from google.adk.models.lite_llm import LiteLlm

MARK = pathlib.Path(__file__).with_name("ran.txt")


def get_weather(city: str) -> dict:
    """Get the weather for a city."""
    with MARK.open("a") as f:
        f.write(f"get_weather {city}\\n")
    return {"city": city, "condition": "windy", "temperature_f": 61}


agent = Agent(name="weather", model=LiteLlm(model="openai/scripted", api_base=os.environ["OPENAI_BASE_URL"]),
              instruction="Answer with the forecast.", tools=[get_weather])
'''


@needs("google.adk")
def test_faults_reach_an_adk_agents_tools(write: Callable[..., Path], cli: Callable[..., CliResult],
                                          agent_env: dict[str, str], workdir: Path) -> None:
    """docs/hermetic.md applies faults to every adapter's tools, ADK's McpToolsets named; ADK's runner plugin asked
    the plan for mocks only, so `faults: {error_rate: 1}` left every call live and unmarked."""
    (workdir / "adk_agents.py").write_text(ADK_AGENT)
    write("d.yaml", "target: adk_agents:agent\ntools:\n  get_weather: {faults: {error_rate: 1, seed: 3}}\n" + ITEMS)
    failed = cli("run", "d.yaml", "--json", "-", env=agent_env)
    assert {item["status"] for item in failed.json["items"]} == {"error"}, failed.stderr
    assert "get_weather failed: service unavailable (injected fault)" in failed.json["items"][0]["error"]
    assert fault_table(failed)["london"] == [("fault", "error")]
    assert marker(workdir) == ""  # an injected failure never reaches the tool
    write("m.yaml", "target: adk_agents:agent\ntools:\n  get_weather:\n    returns: {condition: foggy, temperature_f: 50}"
                    "\n    faults: {malformed_rate: 1, seed: 3}\n" + ITEMS)
    spoiled = cli("run", "m.yaml", "--json", "-", env=agent_env)
    assert spoiled.code == 0, spoiled.stderr
    assert set(map(tuple, fault_table(spoiled).values())) == {(("fault", "malformed"),)}
    write("l.yaml", "target: adk_agents:agent\ntools:\n  get_weather: {faults: {malformed_rate: 1, seed: 3}}\n" + ITEMS)
    live = cli("run", "l.yaml", "--json", "-", env=agent_env)
    assert live.code == 0, live.stderr
    results = {item: turns[0][0] for item, turns in tool_results(live).items()}
    assert results["london"]["source"] == "fault" and results["london"]["fault"] == "malformed"
    content = results["london"]["content"]
    assert '"London' in content and "temperature_f" not in content  # the live answer, cut off halfway
    assert sorted(marker(workdir).splitlines()) == sorted(f"get_weather {c}" for c in CITIES)


MEDIA_SERVER = '''
from mcp.server.mcpserver import Image, MCPServer
from mcp.types import EmbeddedResource, ResourceLink, TextResourceContents

server = MCPServer("media")


@server.tool()
def get_weather(city: str, day: str = "today"):
    """Get the weather for a city."""
    if city == "London":
        return ["The forecast map:", Image(data=b"0123456789ab", format="png")]
    if city == "Paris":
        return EmbeddedResource(type="resource", resource=TextResourceContents(
            uri="file:///paris.txt", mime_type="text/plain", text="Paris: rain, 55°F"))
    if city == "Tokyo":
        return ResourceLink(type="resource_link", name="tokyo forecast", uri="https://example.com/tokyo.json")
    return {"city": city, "condition": "windy", "temperature_f": 61}


server.run("stdio")
'''

MEDIA_AGENT = f'''
import os
import evalcli

agent = evalcli.Agent(model="openai/scripted", api_base=os.environ["OPENAI_BASE_URL"],
                      mcp=[{{"command": [{sys.executable!r}, "media_server.py"], "name": "media"}}])
'''


def test_an_mcp_tools_images_and_resources_are_not_dropped(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                           agent_env: dict[str, str], workdir: Path) -> None:
    """An MCP tool's result is content blocks; only text blocks were read, so an image came back as '' (the model,
    the record and a tape saw an empty answer), and an embedded text resource's text or a resource link was lost."""
    (workdir / "media_server.py").write_text(MEDIA_SERVER)
    (workdir / "media_agent.py").write_text(MEDIA_AGENT)
    write("d.yaml", "target: media_agent:agent\n" + ITEMS)
    result = cli("run", "d.yaml", "--record-tools", "tapes", "--json", "-", env=agent_env)
    assert result.code == 0, result.stderr
    said = {item: turns[0][0]["content"] for item, turns in tool_results(result).items()}
    assert said["london"] == "The forecast map:\n[image: image/png, 12 bytes]"
    assert said["paris"] == "Paris: rain, 55°F"
    assert said["tokyo"] == "[resource link: tokyo forecast, https://example.com/tokyo.json]"
    assert "[image: image/png, 12 bytes]" in (workdir / "tapes" / "d.tape.jsonl").read_text()


class _Outside(http.server.BaseHTTPRequestHandler):
    """A proxy standing for the world outside the machine: it counts every request and answers none (502)."""

    seen: ClassVar[list[str]] = []

    def _any(self) -> None:
        type(self).seen.append(f"{self.command} {self.path}")
        self.send_response(502)
        self.end_headers()

    do_GET = do_POST = do_PUT = do_HEAD = do_CONNECT = _any

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def outside() -> Iterator[tuple[str, list[str]]]:
    """The URL of a loopback proxy every request bound off the machine goes to, and the requests it saw."""
    seen: ClassVar[list[str]] = []
    handler = type("Outside", (_Outside,), {"seen": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


@needs("google.adk")
def test_a_hermetic_run_of_a_target_that_imports_litellm_sends_nothing_off_the_machine(
        write: Callable[..., Path], agent_env: dict[str, str], workdir: Path,
        outside: tuple[str, list[str]]) -> None:
    """evalcli reads litellm's bundled price table and 'never fetches a price map' (docs/models.md), but it set
    LITELLM_LOCAL_MODEL_COST_MAP only when it imported litellm itself: a target that imports litellm first (ADK's
    LiteLlm, as in docs/hermetic.md's ADK example) made litellm fetch its price map from GitHub at import, during a
    --hermetic run (three attempts, seconds of back-off, when offline)."""
    (workdir / "adk_agents.py").write_text(ADK_AGENT)
    write("d.yaml", "target: adk_agents:agent\ntools:\n  get_weather: {returns: {condition: foggy, temperature_f: 50}}\n"
                    + ITEMS)
    proxy, seen = outside
    env = {key: value for key, value in cli_env(**agent_env).items() if key != "LITELLM_LOCAL_MODEL_COST_MAP"}
    env.update({name: proxy for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")})
    done = run_cli(["run", "d.yaml", "--hermetic", "-q"], workdir, env)
    assert done.returncode == 0, done.stderr
    assert seen == []


HANGING_SERVER = '''
import pathlib
import time

from mcp.server.mcpserver import MCPServer

starts = pathlib.Path(__file__).with_name("starts.txt")
with starts.open("a") as f:
    f.write("start\\n")
if len(starts.read_text().splitlines()) > 1:
    time.sleep(3600)  # listed once, then never answers initialize again

server = MCPServer("flaky")


@server.tool()
def get_weather(city: str, day: str = "today") -> dict:
    """Get the weather for a city."""
    return {"city": city, "condition": "windy", "temperature_f": 61}


server.run("stdio")
'''


def test_an_mcp_server_that_stops_answering_initialize_fails_the_call_not_the_run(
        write: Callable[..., Path], cli: Callable[..., CliResult], agent_env: dict[str, str], workdir: Path) -> None:
    """A stdio server listed fine when the agent was checked, then, started again for a turn, never answered
    initialize: the turn waited forever (no --turn-timeout), and so did the run. The turn's start has the listing's
    EVALCLI_MCP_TIMEOUT; past it the call is a tool error naming the server."""
    (workdir / "flaky_server.py").write_text(HANGING_SERVER)
    (workdir / "flaky_agent.py").write_text(MEDIA_AGENT.replace("media_server.py", "flaky_server.py"))
    write("d.yaml", "target: flaky_agent:agent\ndata:\n  - {id: london, input: \"What is the weather in London?\"}\n"
                    "scorers:\n  - includes: \"°F\"\n")
    result = cli("run", "d.yaml", "--json", "-", env={**agent_env, "EVALCLI_MCP_TIMEOUT": "20"})
    assert result.code == 0, result.stderr
    call = tool_results(result)["london"][0][0]
    assert call["is_error"] is True
    assert "flaky_server.py' did not start or answer within 20s (EVALCLI_MCP_TIMEOUT)" in call["content"]
    assert answers(result)["london"] == ["Sorry, I could not get a forecast for London."]


TIME_SERVER = '''
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("time")


@server.tool()
def get_time(city: str) -> str:
    """The time in a city."""
    return f"noon in {city}"


server.run("stdio")
'''

TWO_SERVERS = f'''
import os
import evalcli

agent = evalcli.Agent(model="openai/scripted", api_base=os.environ["OPENAI_BASE_URL"],
                      mcp=[{{"command": [{sys.executable!r}, "-m", "examples.mcp_weather_server"], "name": "tools",
                             "cwd": {str(REPO)!r}}},
                           {{"command": [{sys.executable!r}, "time/tools.py"]}}])
'''


def test_two_mcp_servers_of_one_name_are_not_mocked_as_one(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                           agent_env: dict[str, str], workdir: Path) -> None:
    """An MCP server's name defaults to its script or module (or its URL's host: two local HTTP servers are both
    '127.0.0.1'). Two servers of one name were merged: `{mcp: tools, from_tape: ...}` answered both servers' tools
    from the tape, with nothing to say that one of them was not meant. It is a validation error naming both."""
    (workdir / "time").mkdir()
    (workdir / "time" / "tools.py").write_text(TIME_SERVER)
    (workdir / "two_agent.py").write_text(TWO_SERVERS)
    (workdir / "t.tape.jsonl").write_text('{"identity": "id:x", "turn": 0, "call": 0, "tool": "get_weather", '
                                          '"arguments": {"city": "Rome"}, "result": "sunny"}\n')
    write("d.yaml", "target: two_agent:agent\ntools:\n  w: {mcp: tools, from_tape: t.tape.jsonl}\n" + ITEMS)
    result = cli("validate", "d.yaml", env=agent_env)
    assert result.code == 2, result.stderr
    assert "2 of the agent's MCP servers are named 'tools'" in result.stderr
    assert "examples.mcp_weather_server" in result.stderr and "time/tools.py" in result.stderr


LEAKY_SERVER = '''
import os
import sys

print(f"starting with key {os.environ.get('WEATHER_API_KEY')}", file=sys.stderr, flush=True)

from mcp.server.mcpserver import MCPServer

server = MCPServer("leaky")


@server.tool()
def get_weather(city: str, day: str = "today") -> dict:
    """Get the weather for a city."""
    print(f"calling upstream for {city} with key={os.environ.get('WEATHER_API_KEY')}", file=sys.stderr, flush=True)
    return {"city": city, "condition": "windy", "temperature_f": 61}


server.run("stdio")
'''

LEAKY_AGENT = f'''
import os
import evalcli

agent = evalcli.Agent(model="openai/scripted", api_base=os.environ["OPENAI_BASE_URL"],
                      mcp=[{{"command": [{sys.executable!r}, "leaky_server.py"], "name": "leaky",
                             "env": {{"WEATHER_API_KEY": "wk-LEAKYSECRET-0123456789abcdef"}}}}])
'''


def test_what_an_mcp_server_prints_is_redacted(write: Callable[..., Path], cli: Callable[..., CliResult],
                                               agent_env: dict[str, str], workdir: Path) -> None:
    """A key in an MCP server's env is a secret of every output (docs/hermetic.md), but a stdio server evalcli started
    wrote its stderr straight to the terminal: a server logging its key printed it, unredacted, in the CI log."""
    (workdir / "leaky_server.py").write_text(LEAKY_SERVER)
    (workdir / "leaky_agent.py").write_text(LEAKY_AGENT)
    write("d.yaml", "target: leaky_agent:agent\ndata:\n  - {id: london, input: \"What is the weather in London?\"}\n"
                    "scorers:\n  - includes: \"°F\"\n")
    result = cli("run", "d.yaml", env=agent_env)
    assert result.code == 0, result.stderr
    assert "LEAKYSECRET" not in result.stderr + result.stdout
    assert "calling upstream for London with key=[redacted]" in result.stderr  # the server's own lines still shown


def test_a_mocks_delay_past_the_faults_timeout_times_out(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                         agent_env: dict[str, str]) -> None:
    """`faults: {timeout: 1}` makes 'a call whose latency would pass this fail after 1 s' (docs/hermetic.md), but only
    the injected latency was weighed: a mock with `delay: 4` (a slow service) waited 4 s and answered."""
    write("d.yaml", "target: tool_agents:agent\ntools:\n  get_weather:\n    returns: {condition: foggy, temperature_f: 50}\n"
                    "    delay: 4\n    faults: {timeout: 1}\n"
                    "data:\n  - {id: london, input: \"What is the weather in London?\"}\nscorers:\n  - includes: \"°F\"\n")
    result = cli("run", "d.yaml", "--json", "-", env=agent_env)
    assert result.code == 0, result.stderr
    call = tool_results(result)["london"][0][0]
    assert (call["source"], call["fault"], call["is_error"]) == ("fault", "timeout", True)
    assert "get_weather timed out after 1s (injected fault)" in call["content"]
    assert answers(result)["london"] == ["Sorry, I could not get a forecast for London."]


@pytest.mark.parametrize("how", ["--hermetic", "unmocked: error"])
def test_a_refused_call_says_it_was_refused_not_mock(how: str, write: Callable[..., Path],
                                                     cli: Callable[..., CliResult], agent_env: dict[str, str],
                                                     workdir: Path) -> None:
    """A call no mock or tape answered and that did not run is recorded with ``"source": "refused"``
    (docs/hermetic.md): it was recorded as ``mock``, so ``show`` wrote "(mock)" beside "has no mock"."""
    header = "target: tool_agents:agent\n" + ("unmocked: error\n" if how.startswith("unmocked") else "")
    write("d.yaml", header + ITEMS)
    result = cli("run", "d.yaml", "--json", "-", *(["--hermetic"] if how == "--hermetic" else []), env=agent_env)
    assert result.json is not None, result.stderr
    sources = {m.get("source") for calls in tool_results(result).values() for turn in calls for m in turn}
    assert sources == {"refused"}, (sources, result.stdout[-2000:])
    assert marker(workdir) == ""  # nothing ran live
