"""Adversarial try, second round (adv40), of hermetic worlds as users meet them: A2A agents served by the installed
``a2a-sdk`` as its defaults make them (docs/targets/a2a.md), MCP servers made with the ``mcp`` package that fail as
real ones do (docs/hermetic.md, "MCP tools"), and seeded faults counted against their documented function. Real CLI
runs in subprocesses, real loopback servers. The first round is tests/test_adversarial_58.py."""

from __future__ import annotations

import http.server
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, CliResult
from tests.framework_agents import needs
from tests.llm_server import LLMServer, Reply, Request
from tests.reliability_helpers import SUBPROCESS_TIMEOUT, cli_env, run_cli

A2A_TOKEN = "a2a-tok-SECRET-0123456789abcdef"

A2A_SERVER = r'''
import re
import sys

import uvicorn
from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part, Role, TaskState
from starlette.applications import Starlette

VERSION, PORT = sys.argv[1], int(sys.argv[2])
CITIES = {}


class Weather(AgentExecutor):
    async def execute(self, context, event_queue):
        task = context.current_task or new_task_from_user_message(context.message)
        if context.current_task is None:
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = context.get_user_input()
        said = lambda words: new_text_message(words, context_id=task.context_id, task_id=task.id, role=Role.ROLE_AGENT)
        if "fail" in text:
            key = context.call_context.state.get("headers", {}).get("authorization", "")
            await updater.update_status(TaskState.TASK_STATE_FAILED, message=said(f"upstream refused {key}"))
            return
        found = re.search(r"\b([A-Z][a-z]+)\b", text.replace("What", ""))
        if found:
            CITIES[task.context_id] = found.group(1)
        if task.context_id not in CITIES:
            await updater.update_status(TaskState.TASK_STATE_INPUT_REQUIRED, message=said("Which city?"))
            return
        day = "Tomorrow" if "tomorrow" in text else "Today"
        await updater.add_artifact([new_text_part(f"{day} in {CITIES[task.context_id]}: windy, 61F.")], name="forecast")
        await updater.add_artifact([Part(raw=b"\x89PNG", filename="map.png", media_type="image/png")], name="map")
        await updater.update_status(TaskState.TASK_STATE_COMPLETED)

    async def cancel(self, context, event_queue):
        raise NotImplementedError


base = f"http://127.0.0.1:{PORT}"
card = AgentCard(name="weather", description="Forecasts.", version="1.0",
                 supported_interfaces=[AgentInterface(url=base + "/", protocol_binding="JSONRPC", protocol_version=VERSION)],
                 capabilities=AgentCapabilities(streaming=False), default_input_modes=["text"],
                 default_output_modes=["text"], skills=[AgentSkill(id="f", name="f", description="f", tags=["f"])])
handler = DefaultRequestHandler(agent_executor=Weather(), task_store=InMemoryTaskStore(), agent_card=card)
routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/", enable_v0_3_compat=VERSION == "0.3")]
uvicorn.run(Starlette(routes=routes), host="127.0.0.1", port=PORT, log_level="warning")
'''
"""An A2A weather agent made with ``a2a-sdk`` (``python a2a_server.py VERSION PORT``): its card's JSON-RPC interface
says VERSION (none: ""); only "0.3" serves 0.3 too, the others are the SDK's default server. It asks "Which city?"
(``input-required``) until a conversation names one, remembers a conversation's city by its ``contextId``, answers
with two artifacts (the forecast's text, and a map as a file part), and fails the task of a message saying "fail",
quoting the request's Authorization header."""


