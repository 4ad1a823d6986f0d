"""Seeded faults (docs/hermetic.md, "Faults"): ``faults:`` on a tool or on ``'*'``, through the real CLI.

The agent is a real ``evalcli.Agent`` against the loopback scripted model; its real tool writes a marker file. Which
call meets which fault is a pure function of the seed, the conversation's identity, the tool and the call's index
among that conversation's calls of the tool: the hypothesis test states it, the CLI tests check a run against it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from evalcli.tools import ToolPlan, ToolsConfig
from evalcli.tools.faults import Faults, draw, latency, malformed
from tests.conftest import CliResult
from tests.test_tools_mocks import answers, marker, tool_results

CITIES = ["London", "Paris", "Tokyo", "Rome", "Oslo", "Lima", "Cairo", "Quito", "Perth", "Accra", "Hanoi", "Dakar"]
FAULTY = Faults(error_rate=0.3, malformed_rate=0.3, seed=7)


def dataset(faults: str, extra: str = "") -> str:
    items = "\n".join(f'  - {{id: c{n}, input: "What is the weather in {city}?"}}' for n, city in enumerate(CITIES))
    return f"target: tool_agents:agent\ntools:\n{faults}\n{extra}data:\n{items}\nscorers:\n  - includes: \"°F\"\n"


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(-2**40, 2**40), identities=st.lists(st.text(max_size=8), min_size=1, max_size=3, unique=True),
       calls=st.lists(st.sampled_from(["get_weather", "search", "book"]), max_size=12), shuffle=st.randoms())
def test_a_calls_fault_depends_only_on_seed_conversation_tool_and_index(seed: int, identities: list[str],
                                                                         calls: list[str],
                                                                         shuffle: random.Random) -> None:
    """Whatever order a conversation's tools run in (their calls interleaved otherwise, other conversations in
    between), the nth call of a tool meets the same fault: ``draw(faults, identity, tool, n)``."""
    faults = Faults(error_rate=0.4, malformed_rate=0.3, p50=0.1, p99=2.0, timeout=1.0, seed=seed)
    config = ToolsConfig(faults={"*": faults})
    for identity in identities:
        first, second = ToolPlan(config, identity=identity), ToolPlan(config, identity=identity)
        by_tool: dict[str, list[Any]] = {}
        for tool in calls:
            by_tool.setdefault(tool, []).append(first.fault(tool))
        other = list(calls)
        shuffle.shuffle(other)  # another interleaving: each tool's calls keep only their count
        again: dict[str, list[Any]] = {}
        for tool in other:
            again.setdefault(tool, []).append(second.fault(tool))
        for tool, drawn in by_tool.items():
            expected = [(faults, draw(faults, identity, tool, n)) for n in range(len(drawn))]
            assert drawn == expected == again[tool]
            for _, found in drawn:
                assert found.latency <= 1.0 and (found.timed_out or not (found.error and found.malformed))


def test_rates_and_latency_quantiles_are_honoured() -> None:
    faults = Faults(error_rate=0.2, malformed_rate=0.1, p50=0.2, p99=2.0, seed=3)
    drawn = [draw(faults, f"id:c{n}", "get_weather", n % 5) for n in range(4000)]
    errors = sum(d.error for d in drawn) / len(drawn)
    spoiled = sum(d.malformed for d in drawn) / len(drawn)
    assert 0.17 < errors < 0.23 and 0.06 < spoiled < 0.10  # malformed only among the calls that did not fail
    assert abs(latency(faults, 0.5) - 0.2) < 1e-9 and abs(latency(faults, 0.99) - 2.0) < 1e-9
    slow = sorted(d.latency for d in drawn)
    assert 0.17 < slow[len(slow) // 2] < 0.23
    assert draw(Faults(), "id:x", "t", 0) == draw(Faults(seed=0), "id:x", "t", 0)  # no fault: nothing happens
    assert draw(Faults(), "id:x", "t", 0).fault is None


def fault_table(result: CliResult) -> dict[str, list[tuple[str, str | None]]]:
    return {item: [(m["source"], m.get("fault")) for turn in turns for m in turn]
            for item, turns in tool_results(result).items()}


def expected_fault(n: int, faults: Faults = FAULTY) -> str | None:
    return draw(faults, f"id:c{n}", "get_weather", 0).fault


def test_faults_on_every_tool_are_seeded_and_marked(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                    agent_env: dict[str, str], workdir: Path) -> None:
    write("d.yaml", dataset("  '*': {faults: {error_rate: 0.3, malformed_rate: 0.3, seed: 7}}"))
    first = cli("run", "d.yaml", "--json", "-", env=agent_env)
    assert first.code == 0, first.stderr
    table = fault_table(first)
    wanted = [expected_fault(n) for n in range(len(CITIES))]
    assert {"error", "malformed", None} <= set(wanted)  # the seed gives each kind at least once
    for n, city in enumerate(CITIES):
        fault = wanted[n]
        assert table[f"c{n}"] == [("fault" if fault else "live", fault)]
        said = answers(first)[f"c{n}"]
        assert said == ([f"Sorry, I could not get a forecast for {city}."] if fault else
                        [f"Today in {city}: sunny, 70°F."])
    results = {item: turns[0][0] for item, turns in tool_results(first).items()}
    failed = next(n for n, f in enumerate(wanted) if f == "error")
    assert results[f"c{failed}"]["is_error"] is True
    assert "get_weather failed: service unavailable (injected fault)" in results[f"c{failed}"]["content"]
    broken = next(n for n, f in enumerate(wanted) if f == "malformed")
    real = {"city": CITIES[broken], "day": "today", "condition": "sunny", "temperature_f": 70}
    assert results[f"c{broken}"]["content"] == malformed(real) == json.dumps(real)[:len(json.dumps(real)) // 2]
    # an injected failure never reached the tool; a malformed answer is the real one, cut off
    ran = sorted(marker(workdir).split("\n")[:-1])
    assert ran == sorted(f"get_weather {CITIES[n]}" for n, f in enumerate(wanted) if f != "error")
    second = cli("run", "d.yaml", "--json", "-", "--concurrency", "1", env=agent_env)
    assert fault_table(second) == table and answers(second) == answers(first)  # the same faults, run again


def test_a_tools_own_faults_over_a_mock_with_latency_and_timeout(write: Callable[..., Path],
                                                                 cli: Callable[..., CliResult],
                                                                 agent_env: dict[str, str], workdir: Path) -> None:
    write("d.yaml", dataset("  get_weather:\n    returns: {condition: foggy, temperature_f: 50}\n"
                            "    faults: {latency: {p50: 0.05, p99: 0.6}, timeout: 0.1, seed: 11}\n"
                            "  '*': {faults: {error_rate: 1}}"))
    result = cli("run", "d.yaml", "--json", "-", env=agent_env)
    assert result.code == 0, result.stderr
    faults = Faults(p50=0.05, p99=0.6, timeout=0.1, seed=11)
    table = fault_table(result)
    timed = [n for n in range(len(CITIES)) if draw(faults, f"id:c{n}", "get_weather", 0).timed_out]
    assert 0 < len(timed) < len(CITIES)  # the tool's own faults replace '*''s (which would fail every call)
    items = {item["id"]: item for item in result.json["items"]}
    for n in range(len(CITIES)):
        if n in timed:
            assert table[f"c{n}"] == [("fault", "timeout")]
            assert "get_weather timed out after 0.1s (injected fault)" in tool_results(result)[f"c{n}"][0][0]["content"]
            assert items[f"c{n}"]["turns"][0]["duration_ms"] >= 100
        else:
            assert table[f"c{n}"] == [("mock", None)]
            assert answers(result)[f"c{n}"] == [f"Today in {CITIES[n]}: foggy, 50°F."]
    assert marker(workdir) == ""


def test_mistakes_in_faults_are_located(write: Callable[..., Path], cli: Callable[..., CliResult],
                                        agent_env: dict[str, str]) -> None:
    write("e.yaml", dataset("  get_wether: {faults: {error_rate: 0.1}}"))
    result = cli("validate", "e.yaml", env=agent_env)
    assert result.code == 2
    assert "e.yaml:3:3: dataset: tools.get_wether: the agent has no tool 'get_wether' (did you mean 'get_weather'?)" \
        in result.stderr
    write("d.yaml", dataset("  '*': {returns: 1}\n"
                            "  get_weather: {returns: 1, faults: {error_rate: 2, latncy: 1, seed: x}}"))
    result = cli("validate", "d.yaml", env=agent_env)
    assert result.code == 2
    for expected in ("d.yaml:3:3: dataset: tools.'*' holds only 'faults'",
                     "dataset: tools.get_weather.faults: 'error_rate' is a share of the calls (a number from 0 to 1), "
                     "not 2", "unknown key 'latncy' (did you mean 'latency'?)", "'seed' is a whole number, not 'x'"):
        assert expected in result.stderr
