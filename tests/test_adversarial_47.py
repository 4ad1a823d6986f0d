"""Hermetic worlds tried as demanding users would (docs/hermetic.md, docs/targets/a2a.md), through the real CLI:
each test here failed before the fix it names.

The MCP server is a real one made with the ``mcp`` package (written into the test's folder), whose tool logs every
time it really runs and echoes the key its environment gave it; the A2A agent is a real ``a2a-sdk`` server
(``tests/a2a_waiting_agent.py``) whose task waits for the user's input.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalcli.dataset.tools import parse_tools
from evalcli.dataset.yamlsrc import load_yaml
from evalcli.errors import Problem
from evalcli.tools import Recorded, ToolPlan, canonical
from evalcli.tools.fromtape import tools_yaml
from tests.conftest import REPO, CliResult
from tests.llm_server import LLMServer, scripted_weather
from tests.reliability_helpers import serving

KEY = "upk-9f8e7d6c5b4a39281716"
"""The MCP server's upstream key: read from a file by the agent's code, handed to the server in its environment."""

SERVER = '''
import os
from mcp.server.mcpserver import MCPServer

server = MCPServer("wx")


@server.tool()
def get_weather(city: str, day: str = "today") -> dict:
    """Get the weather for a city."""
    with open(os.environ["WX_LOG"], "a") as f:
        f.write(f"get_weather {city} {day}\\n")
    return {"city": city, "condition": "windy", "temperature_f": 61, "key_used": os.environ["WX_API_KEY"]}


server.run("stdio")
'''

AGENTS = f'''
import os
from pathlib import Path

import evalcli

KEY = Path(__file__).with_name("upstream.key").read_text().strip()   # from a file: evalcli cannot know it otherwise
SERVER = [{sys.executable!r}, str(Path(__file__).with_name("wx_server.py"))]
ENV = {{"WX_API_KEY": KEY, "WX_LOG": os.environ["WX_LOG"]}}
agent = evalcli.Agent(model="openai/scripted", api_base=os.environ["OPENAI_BASE_URL"],
                      mcp=[{{"command": SERVER, "name": "wx", "env": ENV}}])

'''

SDK_AGENT = '''
import os

from agents import Agent, OpenAIChatCompletionsModel, set_tracing_disabled
from agents.mcp import MCPServerStdio
from openai import AsyncOpenAI

from wx_agents import ENV, SERVER

set_tracing_disabled(True)
server = MCPServerStdio(params={"command": SERVER[0], "args": SERVER[1:], "env": ENV}, name="wx",
                        client_session_timeout_seconds=120)
model = OpenAIChatCompletionsModel(model="scripted", openai_client=AsyncOpenAI(base_url=os.environ["OPENAI_BASE_URL"]))
agent = Agent(name="weather", instructions="Answer with the forecast.", model=model, mcp_servers=[server])
'''

ITEMS = """
data:
  - id: london
    input: What is the weather in London?
scorers:
  - includes: "°F"
