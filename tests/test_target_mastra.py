"""The ``mastra`` target (docs/targets/http.md) against a real Mastra server (``tests/mastra/server.mjs``: @mastra/core, its Hono
adapter, a real Memory on LibSQL, MockLanguageModelV3). Without Node the tests skip, unless
``EVALCLI_REQUIRE_NODE`` is set (``.ci/run`` sets it): then they fail.
"""

from __future__ import annotations

import json
import os
import socket
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult
from tests.mastra_server import REQUIRE, MastraServer, Unavailable, node_missing


@pytest.fixture(scope="module")
def mastra() -> Iterator[MastraServer]:
    why = node_missing()
    if why:
        if os.environ.get(REQUIRE):
            pytest.fail(f"{REQUIRE} is set but the Mastra server cannot run: {why}")
        pytest.skip(f"the Mastra server needs Node: {why}")
    try:
        with MastraServer() as server:
            yield server
    except Unavailable as exc:
        if os.environ.get(REQUIRE):
            pytest.fail(str(exc))
        pytest.skip(str(exc))


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


DATA = """
data:
  - id: paris
    input: What is the weather in Paris?
  - id: favourite
    inputs:
      - My favourite city is Paris.
      - What is the weather in my favourite city?
  - id: atlantis
    turns:
      - input: What is the weather in Atlantis?
        gates: [{called_tool: get_weather}]
"""


def dataset(write: Callable[..., Path], mastra: str, *, options: str = "") -> Path:
    return write("d.yaml", f"""
        target:
          mastra: {mastra}
        {options}
        gates:
          - called_tool: get_weather
        scorers:
          - no_tool_errors
          - includes: Paris
        """ + "\n".join("        " + line for line in DATA.splitlines()))


def test_a_mastra_agent_with_memory_tools_and_usage(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                    mastra: MastraServer) -> None:
    dataset(write, f"{{url: {mastra.url}, agent: weatherAgent}}")
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    assert "has no memory" not in result.stderr
    out = result.json
    assert out["target"] == f"mastra:{mastra.url}#weatherAgent"
    items = {i["id"]: i for i in out["items"]}
    paris = items["paris"]["turns"][0]["output"]
    call = paris[0]["tool_calls"][0]
    assert call["function"] == {"name": "get_weather", "arguments": json.dumps({"city": "Paris", "day": "today"})}
    assert paris[1] == {"role": "tool", "tool_call_id": call["id"], "name": "get_weather",
                        "content": json.dumps({"city": "Paris", "day": "today", "condition": "sunny",
                                               "temperature_f": 68})}
    assert paris[2] == {"role": "assistant", "content": "Today in Paris: sunny, 68°F."}
    # the second turn named no city: Mastra's memory gave the model the first turn
    assert items["favourite"]["turns"][1]["output"][-1]["content"] == "Today in Paris: sunny, 68°F."
    atlantis = items["atlantis"]["turns"][0]["output"]
    assert atlantis[1]["is_error"] is True and atlantis[1]["content"] == "Unknown city: Atlantis"
    assert out["scores"]["no_tool_errors"] == pytest.approx(2 / 3)
    favourite = items["favourite"]
    assert favourite["resource_id"] == favourite["thread_id"]
    threads = get(f"{mastra.url}/api/memory/threads?resourceId={favourite['resource_id']}&agentId=weatherAgent")
    stored = threads["threads"] if isinstance(threads, dict) else threads
    assert [t["id"] for t in stored] == [favourite["thread_id"]]
    messages = get(f"{mastra.url}/api/memory/threads/{favourite['thread_id']}/messages?agentId=weatherAgent")
    assert [m["role"] for m in messages["messages"]].count("user") == 2  # each turn sent only its new message
    calls = result.db().execute("SELECT purpose, model, prompt_tokens, completion_tokens FROM llm_calls").fetchall()
    assert len(calls) == 4 and all(c["purpose"] == "target" and c["prompt_tokens"] > 0 for c in calls)
    assert {c["model"] for c in calls} == {f"mastra:{mastra.url}#weatherAgent"}


