"""Tools under the dataset's control (docs/hermetic.md): mocks at dataset, item and turn level, through the real CLI.

The agents are real: ``evalcli.Agent`` against the loopback scripted model, and callable targets whose tools are
``@evalcli.tool`` functions. Every real tool writes a marker file, so a mocked call that ran it anyway is seen.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import CliResult


def tool_results(result: CliResult) -> dict[str, list[list[dict[str, Any]]]]:
    """Each conversation's tool results, turn by turn."""
    return {item["id"]: [[m for m in turn["output"] if m["role"] == "tool"] for turn in item["turns"]]
            for item in result.json["items"]}


def answers(result: CliResult) -> dict[str, list[str]]:
    return {item["id"]: [m["content"] for turn in item["turns"] for m in turn["output"]
                         if m["role"] == "assistant" and m.get("content")] for item in result.json["items"]}


def marker(workdir: Path) -> str:
    path = workdir / "ran.txt"
    return path.read_text() if path.exists() else ""


WEATHER = """
target: tool_agents:agent
tools:
  get_weather:
    - when: {city: London}
      returns: {condition: snowy, temperature_f: 1}
    - when: {city: "/^Par/"}
      raises: the weather service is down
    - returns: {condition: foggy, temperature_f: 50}
data:
  - id: london
    input: What is the weather in London?
  - id: paris
    input: What is the weather in Paris?
  - id: tokyo
    input: What is the weather in Tokyo?
  - id: item-level
    input: What is the weather in London?
    tools:
      get_weather: {returns: {condition: stormy, temperature_f: 40}}
  - id: turn-level
    turns:
      - input: What is the weather in Tokyo?
        tools:
          get_weather: {returns: {condition: hail, temperature_f: 33}}
      - input: What is the weather in London?
scorers:
  - includes: "°F"
"""


def test_mocks_answer_the_agent_and_the_real_tool_never_runs(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                             agent_env: dict[str, str], workdir: Path) -> None:
    write("d.yaml", WEATHER)
    result = cli("run", "d.yaml", "--json", "-", env=agent_env)
    assert result.code == 0, result.stderr
    said = answers(result)
    assert said["london"] == ["Today in London: snowy, 1°F."]  # `when` with an equal value
    assert said["paris"] == ["Sorry, I could not get a forecast for Paris."]  # a "/.../" regex, `raises`
    assert said["tokyo"] == ["Today in Tokyo: foggy, 50°F."]  # the fallback: an entry without `when`
    assert said["item-level"] == ["Today in London: stormy, 40°F."]  # the item's mocks replace the dataset's
    # a turn's mocks hold for that turn; the next turn is back on the item's (here the dataset's)
    assert said["turn-level"] == ["Today in Tokyo: hail, 33°F.", "Today in London: snowy, 1°F."]
    results = tool_results(result)
    paris = results["paris"][0][0]
    assert paris["is_error"] is True and "the weather service is down" in paris["content"]
    assert {m["source"] for turns in results.values() for turn in turns for m in turn} == {"mock"}
    assert marker(workdir) == ""


def test_sequence_delay_unmocked_and_live_sources(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                  agent_env: dict[str, str], workdir: Path) -> None:
    write("d.yaml", """
        target: tool_agents:agent
        data:
          - id: sequence
            inputs:
              - What is the weather in Oslo?
              - What is the weather in Oslo?
              - What is the weather in Oslo?
              - What is the weather in Oslo?
            tools:
              get_weather:
                sequence:
                  - {returns: {condition: clear, temperature_f: 10}}
                  - {raises: rate limited}
                  - {returns: {condition: windy, temperature_f: 20}, delay: 0.3}
          - id: live
            input: What is the weather in Rome?
          - id: refused
            input: What is the weather in Rome?
            unmocked: error
            tools:
              get_weather: {when: {city: Oslo}, returns: {condition: clear, temperature_f: 10}}
        scorers:
          - includes: "°F"
    """)
    result = cli("run", "d.yaml", "--json", "-", env=agent_env)
    assert result.code == 4, result.stderr  # the refused conversation is an error
    said = answers(result)
    assert said["sequence"] == ["Today in Oslo: clear, 10°F.", "Sorry, I could not get a forecast for Oslo.",
                                "Today in Oslo: windy, 20°F.", "Today in Oslo: windy, 20°F."]  # the last repeats
    items = {item["id"]: item for item in result.json["items"]}
    assert items["sequence"]["turns"][2]["duration_ms"] >= 300  # the delay
    assert said["live"] == ["Today in Rome: sunny, 70°F."]
    assert [m["source"] for m in tool_results(result)["live"][0]] == ["live"]
    assert marker(workdir) == "get_weather Rome\n"  # only the unmocked conversation ran the real tool
    refused = items["refused"]
    assert refused["status"] == "error"
    assert "unmocked: error" in refused["error"] and 'get_weather({"city":"Rome","day":"today"})' in refused["error"]


