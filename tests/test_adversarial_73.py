"""Adversarial try, second round (adv40), of hermetic worlds as users meet them: A2A agents served by the installed
``a2a-sdk`` as its defaults make them (docs/targets/a2a.md), MCP servers made with the ``mcp`` package that fail as
real ones do (docs/hermetic.md, "MCP tools"), and seeded faults counted against their documented function. Real CLI
runs in subprocesses, real loopback servers. The first round is tests/test_adversarial_58.py."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tests.reliability_helpers import SUBPROCESS_TIMEOUT

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