def test_a_pinned_resource_keeps_one_resource_and_a_thread_per_conversation(
        write: Callable[..., Path], cli: Callable[..., CliResult], mastra: MastraServer) -> None:
    resource = f"user-{os.getpid()}"
    dataset(write, f"{{url: {mastra.url}, agent: weatherAgent}}",
            options=f"target_options: {{memory: {{resource: {resource}, thread: caller-thread-{os.getpid()}}}}}")
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    items = {i["id"]: i for i in result.json["items"]}
    assert items["favourite"]["resource_id"] == resource == items["atlantis"]["resource_id"]
    threads = get(f"{mastra.url}/api/memory/threads?resourceId={resource}&agentId=weatherAgent")
    ids = {t["id"] for t in (threads["threads"] if isinstance(threads, dict) else threads)}
    # multi-turn items: evalcli's own threads; the single-turn item: the caller's thread, unchanged (docs/targets/index.md)
    assert ids == {items["favourite"]["thread_id"], items["atlantis"]["thread_id"], f"caller-thread-{os.getpid()}"}
    assert items["paris"]["thread_id"] == f"caller-thread-{os.getpid()}"


def test_an_agent_without_memory_gets_the_warning_and_forgets(write: Callable[..., Path],
                                                              cli: Callable[..., CliResult],
                                                              mastra: MastraServer) -> None:
    dataset(write, f"{{url: {mastra.url}, agent: forgetfulAgent}}")
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 1, result.stderr  # favourite: no city recalled, no tool call, the gate misses
    assert (f"warning: target mastra:{mastra.url}#forgetfulAgent has no memory: its 1 multi-turn conversation "
            "will run")  # favourite; atlantis is one turn: nothing to recall in result.stderr
    favourite = next(i for i in result.json["items"] if i["id"] == "favourite")
    assert favourite["turns"][1]["output"] == [{"role": "assistant", "content": "Which city do you mean?"}]


def test_other_options_go_into_the_body(write: Callable[..., Path], cli: Callable[..., CliResult],
                                        mastra: MastraServer) -> None:
    dataset(write, f"{{url: {mastra.url}, agent: weatherAgent}}", options="target_options: {maxSteps: 1}")
    result = cli("run", "d.yaml", "--json", "-")
    paris = next(i for i in result.json["items"] if i["id"] == "paris")["turns"][0]["output"]
    assert [m["role"] for m in paris] == ["assistant", "tool"]  # one step: the call and its result, no answer yet


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unknown_agent_or_unreachable_server_is_exit_2_before_anything_runs(
        write: Callable[..., Path], cli: Callable[..., CliResult], mastra: MastraServer) -> None:
    dataset(write, f"{{url: {mastra.url}, agent: weatherAgnt}}")
    result = cli("run", "d.yaml")
    assert result.code == 2
    column = len(f"  mastra: {{url: {mastra.url}, agent: ") + 1
    assert (f"d.yaml:2:{column}: the Mastra server at {mastra.url} has no agent 'weatherAgnt' (it serves: forgetfulAgent, "
            "weatherAgent)") in result.stderr
    port = _free_port()
    dataset(write, f"{{url: 'http://127.0.0.1:{port}', agent: weatherAgent}}")
    result = cli("run", "d.yaml")
    assert result.code == 2
    assert f"d.yaml:2:{len('  mastra: {url: ') + 1}: cannot reach the Mastra server at http://127.0.0.1:{port}: " in result.stderr
    assert not (result.cwd / "evalcli.db").exists()
    result = cli("run", "d.yaml", "--target", f"mastra:http://127.0.0.1:{port}#weatherAgent")
    assert result.code == 2 and f"--target mastra:http://127.0.0.1:{port}#weatherAgent: cannot reach" in result.stderr


def test_mastra_target_from_the_command_line(write: Callable[..., Path], cli: Callable[..., CliResult],
                                             mastra: MastraServer) -> None:
    dataset(write, "{url: 'http://127.0.0.1:1', agent: nobody}")  # replaced: never looked up
    result = cli("run", "d.yaml", "--target", f"mastra:{mastra.url}#weatherAgent", "--json", "-")
    assert result.code == 0, result.stderr
    assert result.json["target"] == f"mastra:{mastra.url}#weatherAgent"