def test_decorated_tools_keep_each_conversation_to_its_own_mocks(write: Callable[..., Path],
                                                                 cli: Callable[..., CliResult],
                                                                 agent_env: dict[str, str], workdir: Path) -> None:
    items = "\n".join(f"""
          - id: k{n}
            input: look up key{n}
            tools:
              lookup: {{returns: value-of-k{n}}}""" for n in range(24))
    write("d.yaml", f"""
        target: tool_agents:looker
        concurrency: 24
        data:{items}
          - id: unmocked
            input: look up plain
        scorers:
          - includes: value
    """)
    result = cli("run", "d.yaml", "--json", "-", env=agent_env)
    assert result.code == 0, result.stderr
    said = answers(result)
    for n in range(24):
        assert said[f"k{n}"] == [f"key{n} is value-of-k{n}"]  # never a neighbour's mock, at 24 in flight
        assert [m["source"] for m in tool_results(result)[f"k{n}"][0]] == ["mock"]
    assert said["unmocked"] == ["plain is live value of plain"]
    assert marker(workdir) == "lookup plain\n"


def test_a_decorated_tool_is_a_plain_call_outside_evalcli(workdir: Path, agent_env: dict[str, str]) -> None:
    import asyncio
    import importlib.util

    spec = importlib.util.spec_from_file_location("tool_agents_plain", workdir / "tool_agents.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert asyncio.run(module.lookup("x")) == "live value of x"
    assert asyncio.run(module.lookup(key="y")) == "live value of y"
    assert marker(workdir) == "lookup x\nlookup y\n"


def test_mistakes_in_tools_are_located(write: Callable[..., Path], cli: Callable[..., CliResult],
                                       agent_env: dict[str, str]) -> None:
    write("d.yaml", """
        target: tool_agents:agent
        tools:
          get_wether: {returns: 1}
          get_weather:
            - when: {town: London}
              returns: 1
        data:
          - input: hi
            tools:
              get_weather: {when: {dya: today}, returns: 1}
        scorers:
          - includes: x
    """)
    result = cli("validate", "d.yaml", env=agent_env)
    assert result.code == 2
    assert "d.yaml:3:3: dataset: tools.get_wether: the agent has no tool 'get_wether' (did you mean " \
           "'get_weather'?)" in result.stderr
    assert "d.yaml:5:14: dataset: tools.get_weather: 'when' names 'town', which is not a parameter" in result.stderr
    assert "d.yaml:10:28:" in result.stderr and "(did you mean 'day'?)" in result.stderr
    write("e.yaml", """
        target: tool_agents:agent
        unmocked: sometimes
        tools:
          get_weather:
            - retruns: 2
            - {returns: 1, raises: boom}
            - {sequence: [], delay: -1}
        data:
          - input: hi
        scorers:
          - includes: x
    """)
    result = cli("validate", "e.yaml", env=agent_env)
    assert result.code == 2
    for expected in ("e.yaml:2:11: dataset: 'unmocked' is one of live, error, not 'sometimes'",
                     "e.yaml:5:7: dataset: tools.get_weather[0]: unknown key 'retruns' (did you mean 'returns'?)",
                     "tools.get_weather[1] needs exactly one of 'returns', 'raises' or 'sequence' (it has returns "
                     "and raises)", "'delay' is seconds (a number >= 0), not -1"):
        assert expected in result.stderr


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=8)


