"""Adversarial try (adv25) of hermetic worlds as users meet them (docs/hermetic.md: MCP tools, faults, tapes,
``--hermetic``; docs/targets/a2a.md): the real CLI, real MCP servers made with the ``mcp`` package, a real ADK agent
and ``evalcli.Agent`` against the loopback scripted model."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tests.framework_agents import needs
from tests.llm_server import LLMServer, scripted_weather
from tests.test_tools_mocks import AGENT, answers, marker, tool_results

CITIES = ["London", "Paris", "Tokyo", "Rome", "Oslo", "Lima"]
ITEMS = "data:\n" + "".join(f'  - {{id: {c.lower()}, input: "What is the weather in {c}?"}}\n' for c in CITIES) + \
    'scorers:\n  - includes: "°F"\n'


@pytest.fixture
def agent_env(workdir: Path, llm_server: LLMServer) -> dict[str, str]:
    (workdir / "tool_agents.py").write_text(AGENT)
    llm_server.responder = scripted_weather
    return {"OPENAI_BASE_URL": llm_server.url, "OPENAI_API_KEY": "sk-test-not-a-real-key-0123456789",
            "NO_PROXY": "127.0.0.1"}


def fault_table(result: CliResult) -> dict[str, list[tuple[str | None, str | None]]]:
    return {item: [(m.get("source"), m.get("fault")) for turn in turns for m in turn]
            for item, turns in tool_results(result).items()}


@pytest.mark.parametrize("strict", ["--hermetic", "unmocked: error"])
def test_an_injected_fault_never_hides_a_call_the_plan_refuses(strict: str, write: Callable[..., Path],
                                                               cli: Callable[..., CliResult],
                                                               agent_env: dict[str, str], workdir: Path) -> None:
    """Under --hermetic (or unmocked: error) a call no mock answers is the conversation's error. A fault on every tool
    ('*') drew an error for most of those calls first, and the conversation passed on the fault: whether a hermetic
    run caught an unmocked tool depended on the seed."""
    head = "target: tool_agents:agent\n" + ("unmocked: error\n" if strict == "unmocked: error" else "")
    write("d.yaml", head + "tools:\n  '*': {faults: {error_rate: 0.7, seed: 3}}\n" + ITEMS)
    flags = ["--hermetic"] if strict == "--hermetic" else []
    result = cli("run", "d.yaml", *flags, "--json", "-", env=agent_env)
    assert result.code == 4, result.stderr
    items = {item["id"]: item for item in result.json["items"]}
    for city in CITIES:
        item = items[city.lower()]
        assert item["status"] == "error", (city, fault_table(result)[city.lower()])
        assert f'get_weather({{"city":"{city}","day":"today"}}) has no mock' in item["error"]
    assert marker(workdir) == ""  # nothing ran live
    # a call a mock answers still meets its faults (London's mock, under the same seed)
    write("m.yaml", head + "tools:\n  '*': {faults: {error_rate: 1, seed: 3}}\n"
                           "  get_weather:\n    - when: {city: London}\n      returns: {condition: snowy}\n" + ITEMS)
    mocked = cli("run", "m.yaml", *flags, "--json", "-", env=agent_env)
    assert fault_table(mocked)["london"] == [("fault", "error")]
    assert answers(mocked)["london"] == ["Sorry, I could not get a forecast for London."]