@pytest.fixture
def a2a_server(workdir: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """The URL of ``A2A_SERVER`` serving the protocol version of the test's parameter."""
    (workdir / "a2a_server.py").write_text(A2A_SERVER)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen([sys.executable, "a2a_server.py", request.param, str(port)], cwd=workdir,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + SUBPROCESS_TIMEOUT
        while time.monotonic() < deadline and process.poll() is None:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=SUBPROCESS_TIMEOUT)


def replies(result: CliResult) -> dict[str, list[str]]:
    return {item["id"]: [m["content"] for turn in item["turns"] for m in turn["output"] if m["role"] == "assistant"]
            for item in result.json["items"]}


@pytest.mark.parametrize(("a2a_server", "blocking"), [("1.0", "true"), ("1.0", "false"), ("", "true"), ("0.3", "true")],
                         indirect=["a2a_server"])
def test_an_a2a_sdk_agent_as_its_defaults_make_it(a2a_server: str, blocking: str, write: Callable[..., Path],
                                                   cli: Callable[..., CliResult]) -> None:
    """docs/targets/a2a.md: "anything built with the a2a-sdk package". The installed a2a-sdk (1.x) serves A2A 1.0 by
    default (``SendMessage``, ``GetTask``, an ``A2A-Version`` header, results as ``{"task": ...}``); evalcli spoke
    only 0.3's ``message/send``, so such an agent answered every turn "Method not found" (-32601) and every
    conversation errored. (A card that names no version, "", is asked in 0.3 first, then in 1.0.) And a file part of
    an artifact (a map, a report) was dropped: the turn's answer lost it with no trace."""
    write("d.yaml", f"""
        target:
          a2a: {{url: "{a2a_server}", headers: {{Authorization: "Bearer ${{A2A_TOKEN}}"}}, blocking: {blocking},
                 poll_interval: 0.1}}
        concurrency: 2
        data:
          - id: asks
            inputs: ["What is the weather?", "London", "What about tomorrow?"]
          - id: paris
            inputs: ["What is the weather in Paris?", "What about tomorrow?"]
          - id: fails
            input: please fail
        scorers:
          - includes: "61F"
    """)
    result = cli("run", "d.yaml", "--json", "-", env={"A2A_TOKEN": A2A_TOKEN})
    assert result.code == 4, result.stderr  # "fails" errored
    said = replies(result)
    map_part = "[file: map.png, image/png, 4 bytes]"
    assert said["asks"] == ["Which city?", f"Today in London: windy, 61F.\n\n{map_part}",
                            f"Tomorrow in London: windy, 61F.\n\n{map_part}"]
    assert said["paris"] == [f"Today in Paris: windy, 61F.\n\n{map_part}", f"Tomorrow in Paris: windy, 61F.\n\n{map_part}"]
    error = {item["id"]: item["error"] for item in result.json["items"]}["fails"]
    assert " failed: upstream refused [redacted]" in error, error
    assert "SECRET" not in result.stdout + result.stderr


DYING_SERVER = '''
import os
import sys

print(f"fatal: cannot open the forecast db with key={os.environ['WEATHER_API_KEY']}; set WEATHER_DB", file=sys.stderr,
      flush=True)
sys.exit(1)
'''

DYING_AGENT = f'''
import os
import evalcli

agent = evalcli.Agent(model="openai/scripted", api_base=os.environ["OPENAI_BASE_URL"],
                      mcp=[{{"command": [{sys.executable!r}, "dying_server.py", "--api-key", open("key.txt").read().strip(),
                                         "--auth-token=vault-TOKENSECRET-0123456789"], "name": "wx",
                             "env": {{"WEATHER_API_KEY": "wk-DYINGSECRET-0123456789abcdef"}}}}])
'''


def test_an_mcp_server_that_exits_at_start_is_named_with_what_it_said(write: Callable[..., Path],
                                                                      cli: Callable[..., CliResult],
                                                                      workdir: Path) -> None:
    """A stdio server that exits with code 1 at start, its reason on stderr (a missing setting): the validation error
    said only the MCP client's "MCPError: Connection closed", and with -q (or in a CI log read from the error up) the
    reason was nowhere. The error quotes the server's last lines (redacted: its key is a secret of every output), and
    nothing is written (exit 2, no --json file). A key given on the server's command line (`--api-key KEY`, read from
    a vault file) was printed with the command in that error: a secret-named option's value is a secret too."""
    (workdir / "dying_server.py").write_text(DYING_SERVER)
    (workdir / "key.txt").write_text("vault-ARGSECRET-0123456789\n")
    (workdir / "dying_agent.py").write_text(DYING_AGENT)
    write("d.yaml", "target: dying_agent:agent\ndata:\n  - {id: london, input: \"What is the weather in London?\"}\n")
    result = cli("run", "d.yaml", "-q", "--json", "out.json", env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert result.code == 2, result.stderr
    assert "d.yaml:1:9: the MCP server" in result.stderr and "did not start or list its tools" in result.stderr
    assert "(it printed: fatal: cannot open the forecast db with key=[redacted]; set WEATHER_DB)" in result.stderr
    assert "DYINGSECRET" not in result.stdout + result.stderr
    assert "dying_server.py --api-key [redacted] --auth-token=[redacted]'" in result.stderr
    assert "ARGSECRET" not in result.stderr and "TOKENSECRET" not in result.stderr
    assert "Traceback" not in result.stderr
    assert not (workdir / "out.json").exists()


SDK_AGENT = """
import os
from agents import Agent, OpenAIChatCompletionsModel, function_tool
from openai import AsyncOpenAI


@function_tool
def get_weather(city: str) -> str:
    \"\"\"Get the weather for a city.\"\"\"
    return f"{city}: windy, 61°F"


client = AsyncOpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"])
agent = Agent(name="weather", instructions="Answer with the forecast.", tools=[get_weather],
              model=OpenAIChatCompletionsModel(model="scripted", openai_client=client))
"""
"""An Agents SDK app as its README writes one: tracing left as the SDK sets it (on, exported to OpenAI)."""


@pytest.fixture
def outside() -> Iterator[tuple[str, list[str]]]:
    """A loopback proxy standing for everything off the machine: the URL, and every request it saw (it answers 502)."""
    seen: list[str] = []

    class Outside(http.server.BaseHTTPRequestHandler):
        def _any(self) -> None:
            seen.append(f"{self.command} {self.path}")
            self.send_response(502)
            self.end_headers()

        do_GET = do_POST = do_PUT = do_CONNECT = _any

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Outside)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


@needs("agents")
def test_a_hermetic_run_of_an_agents_sdk_app_sends_no_trace_to_openai(write: Callable[..., Path], workdir: Path,
                                                                      agent_env: dict[str, str],
                                                                      outside: tuple[str, list[str]]) -> None:
    """The Agents SDK exports every run's trace to api.openai.com unless the app turns tracing off. A --hermetic run
    of such an app (its model and every tool call on the machine) still sent each conversation's trace, its inputs
    and tool results, to OpenAI with the app's key (three attempts: `CONNECT api.openai.com:443`), and printed
    "[non-fatal] Tracing request failed" offline. Under --hermetic the turns run with tracing off."""
    (workdir / "agents.py").unlink()  # the workdir's sample targets would shadow the SDK's package
    (workdir / "sdk_agent.py").write_text(SDK_AGENT)
    write("d.yaml", "target: sdk_agent:agent\ntools:\n  get_weather: {returns: \"snowy, 1°F\"}\n"
                    "data:\n  - {id: london, input: \"What is the weather in London?\"}\nscorers:\n  - includes: \"1°F\"\n")
    proxy, seen = outside
    env = {key: value for key, value in cli_env(**agent_env).items() if key != "OPENAI_AGENTS_DISABLE_TRACING"}
    env.update({name: proxy for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")})
    done = run_cli(["run", "d.yaml", "--hermetic", "--json", "-"], workdir, env)
    assert done.returncode == 0, done.stderr
    assert seen == []
    assert "Tracing request failed" not in done.stdout + done.stderr


TWINS = f"""
import os
import evalcli

SERVER = {{"command": [{sys.executable!r}, "-m", "examples.mcp_weather_server"], "cwd": {str(REPO)!r},
          "env": {{**os.environ, "WEATHER_MCP_LOG": os.path.abspath("mcp.log")}}}}
clash = evalcli.Agent(model="openai/scripted", api_base=os.environ["OPENAI_BASE_URL"],
                      mcp=[{{**SERVER, "name": "live"}}, {{**SERVER, "name": "local"}}])
twins = evalcli.Agent(model="openai/scripted", api_base=os.environ["OPENAI_BASE_URL"],
                      mcp=[{{**SERVER, "name": "live", "prefix": "wx"}}, {{**SERVER, "name": "local"}}])
"""


def calls_wx_get_weather(request: Request) -> Reply:
    """A model that calls ``wx_get_weather`` for London, then says what the tool said."""
    from examples.frameworks.scripted_model import completion

    messages = request.body["messages"]
    if messages[-1]["role"] == "tool":
        return Reply(body=completion({"role": "assistant", "content": f"It said: {messages[-1]['content']}"}, "m"))
    call = {"id": "c1", "type": "function", "function": {"name": "wx_get_weather", "arguments": '{"city": "London"}'}}
    return Reply(body=completion({"role": "assistant", "content": None, "tool_calls": [call]}, "m"))


def test_two_mcp_servers_listing_one_tool_name_can_be_told_apart(write: Callable[..., Path],
                                                                 cli: Callable[..., CliResult], workdir: Path,
                                                                 agent_env: dict[str, str],
                                                                 llm_server: LLMServer) -> None:
    """Two MCP servers of an evalcli.Agent that both list `get_weather` (two search servers, a server and its staging
    twin) were refused with "two tools are named 'get_weather' (<one server> lists one)", hint "rename one of them":
    neither server was named as the other, and an MCP server's tools cannot be renamed from the agent, so such an
    agent could not be evaluated at all. The error names both servers, and `prefix` (as PydanticAI's and ADK's
    prefixed toolsets, docs/hermetic.md) offers one server's tools as `wx_NAME`, called on the server by their own
    name. A key an mcp entry does not have (`evn` for `env`) was ignored: the server started without it."""
    (workdir / "twins.py").write_text(TWINS)
    write("clash.yaml", "target: twins:clash\ndata:\n  - {id: london, input: \"What is the weather in London?\"}\n"
                         "scorers:\n  - includes: windy\n")
    clash = cli("validate", "clash.yaml", env=agent_env)
    assert clash.code == 2, clash.stderr
    assert "two tools are named 'get_weather'" in clash.stderr and clash.stderr.count("examples.mcp_weather_server") == 2
    assert '"prefix": "wx"' in clash.stderr
    llm_server.responder = calls_wx_get_weather
    write("d.yaml", "target: twins:twins\ntools:\n  get_weather: {returns: never}\ndata:\n"
                    "  - {id: london, input: \"What is the weather in London?\"}\nscorers:\n  - includes: windy\n")
    result = cli("run", "d.yaml", "--json", "-", env=agent_env)
    assert result.code == 0, result.stderr
    said = [m["content"] for turn in result.json["items"][0]["turns"] for m in turn["output"] if m["role"] == "assistant"]
    assert said[-1].startswith("It said: ") and '"city": "London"' in said[-1] and "windy" in said[-1], said
    assert (workdir / "mcp.log").read_text() == "get_weather London today\n"  # the server's own name for it
    (workdir / "typo.py").write_text(TWINS.replace('"env":', '"evn":'))
    write("t.yaml", "target: typo:twins\ndata:\n  - {id: london, input: \"What is the weather in London?\"}\n"
                     "scorers:\n  - includes: windy\n")
    typo = cli("validate", "t.yaml", env=agent_env)
    assert typo.code == 2 and "an mcp server has no key 'evn'" in typo.stderr, typo.stderr