@given(st.dictionaries(st.text(max_size=6), JSON, max_size=5), st.data())
def test_a_when_matches_exactly_the_calls_it_is_a_subset_of(arguments: dict[str, Any], data: st.DataObject) -> None:
    from evalcli.tools import canonical, matches

    keys = data.draw(st.lists(st.sampled_from(sorted(arguments)), unique=True) if arguments else st.just([]))
    subset = {k: arguments[k] for k in keys if "/" not in json.dumps(arguments[k])}  # no "/.../" pattern inside
    assert matches(subset, arguments)  # every subset of the arguments (equal values) matches
    assert matches(None, arguments)  # an entry without `when` matches every call
    missing = data.draw(st.text(max_size=6).filter(lambda k: k not in arguments))
    assert not matches({**subset, missing: 1}, arguments)  # a key the call does not have never does
    changed = {k: [v] for k, v in subset.items()}
    assert not changed or not matches(changed, arguments)  # nor a different value
    assert json.loads(canonical(arguments)) == arguments
    assert canonical(dict(reversed(list(arguments.items())))) == canonical(arguments)  # order never matters


def test_show_and_the_html_report_say_where_each_result_came_from(write: Callable[..., Path],
                                                                  cli: Callable[..., CliResult],
                                                                  agent_env: dict[str, str], workdir: Path) -> None:
    write("d.yaml", """
        target: tool_agents:agent
        data:
          - id: mocked
            input: What is the weather in London?
            tools:
              get_weather: {returns: {condition: snowy, temperature_f: 1}}
          - id: real
            input: What is the weather in Rome?
        scorers:
          - includes: "°F"
    """)
    result = cli("run", "d.yaml", "--html", "report.html", env=agent_env)
    assert result.code == 0, result.stderr
    mocked, real = cli("show", "latest", "mocked"), cli("show", "latest", "real")
    assert "tool result get_weather  (id" in mocked.stdout and ", mock)" in mocked.stdout, mocked.stdout
    assert ", live)" in real.stdout and ", mock)" not in real.stdout
    stored = json.loads(cli("show", "latest", "mocked", "--json", "-").stdout)
    turns = stored["item"]["turns"]
    assert [m["source"] for t in turns for m in t["output"] if m["role"] == "tool"] == ["mock"]
    page = (workdir / "report.html").read_text()
    assert '"source": "mock"' in page or '"source":"mock"' in page
    assert "source: " in page  # the script shows it beside each result


def test_a_services_tools_take_mocks_only_when_its_body_sends_them(write: Callable[..., Path],
                                                                  cli: Callable[..., CliResult]) -> None:
    from tests.agent_server import ScriptedAgent

    agent = ScriptedAgent()
    try:
        write("d.yaml", f"""
            target:
              http: {{url: "{agent.url}/chat"}}
            tools:
              get_weather: {{returns: sunny}}
            data:
              - input: hi
            scorers:
              - includes: ok
        """)
        refused = cli("validate", "d.yaml")
        assert refused.code == 2
        assert "d.yaml:3:1: dataset: the http target's tools run in the service, so 'tools:' cannot mock them" \
               in refused.stderr and "{{ tools }}" in refused.stderr
        write("e.yaml", f"""
            target:
              http:
                url: "{agent.url}/chat"
                body: {{input: "{{{{ input }}}}", tools: "{{{{ tools }}}}"}}
            unmocked: error
            tools:
              get_weather:
                - {{when: {{city: London}}, returns: rainy}}
                - sequence: [{{returns: 1}}, {{raises: down, delay: 0.5}}]
            data:
              - input: hi
            scorers:
              - includes: ok
        """)
        result = cli("run", "e.yaml")
        assert result.code == 0, result.stderr
        [seen] = agent.requests
        assert seen.body["tools"] == {"mocks": {"get_weather": [
            {"when": {"city": "London"}, "returns": "rainy"},
            {"sequence": [{"returns": 1}, {"raises": "down", "delay": 0.5}]}]}, "unmocked": "error", "hermetic": False}
    finally:
        agent.stop()
