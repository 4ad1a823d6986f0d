"""Conversation limits (docs/budgets.md): ``limits: {turns, tokens, cost, seconds}`` at dataset or item level stop a
conversation there, with status ``limited`` (which limit, after how many turns), counted as errored for the exit
code unless ``on_limit: score``; through the real CLI (a callable agent, and a ``model`` target on the loopback
server reporting usage)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tests.llm_server import LLMServer, Reply, Request, completion

SLOW_AGENT = """
import time

def slow(input, **kw):
    time.sleep(0.4)
    return "ok " + input
"""


def test_turn_limits_stop_conversations_as_limited(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        target: agents:echo
        limits: {turns: 2}
        scorers: [{includes: said}]
        data:
          - {id: short, inputs: [a, b]}
          - {id: long, inputs: [a, b, c, d]}
          - {id: scored, inputs: [a, b, c], on_limit: score}
          - {id: roomy, inputs: [a, b, c], limits: {turns: 5}}
        """)
    done = cli("run", "d.yaml", "--json", "-")
    assert done.code == 4, done.stderr  # a limited conversation counts as errored
    items = {i["id"]: i for i in done.json["items"]}
    assert items["short"]["status"] == "ok" and items["roomy"]["status"] == "ok"
    assert items["long"]["status"] == "limited" and items["long"]["limited"] == {"limit": "turns", "turns": 2}
    assert "limited by turns after 2 turn(s): turn 2 not played: its 2 turn(s) were played" in items["long"]["error"]
    assert [t["input"] for t in items["long"]["turns"]] == ["a", "b"]
    assert items["scored"]["status"] == "ok" and items["scored"]["stop_reason"] == "turns"
    assert items["scored"]["scores"] == {"includes(said)": 1.0} and len(items["scored"]["turns"]) == 2
    assert done.json["summary"]["errors"] == 1
    stored = dict(done.db().execute("SELECT item_id, status FROM items").fetchall())
    assert stored["long"] == "limited"


@pytest.mark.timing
def test_a_time_limit_stops_a_slow_conversation(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("slow.py", SLOW_AGENT)
    write("t.yaml", """
        target: slow:slow
        limits: {seconds: 0.6}
        scorers: [{includes: ok}]
        data:
          - {id: slow, inputs: [a, b, c, d]}
        """)
    timed = cli("run", "t.yaml", "--json", "-")
    assert timed.code == 4, timed.stderr
    item = timed.json["items"][0]
    assert item["status"] == "limited" and item["limited"]["limit"] == "seconds" and item["limited"]["turns"] <= 2


def test_a_token_limit_reads_the_conversations_usage(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                     llm_server: LLMServer) -> None:
    def answer(request: Request) -> Reply:
        return Reply(body=completion("ok", prompt_tokens=40, completion_tokens=10))

    llm_server.responder = answer
    write("d.yaml", f"""
        target: {{model: openai/m, api_base: "{llm_server.url}"}}
        limits: {{tokens: 120}}
        on_limit: score
        scorers: [{{includes: ok}}]
        data:
          - {{id: chatty, inputs: [a, b, c, d, e]}}
        """)
    done = cli("run", "d.yaml", "--json", "-")
    assert done.code == 0, done.stderr
    item = done.json["items"][0]
    # 50 tokens a turn: after three turns (150) the fourth is not played; scored on what was played
    assert item["status"] == "ok" and item["stop_reason"] == "tokens" and len(item["turns"]) == 3
    assert len(llm_server.requests) == 3


def test_limits_that_cannot_be_read_are_validation_errors(write: Callable[..., Path],
                                                          cli: Callable[..., CliResult]) -> None:
    write("d.yaml", """
        target: agents:echo
        limits: {turns: 0, minutes: 3}
        data:
          - {input: a, on_limit: maybe}
        scorers: [{includes: a}]
        """)
    done = cli("validate", "d.yaml")
    assert done.code == 2, done.stderr
    assert "d.yaml:2" in done.stderr and "minutes" in done.stderr and "on_limit" in done.stderr


def test_a_simulated_user_is_not_asked_for_a_turn_a_limit_ended(write: Callable[..., Path],
                                                                 cli: Callable[..., CliResult],
                                                                 llm_server: LLMServer) -> None:
    from tests.sim_helpers import serve, sim_env, simulator_requests

    serve(llm_server, lambda heard, request: f"question {len(simulator_requests(llm_server))}")
    write("d.yaml", """
        target: agents:echo
        limits: {turns: 3}
        on_limit: score
        scorers: [{includes: said}]
        data:
          - {id: chatty, simulate: {goal: keep talking, max_turns: 6}}
        """)
    done = cli("run", "d.yaml", "--json", "-", env=sim_env(llm_server))
    assert done.code == 0, done.stderr
    item = done.json["items"][0]
    assert item["stop_reason"] == "turns" and len(item["turns"]) == 3
    assert len(simulator_requests(llm_server)) == 3  # old main: 4, the fourth message written and never sent
