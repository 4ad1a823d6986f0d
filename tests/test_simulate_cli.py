"""Simulated users through the real CLI and a loopback server: replay from the cache with no simulator call,
``--no-cache``, what is stored and reported (JSON, tables, JUnit, Markdown, ``show``), ``--repeat`` pass@k and
pass^k, and the shipped example against a capable (scripted) simulator."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, CliResult, run_cli
from tests.llm_server import LLMServer, Request, verdict
from tests.sim_helpers import goal_of, serve, sim_env, simulator_requests, user_said

pytestmark = pytest.mark.usefixtures("llm_backend")  # every test on both backends (docs/models.md)

DATASET = """
target: examples.weather_agent:weather_agent
gates: [{called_tool: get_weather}]
scorers: [{matches: '\\d+°F'}]
data:
  - id: paris
    simulate: {goal: Paris forecast, facts: {city: Paris}, opening: "What is the weather like?"}
  - id: vague
    simulate: {goal: never says which city, max_turns: 3}
"""


def weather_user(heard: str | None, request: Request) -> str:
    """A capable user: names the city when asked, stops once given a forecast; the vague one never says."""
    goal = goal_of(request)
    if heard is None:
        return "Weather please."
    if "Which city" in heard:
        return "Paris." if goal.startswith("Paris") else f"I will not say ({len(user_said(request))})."
    return "###STOP###"


def turns_of(out: dict[str, Any]) -> list[list[tuple[str, bool]]]:
    return [[(t["input"], t["simulated"]) for t in item["turns"]] for item in out["items"]]


def test_a_second_run_replays_from_the_cache_and_no_cache_asks_again(
        llm_server: LLMServer, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    serve(llm_server, weather_user)
    write("d.yaml", DATASET)
    env = sim_env(llm_server)
    first = cli("run", "d.yaml", "--json", "-", env=env)
    assert first.code == 1, first.stderr  # 'vague' never gets a forecast: the gate fails
    asked = len(simulator_requests(llm_server))
    assert asked == 2 + 3  # paris: a reply to "Which city?", then the stop; vague: three messages
    assert turns_of(first.json) == [
        [("What is the weather like?", False), ("Paris.", True)],
        [("Weather please.", True), ("I will not say (1).", True), ("I will not say (2).", True)],
    ]
    assert [i["stop_reason"] for i in first.json["items"]] == ["user_stop", "max_turns"]

    second = cli("run", "d.yaml", "--json", "-", env=env)
    assert len(simulator_requests(llm_server)) == asked, "a replay asks the simulator nothing"
    assert turns_of(second.json) == turns_of(first.json)
    assert second.json["items"][0]["turns"][1]["output"] == first.json["items"][0]["turns"][1]["output"]
    db = second.db()
    rows = db.execute("SELECT purpose, cache_hit, turn_index, item_index FROM llm_calls WHERE run_id = ? "
                      "ORDER BY item_index, turn_index", [second.json["run_id"]]).fetchall()
    assert [tuple(r) for r in rows] == [("simulator", 1, 1, 0), ("simulator", 1, 2, 0), ("simulator", 1, 0, 1),
                                        ("simulator", 1, 1, 1), ("simulator", 1, 2, 1)]
    fresh = db.execute("SELECT COUNT(*), SUM(prompt_tokens), SUM(completion_tokens) FROM llm_calls WHERE run_id = ? "
                       "AND purpose = 'simulator' AND cache_hit = 0", [first.json["run_id"]]).fetchone()
    assert tuple(fresh) == (5, 55, 35)
    assert "LLM calls: 5 (cache hits: 5)" in second.stderr

    third = cli("run", "d.yaml", "--no-cache", "--json", "-", env=env)
    assert len(simulator_requests(llm_server)) == 2 * asked
    assert turns_of(third.json) == turns_of(first.json)


def test_stored_and_reported_everywhere(llm_server: LLMServer, write: Callable[..., Path],
                                        cli: Callable[..., CliResult]) -> None:
    serve(llm_server, weather_user)
    write("d.yaml", DATASET)
    result = cli("run", "d.yaml", "--json", "-", "--junit", "out.xml", "--markdown", "out.md", env=sim_env(llm_server))
    out = result.json
    assert [(i["form"], i["stop_reason"], i["status"]) for i in out["items"]] == [
        ("simulate", "user_stop", "ok"), ("simulate", "max_turns", "ok")]
    db = result.db()
    items = db.execute("SELECT item_id, form, stop_reason FROM items ORDER BY item_index").fetchall()
    assert [tuple(r) for r in items] == [("paris", "simulate", "user_stop"), ("vague", "simulate", "max_turns")]
    turns = db.execute("SELECT item_id, turn_index, simulated, input FROM turns ORDER BY item_index, turn_index")
    assert [tuple(r) for r in turns.fetchall()][:2] == [("paris", 0, 0, "What is the weather like?"),
                                                        ("paris", 1, 1, "Paris.")]
    cases = {c.get("name"): c for c in ET.parse(result.cwd / "out.xml").getroot().iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["vague"].iter("property")}
    assert props == {"form": "simulate", "stop_reason": "max_turns", "turns": "3"}
    assert cases["vague"].find("failure") is not None and cases["paris"].find("failure") is None
    markdown = (result.cwd / "out.md").read_text()
    assert "`vague` (simulated, max_turns): gate called_tool(get_weather)" in markdown
    shown = cli("show", "latest", "paris")
    assert "User: What is the weather like?" in shown.stdout and "User (simulated): Paris." in shown.stdout
    assert "stopped: user_stop" in shown.stdout


FLAKY = '''
import collections, json
_seen = collections.Counter()

def flaky(input, **kw):
    """'steady' always looks the weather up, 'flaky' only the first time it is asked, 'never' never."""
    _seen[input] += 1
    if input.startswith("steady") or (input.startswith("flaky") and _seen[input] == 1):
        call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
        return [{"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"temp": 70})},
                {"role": "assistant", "content": "70°F"}]
    return "I cannot help."

flaky.memory = True
'''


def test_repeat_reports_pass_at_k_and_pass_all_k_for_simulated_conversations(
        llm_server: LLMServer, write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    serve(llm_server, lambda heard, request: f"{goal_of(request)} please" if heard is None else "###STOP###")
    write("flaky.py", FLAKY)
    write("r.yaml", "target: flaky:flaky\ngates: [{called_tool: get_weather}]\ndata:\n"
                    + "".join(f"  - {{id: {g}, simulate: {{goal: {g}}}}}\n" for g in ("steady", "flaky", "never")))
    result = cli("run", "r.yaml", "--repeat", "3", "--concurrency", "1", "--json", "-", "--markdown", "out.md",
                 env=sim_env(llm_server))
    out = result.json
    gate = "called_tool(get_weather)"
    assert out["repeat"] == 3
    assert out["pass_at_k"] == {gate: 2 / 3} and out["pass_all_k"] == {gate: 1 / 3}
    assert [i["gate_scores"][gate] for i in out["items"]] == [1.0, 1 / 3, 0.0]
    assert all(t["simulated"] for i in out["items"] for t in i["turns"])
    assert [i["stop_reason"] for i in out["items"]] == ["user_stop"] * 3
    assert f"{gate}=0.667" in result.stderr + result.stdout and f"{gate}=0.333" in result.stderr + result.stdout
    assert f"| {gate} | 0.667 | 0.333 |" in (result.cwd / "out.md").read_text()


def example_user(heard: str | None, request: Request) -> str:
    if heard is None:
        return "Will I need an umbrella tomorrow?"
    if "Which city" in heard:
        return "Paris." if "favourite" in goal_of(request) else "London."
    if heard.startswith("Today in London"):
        return "And tomorrow?"
    return "Great, thanks! ###STOP###"


def test_the_example_runs_against_a_capable_simulator(llm_server: LLMServer, tmp_path: Path) -> None:
    serve(llm_server, example_user, lambda request: verdict(True, "A forecast was given."))
    env = {**sim_env(llm_server), "EVALCLI_JUDGE_MODEL": "openai/judge-model"}
    result = run_cli(["run", "datasets/simulated.yaml", "--db", str(tmp_path / "e.db"), "--json", "-"], REPO, env)
    assert result.code == 0, result.stderr
    assert "not registered" not in result.stderr
    out = result.json
    assert out["verdict"] == "passed"
    assert turns_of(out) == [
        [("Hi! What will the weather be like this weekend in my favourite city?", False), ("Paris.", True)],
        [("Will I need an umbrella tomorrow?", True), ("London.", True), ("And tomorrow?", True)],
    ]
    assert [i["stop_reason"] for i in out["items"]] == ["user_stop", "user_stop"]
    last = out["items"][1]["turns"][-1]["output"][-1]["content"]
    assert last == "Tomorrow in London: cloudy, 57°F."
    judged = [json.dumps(r.body) for r in llm_server.requests if r.body.get("model") == "judge-model"]
    assert len(judged) == 2 and all("Assistant turn" in body for body in judged)
    # goal_achieved judges each item's expected_outcome, never its simulate.goal when both are given
    outcomes = {"forecast for Paris", "forecast for London"}
    assert {o for o in outcomes for body in judged if o in body} == outcomes
    assert not any("Find out" in body for body in judged)
    assert set(out["items"][0]["scores"]) >= {"reached-goal"}
