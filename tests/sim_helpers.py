"""Helpers for the simulated-user tests: a scripted simulated user behind the loopback server.

The simulator is reached as ``openai/sim-model`` (the server sees ``sim-model``) through
``OPENAI_API_BASE``; anything else asking the server (an ``evalcli.Agent``, a judge) is answered by
``other``. A script is a function of what the agent last said (``None`` before the first message)
and the request, returning the simulated user's reply.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from evalcli.llm.fence import TRANSCRIPT_END, TRANSCRIPT_START
from tests.llm_server import LLMServer, Reply, Request, status, text

SIM_MODEL = "openai/sim-model"
SIM_NAME = "sim-model"

Script = Callable[[str | None, Request], str]


def is_simulator(request: Request) -> bool:
    return request.body.get("model") == SIM_NAME


def fenced_bodies(content: str) -> list[str]:
    """Every text between a start and an end marker line, in order."""
    bodies = []
    for part in content.split(TRANSCRIPT_START + "\n")[1:]:
        bodies.append(part.split("\n" + TRANSCRIPT_END, 1)[0])
    return bodies


def last_agent_words(request: Request) -> str | None:
    """The agent's last words as the simulator was shown them (inside the fence), or None at the start."""
    last = request.messages[-1]
    if last.get("role") != "user":
        return None
    bodies = fenced_bodies(str(last.get("content") or ""))
    return bodies[-1] if bodies else None


def user_said(request: Request) -> list[str]:
    """The simulated user's earlier messages in the request (roles flipped: they are ``assistant`` messages)."""
    return [str(m.get("content")) for m in request.messages if m.get("role") == "assistant"]


def goal_of(request: Request) -> str:
    """The goal line of the simulator's instructions."""
    system = str(request.messages[0].get("content"))
    return system.split("Your goal in this conversation:\n", 1)[1].split("\n", 1)[0]


def serve(server: LLMServer, script: Script, other: Callable[[Request], Reply] | None = None) -> None:
    """Answer simulator requests with ``script`` and every other request with ``other`` (a 500 by default)."""
    def respond(request: Request) -> Reply:
        if is_simulator(request):
            return text(script(last_agent_words(request), request))
        return other(request) if other else status(500, message="no agent model in this test")

    server.responder = respond


def simulator_requests(server: LLMServer) -> list[Request]:
    return [r for r in server.requests if is_simulator(r)]


def sim_env(server: LLMServer, **extra: str) -> dict[str, str]:
    """Environment for the CLI: the simulator model and the server's base URL, fast retries."""
    return {"OPENAI_API_KEY": "sk-test-not-a-real-key-0123456789", "OPENAI_API_BASE": server.url,
            "EVALCLI_SIMULATOR_MODEL": SIM_MODEL, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
            "EVALCLI_LLM_RETRIES": "1", **extra}


def dumps(request: Request) -> str:
    return json.dumps(request.body, ensure_ascii=False)
