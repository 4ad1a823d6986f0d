"""Test helpers for the framework adapters: real framework agents pointed at the loopback server, and a
conversation driven through an adapter's sessions exactly as the runner drives it (``open``, ``send``
per turn, ``close``), with evalcli's own ``TargetCalls``."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalcli.messages import Message
from evalcli.targets import Adapter, make_adapter
from evalcli.targets.calls import TargetCalls, TargetThreads
from examples.weather_agent import FORECASTS

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
KEY = "sk-test-not-a-real-key-0123456789"


def needs(module: str) -> Any:
    """A mark skipping a test whose framework is not installed (``evalcli[google-adk]``: an extra CI's environment may
    leave out when it would downgrade another framework's dependencies)."""
    import importlib.util

    import pytest

    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        found = False
    return pytest.mark.skipif(not found, reason=f"{module} is not installed")


def framework(name: str, module: str) -> Any:
    """A parameter of the framework tests that needs its framework installed."""
    import pytest

    return pytest.param(name, marks=needs(module))


NEW_FRAMEWORKS = [framework("google_adk", "google.adk"), "strands"]
"""The adapters whose frameworks are optional in the test environment (Strands': in a venv of its own)."""


def framework_python(adapter: str) -> Path | None:
    """The interpreter that runs ``adapter``'s agents: the venv of its extra when its pins clash with the suite's
    (``tests/framework_venvs.EXTRAS``; built once, a skip, or a failure in CI, when it cannot be), else ``None``: the
    test Python."""
    from tests.framework_venvs import EXTRAS, venv_or_skip

    extra = adapter.replace("_", "-")
    return venv_or_skip(extra) if extra in EXTRAS else None


def weather(city: str, day: str = "today") -> dict[str, Any]:
    """The demo forecast; ``LookupError`` for an unknown city."""
    found = FORECASTS.get(city.lower())
    if found is None:
        raise LookupError(f"no forecast for {city}")
    condition, temperature = found[day]
    return {"city": city, "day": day, "condition": condition, "temperature_f": temperature}


def adapter_for(obj: Any, **options: Any) -> Adapter:
    return make_adapter("tests:agent", obj, options)


async def aconverse(adapter: Adapter, turns: list[str], *, multi_turn: bool = True,
                    timeout: float | None = None) -> list[list[Message]]:
    """Play one conversation; the messages of each turn."""
    session = adapter.open(multi_turn=multi_turn, calls=TargetCalls(TargetThreads(), timeout))
    try:
        return [(await session.send(text)).messages for text in turns]
    finally:
        await session.close()


def converse(adapter: Adapter, *conversations: list[str], **kwargs: Any) -> list[list[list[Message]]]:
    """Play conversations one after the other in one event loop (a framework's HTTP client belongs to the loop
    it first ran in); the messages of each turn of each."""
    async def play() -> list[list[list[Message]]]:
        return [await aconverse(adapter, turns, **kwargs) for turns in conversations]

    return asyncio.run(play())


async def afailed_turn(adapter: Adapter, turns: list[str]) -> tuple[BaseException, list[Message]]:
    """Play turns until one raises ``TurnFailed``: its cause and the messages it kept."""
    from evalcli.targets.session import TurnFailed

    try:
        await aconverse(adapter, turns)
    except TurnFailed as exc:
        return exc.cause, exc.messages
    raise AssertionError("no turn failed")


def failed_turn(adapter: Adapter, turns: list[str]) -> tuple[BaseException, list[Message]]:
    return asyncio.run(afailed_turn(adapter, turns))


def calls_of(messages: list[Message]) -> list[tuple[str, str, dict[str, Any]]]:
    """(id, name, parsed arguments) of every tool call, in order."""
    return [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for m in messages for c in m.get("tool_calls") or ()]


def texts_of(messages: list[Message]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "assistant" and m.get("content")]


def results_of(messages: list[Message]) -> list[Message]:
    return [m for m in messages if m["role"] == "tool"]


def user_texts(request_messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
            for m in request_messages if m.get("role") == "user"]


def request_with(server: Any, text: str) -> list[dict[str, Any]]:
    """The messages of the first request whose last user message is ``text``."""
    for request in server.requests:
        users = user_texts(request.messages)
        if users and users[-1] == text:
            return request.messages
    raise AssertionError(f"no request ends with the user message {text!r}")


def no_crosstalk() -> Callable[[Any], Any]:
    """A responder for concurrency tests: turn 1 "Remember the code CODE." is acknowledged; turn 2 "What is
    the code?" is answered with every code found in that request's own user messages (one, if no crosstalk)."""
    import re

    from tests.llm_server import text

    def respond(request: Any) -> Any:
        said = user_texts(request.messages)
        codes = [m for s in said for m in re.findall(r"code (K\d+)", s)]
        if said and said[-1].startswith("Remember"):
            return text(f"Noted {codes[-1]}.")
        return text(f"The code is {' and '.join(codes) or 'unknown'}.")

    return respond


def mocks_hermetic_and_tapes(run: Callable[..., Any], folder: Path, *, target: str, tool: str, ask: str,
                             live_answer: str, mocked_error: bool = True) -> None:
    """What every framework adapter's tool calls must do through the real CLI (docs/hermetic.md), for ``target``,
    whose model calls ``tool`` once when asked ``ask`` and answers with its result (``live_answer`` when it runs):
    a mock by name answers it (``source: mock``) and ``raises`` reaches the model as the tool's error (unless
    ``mocked_error`` is off), running nothing live; ``--hermetic`` refuses the live call, running nothing; a run
    with ``--record-tools`` runs it live once, and its tape answers it under ``--hermetic`` (``source: replay``).
    ``run(body, *args)`` runs a dataset written as ``folder``/d.yaml with the CLI; the app's tools record each live
    run in ``folder``/record.jsonl (``tests.app_agents.record``)."""
    def live_calls() -> list[Any]:
        path = folder / "record.jsonl"
        return path.read_text().splitlines() if path.exists() else []

    def results(item: dict[str, Any]) -> list[dict[str, Any]]:
        return [m for m in item["turns"][0]["output"] if m["role"] == "tool"]

    failing = (f"\n  - id: mocked-error\n    tools: {{{tool}: {{raises: the service is down}}}}\n    input: '{ask}'"
               if mocked_error else "")
    mocked = run(f"target: {target}\ngates: [{{called_tool: {tool}}}]\ndata:\n  - id: mocked\n"
                 f"    tools: {{{tool}: {{returns: 'Mocked answer, 99.'}}}}\n"
                 f"    turns: [{{input: '{ask}', gates: [{{includes: Mocked answer}}]}}]{failing}\n")
    assert mocked.code == 0, mocked.stdout[-3000:] + mocked.stderr[-3000:]
    items = {item["id"]: item for item in mocked.json["items"]}
    assert [m["source"] for m in results(items["mocked"])] == ["mock"]
    if mocked_error:
        [error] = results(items["mocked-error"])
        assert error["is_error"] is True and error["source"] == "mock" and "the service is down" in error["content"]
    assert live_calls() == []
    body = f"target: {target}\ngates: [{{includes: '{live_answer}'}}]\ndata: [{{id: one, input: '{ask}'}}]\n"
    refused = run(body, "--hermetic")
    assert refused.code == 4 and f"--hermetic: the tool call {tool}(" in refused.json["items"][0]["error"]
    assert live_calls() == []
    recorded = run(body, "--record-tools", str(folder / "tapes"))
    assert recorded.code == 0, recorded.stderr[-3000:]
    assert len(live_calls()) == 1 and [m["source"] for m in results(recorded.json["items"][0])] == ["live"]
    replayed = run(body.replace("data:", "tools: {replay: tapes/d.tape.jsonl}\ndata:"), "--hermetic")
    assert replayed.code == 0, replayed.stderr[-3000:]
    assert [m["source"] for m in results(replayed.json["items"][0])] == ["replay"] and len(live_calls()) == 1