"""


@pytest.fixture
def mcp_env(workdir: Path, llm_server: LLMServer) -> dict[str, str]:
    (workdir / "agents.py").unlink(missing_ok=True)  # the workdir's sample targets would shadow the Agents SDK
    (workdir / "wx_server.py").write_text(SERVER)
    (workdir / "wx_agents.py").write_text(AGENTS)
    (workdir / "wx_sdk.py").write_text(SDK_AGENT)
    (workdir / "upstream.key").write_text(KEY + "\n")
    llm_server.responder = scripted_weather
    return {"OPENAI_BASE_URL": llm_server.url, "OPENAI_API_KEY": "sk-test-not-a-real-key-0123456789",
            "NO_PROXY": "127.0.0.1", "WX_LOG": str(workdir / "wx.log")}


@pytest.mark.parametrize("target", ["wx_agents:agent", "wx_sdk:agent"])
def test_a_secret_in_an_mcp_servers_env_is_never_stored(target: str, write: Callable[..., Path],
                                                        cli: Callable[..., CliResult], mcp_env: dict[str, str],
                                                        workdir: Path) -> None:
    """Before: the key a server's ``env`` held under a secret name was not a secret, so the tool's answer carried it
    into the tape, the database, the JSON and the mocks ``from-tape`` wrote."""
    write("live.yaml", f"target: {target}\n" + ITEMS)
    live = cli("run", "live.yaml", "--record-tools", "tapes", "--json", "-", env=mcp_env)
    assert live.code == 0, live.stderr
    assert (workdir / "wx.log").read_text().split("\n")[0] == "get_weather London today"  # the server really ran
    tape = (workdir / "tapes" / "live.tape.jsonl").read_text()
    assert "key_used" in tape and "[redacted]" in tape
    mocks = cli("mocks", "from-tape", "tapes/live.tape.jsonl", env=mcp_env)
    assert mocks.code == 0, mocks.stderr
    shown = cli("show", "latest", "london", env=mcp_env)
    for text in (live.stdout, live.stderr, tape, mocks.stdout, shown.stdout, (workdir / "evalcli.db").read_bytes().decode(
            "utf-8", "replace")):
        assert KEY not in text


def test_mocks_from_a_redacted_tape_answer_the_call_that_carries_the_secret(write: Callable[..., Path],
                                                                          cli: Callable[..., CliResult],
                                                                          workdir: Path) -> None:
    """Before: ``from-tape`` wrote ``when: {token: '[redacted]'}``, which no real call (carrying the token) matches,
    so the mocks it wrote answered nothing and ``--hermetic`` failed every conversation."""
    (workdir / "svc.py").write_text('''
import os
from pathlib import Path

import evalcli


@evalcli.tool
def lookup(token: str, q: str) -> dict:
    with Path(__file__).with_name("svc.log").open("a") as f:
        f.write(q + "\\n")
    return {"answer": f"about {q}"}


def agent(input: str) -> str:
    return lookup(token=os.environ["SVC_TOKEN"], q=input)["answer"]
''')
    items = "data:\n  - {id: a, input: cats}\n  - {id: b, input: dogs}\ngates:\n  - includes: about\n"
    env = {"SVC_TOKEN": "svc-tok-0123456789abcdef"}
    write("record.yaml", "target: svc:agent\n" + items)
    assert cli("run", "record.yaml", "--record-tools", "tapes", env=env).code == 0
    made = cli("mocks", "from-tape", "tapes/record.tape.jsonl", "-o", "tools.yaml", env=env)
    assert made.code == 0, made.stderr
    block = (workdir / "tools.yaml").read_text()
    assert "svc-tok" not in block
    (workdir / "svc.log").unlink()
    write("mocked.yaml", "target: svc:agent\nunmocked: error\n" + block + items)
    mocked = cli("run", "mocked.yaml", "--hermetic", "--json", "-", env=env)
    assert mocked.code == 0, mocked.stderr + mocked.stdout
    outputs = {i["id"]: [m.get("source") for t in i["turns"] for m in t["output"] if m["role"] == "tool"]
               for i in mocked.json["items"]}
    assert outputs == {"a": ["mock"], "b": ["mock"]}
    assert not (workdir / "svc.log").exists()  # the real tool never ran


@pytest.fixture
def waiting_agent(workdir: Path) -> Iterator[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "A2A_LOG": str(workdir / "a2a.log")}
    with serving("tests.a2a_waiting_agent", env=env) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("blocking", [True, False])
def test_an_a2a_task_waiting_for_input_is_answered_by_the_next_turn(blocking: bool, waiting_agent: str,
                                                                   write: Callable[..., Path],
                                                                   cli: Callable[..., CliResult],
                                                                   workdir: Path) -> None:
    """Before: the next turn's message carried the contextId but not the waiting task's id, so the agent started a
    new task and the one that asked "Which city?" never got its answer."""
    write("d.yaml", f"""
        target: {{a2a: {{url: "{waiting_agent}", blocking: {str(blocking).lower()}, poll_interval: 0.1}}}}
        data:
          - id: book
            inputs: [Book me a trip, London, Thanks]
        scorers:
          - includes: Booked for London
    """)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr + result.stdout
    said = [m["content"] for turn in result.json["items"][0]["turns"] for m in turn["output"]]
    assert said == ["Which city?", "Booked for London.", "Which city?"]  # a completed task is not continued
    log = [json.loads(line) for line in (workdir / "a2a.log").read_text().splitlines()]
    assert [entry["resumed"] for entry in log] == [False, True, False]
    assert log[0]["task"] == log[1]["task"] != log[2]["task"]


@pytest.mark.parametrize(("written", "said"), [
    ("faults: {error_rate: .nan}", "'error_rate' is a share of the calls (a number from 0 to 1), not nan"),
    ("faults: {latency: {p50: .inf}}", "'latency' is seconds (p50 >= 0), not inf"),
    ("faults: {latency: {p50: 0, p99: 5}}", "'latency' with p99 5s needs a p50 above 0"),
    ("faults: {timeout: .inf}", "'timeout' is seconds (> 0), not inf"),
    ("delay: .inf", "'delay' is seconds (a number >= 0), not inf"),
    ("delay: .nan", "'delay' is seconds (a number >= 0), not nan"),
])
def test_a_rate_or_seconds_that_is_not_a_finite_number_is_refused_at_its_line(
        written: str, said: str, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    """Before: ``.nan`` passed every comparison (a rate that never fires), ``.inf`` seconds waited forever, and a p99
    with a p50 of 0 silently meant no latency at all."""
    write("d.yaml", f"""
        target: agents:echo
        tools:
          lookup:
            returns: found
            {written}
        data:
          - input: hi
        gates:
          - includes: hi
    """)
    result = cli("validate", "d.yaml")
    assert result.code == 2, result.stdout
    assert said in result.stderr and "d.yaml:5:" in result.stderr
    assert "Traceback" not in result.stderr


def test_mocks_from_a_tape_holding_an_interpolation_read_back_as_recorded(write: Callable[..., Path],
                                                                         cli: Callable[..., CliResult],
                                                                         workdir: Path) -> None:
    """Before: a recorded ``${NAME}`` was written as it was, so loading the block interpolated it: an unset variable
    refused the dataset (exit 2), a set one silently changed the mock's answer to the environment's value."""
    (workdir / "script.py").write_text('''
import evalcli


@evalcli.tool
def make_script(name: str) -> str:
    return "echo ${GREETING_WORD} ${HOME}"


def agent(input: str) -> str:
    return make_script(name="${" + input + "}")
''')
    items = "data:\n  - {id: a, input: hi}\ngates:\n  - includes: echo\n"
    write("record.yaml", "target: script:agent\n" + items)
    assert cli("run", "record.yaml", "--record-tools", "tapes").code == 0
    assert cli("mocks", "from-tape", "tapes/record.tape.jsonl", "-o", "tools.yaml").code == 0
    write("mocked.yaml", "target: script:agent\nunmocked: error\n" + (workdir / "tools.yaml").read_text() + items)
    mocked = cli("run", "mocked.yaml", "--hermetic", "--json", "-", env={"HOME": "/somewhere/else"})
    assert mocked.code == 0, mocked.stderr + mocked.stdout
    tool = [m for m in mocked.json["items"][0]["turns"][0]["output"] if m["role"] == "tool"]
    assert [(m["source"], m["content"]) for m in tool] == [("mock", "echo ${GREETING_WORD} ${HOME}")]


TEXTS = st.lists(st.sampled_from(["${HOME}", "${X:-d}", "${UNSET}", "$${X}", "$", "{", "}", "a", " ", "/"]),
                 max_size=6).map("".join)


@settings(max_examples=150, deadline=None)
@given(argument=TEXTS, result=st.one_of(TEXTS, st.dictionaries(st.sampled_from("ab"), TEXTS, max_size=2)))
def test_the_block_from_a_tape_reads_back_every_recorded_text_as_it_was(argument: str, result: Any) -> None:
    """Whatever text a tape holds (``${HOME}``, ``$${X}``, ``${X:-d}``), the block ``from-tape`` writes, loaded as a
    dataset is (interpolation and all, with HOME set), answers the recorded call with the recorded result."""
    block = tools_yaml({"id:one": [Recorded("run", canonical({"cmd": argument}), result)]}, "a tape")
    raw, pos, used = load_yaml(block, "tools.yaml", env={"HOME": "/home/someone"})
    problems: list[Problem] = [*used.problems]
    config = parse_tools(raw["tools"], ("tools",), pos, "dataset", problems)
    assert not problems and config is not None, "\n".join(map(str, problems))
    plan = ToolPlan(config, unmocked="error")
    source, answer = plan.decide("run", {"cmd": argument})
    assert source == "mock" and answer is not None and answer.returns == result
