"""What an ``http`` target's agent did is what is recorded (SPEC §22): a thread for every conversation, replies that
repeat earlier turns, and the odd values a service or a dataset may hold. The real CLI against loopback agents."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.agent_server import Answer, ScriptedAgent, Seen
from tests.conftest import CliResult


@pytest.fixture
def agent() -> Iterator[ScriptedAgent]:
    server = ScriptedAgent()
    try:
        yield server
    finally:
        server.stop()


def test_every_http_conversation_has_its_thread_single_turn_items_included(
        write: Callable[..., Path], cli: Callable[..., CliResult], agent: ScriptedAgent) -> None:
    said: dict[object, list[str]] = {}

    def answer(seen: Seen) -> Answer:  # a service that keys its history by the session id it is sent
        history = said.setdefault(seen.body["session"], [])
        history.append(seen.body["input"])
        return Answer(body={"text": " | ".join(history)})

    agent.answer = answer
    write("d.yaml", f"""
        target:
          http:
            url: {agent.url}/chat
            body: {{input: "{{{{ input }}}}", session: "{{{{ thread }}}}", user: "{{{{ resource }}}}"}}
        concurrency: 1
        scorers: [{{excludes: "|"}}]
        data:
          - {{id: a, input: apples}}
          - {{id: b, input: bananas}}
          - {{id: c, inputs: [one, two]}}
        """)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    items = {i["id"]: i for i in result.json["items"]}
    assert items["b"]["turns"][0]["output"][0]["content"] == "bananas"  # never item a's message
    bodies = [r.body for r in agent.requests]
    assert all(isinstance(b["session"], str) and b["session"] for b in bodies)
    assert all(b["user"] == b["session"] for b in bodies)
    assert len({b["session"] for b in bodies}) == 3
    assert items["a"]["thread_id"] == bodies[0]["session"] and items["a"]["resource_id"] == bodies[0]["session"]
    assert items["c"]["turns"][1]["output"][0]["content"] == "one | two"
