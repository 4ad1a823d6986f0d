"""Mocks from recordings (docs/hermetic.md, "Mocks from recordings"): ``evalcli mocks from-tape TAPE
[--from-traces FILE]`` writes the ``tools:`` block that answers the recorded calls.

The round trip is the contract: the block, loaded back as a dataset's ``tools:``, answers every recorded call of a
conversation with what the tape recorded, in order (a hypothesis test), and a real agent replayed from it under
``--hermetic`` gives the recorded run's answers without its tool ever running (through the real CLI).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from evalcli.dataset.tools import parse_tools
from evalcli.dataset.yamlsrc import load_yaml
from evalcli.errors import Problem
from evalcli.tools import Recorded, ToolPlan, ToolsConfig, canonical
from evalcli.tools.fromtape import tools_yaml
from tests.conftest import CliResult
from tests.test_tools_mocks import answers, marker, tool_results


def loaded(text: str) -> ToolsConfig:
    raw, pos, _ = load_yaml(text, "mocks.yaml")
    problems: list[Problem] = []
    config = parse_tools(raw["tools"], ("tools",), pos, "dataset", problems)
    assert not problems and config is not None, "\n".join(map(str, problems))
    return config


VALUES = st.one_of(st.integers(-3, 3), st.sampled_from(["London", "/x/", "a.b", "", "//", "Paris"]), st.booleans(),
                   st.none())
ARGUMENTS = st.dictionaries(st.sampled_from(["city", "day", "n"]), VALUES, max_size=3)
ANSWERS = st.one_of(st.builds(lambda v: ("returns", v), st.one_of(VALUES, st.lists(VALUES, max_size=2),
                                                                  st.dictionaries(st.sampled_from("ab"), VALUES))),
                    st.builds(lambda m: ("raises", m), st.sampled_from(["down", "rate limited"])))


@settings(max_examples=80, deadline=None)
@given(calls=st.lists(st.tuples(st.sampled_from(["get_weather", "search"]), ARGUMENTS, ANSWERS), max_size=10))
def test_the_block_answers_every_recorded_call_in_order(calls: list[tuple[str, dict[str, Any], tuple[str, Any]]]) -> None:
    recorded = [Recorded(tool, canonical(arguments), answer if kind == "returns" else None,
                         answer if kind == "raises" else None) for tool, arguments, (kind, answer) in calls]
    config = loaded(tools_yaml({"id:one": recorded}, "a tape"))
    plan = ToolPlan(config, unmocked="error")
    for tool, arguments, (kind, answer) in calls:
        source, given_back = plan.decide(tool, arguments)
        assert source == "mock" and given_back is not None, (tool, arguments)
        assert (given_back.raises if kind == "raises" else given_back.returns) == answer
        assert (given_back.raises is None) == (kind == "returns")


def test_a_recorded_run_replays_from_its_mocks_under_hermetic(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                             agent_env: dict[str, str], workdir: Path) -> None:
    data = """
data:
  - id: london
    input: What is the weather in London?
  - id: two-cities
    inputs:
      - What is the weather in Tokyo?
      - What is the weather in Paris?
scorers:
  - includes: "°F"
"""
    write("d.yaml", "target: tool_agents:agent" + data)
    recorded = cli("run", "d.yaml", "--record-tools", "tapes", "--json", "-", env=agent_env)
    assert recorded.code == 0, recorded.stderr
    ran = marker(workdir)
    assert ran.count("get_weather") == 3
    made = cli("mocks", "from-tape", "tapes/d.tape.jsonl", env=agent_env)
    assert made.code == 0, made.stderr
    assert "get_weather:" in made.stdout and "when: {city: London, day: today}" in made.stdout
    write("mocked.yaml", "target: tool_agents:agent\nunmocked: error\n" + made.stdout + data)
    replayed = cli("run", "mocked.yaml", "--hermetic", "--json", "-", env=agent_env)
    assert replayed.code == 0, replayed.stderr
    assert answers(replayed) == answers(recorded)
    assert {m["source"] for turns in tool_results(replayed).values() for turn in turns for m in turn} == {"mock"}
    assert marker(workdir) == ran  # the real tool never ran again
    out = cli("mocks", "from-tape", "tapes/d.tape.jsonl", "-o", "tools.yaml", env=agent_env)
    assert out.code == 0 and (workdir / "tools.yaml").read_text() == made.stdout


def test_traces_add_their_tool_spans_and_bad_input_is_named(write: Callable[..., Path],
                                                           cli: Callable[..., CliResult]) -> None:
    def span(conversation: str, start: int, arguments: dict[str, Any], result: Any = None,
             error: str | None = None) -> dict[str, Any]:
        attributes = [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                      {"key": "gen_ai.tool.name", "value": {"stringValue": "lookup"}},
                      {"key": "gen_ai.conversation.id", "value": {"stringValue": conversation}},
                      {"key": "gen_ai.tool.call.arguments", "value": {"stringValue": json.dumps(arguments)}}]
        if result is not None:
            attributes.append({"key": "gen_ai.tool.call.result", "value": {"stringValue": json.dumps(result)}})
        status = {"code": 2, "message": error} if error else {}
        return {"traceId": "t1", "spanId": f"s{start}", "name": "execute_tool lookup", "startTimeUnixNano": str(start),
                "attributes": attributes, "status": status}

    spans = [span("c1", 3, {"key": "a"}, error="quota exceeded"), span("c1", 1, {"key": "a"}, {"v": 1}),
             span("c2", 5, {"key": "a"}, {"v": 1}), span("c2", 6, {"key": "a"}, {"v": 2}),
             {"traceId": "t1", "spanId": "chat", "name": "chat", "attributes": []}]
    write("traces.json", json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    made = cli("mocks", "from-tape", "--from-traces", "traces.json")
    assert made.code == 0, made.stderr
    config = loaded(made.stdout)
    plan = ToolPlan(config, unmocked="error")
    assert [plan.decide("lookup", {"key": "a"})[1] for _ in range(3)] == [
        config.mocks["lookup"][0].answer(0), config.mocks["lookup"][0].answer(1), config.mocks["lookup"][0].answer(2)]
    assert [a.returns or a.raises for a in config.mocks["lookup"][0].answers] == [{"v": 1}, "quota exceeded"]
    assert "# note: lookup({\"key\":\"a\"}): conversations got different answers; those of c1 are kept" in made.stdout
    write("bad.json", '{"spans": []}')
    bad = cli("mocks", "from-tape", "--from-traces", "bad.json")
    assert bad.code == 2 and "bad.json: traces: an OTLP/JSON export is an object with 'resourceSpans'" in bad.stderr
    write("bad.tape.jsonl", '{"tool": "x"}\n')
    bad = cli("mocks", "from-tape", "bad.tape.jsonl")
    assert bad.code == 2 and "bad.tape.jsonl:1: tape: a tape line is an object with identity" in bad.stderr
    assert "Traceback" not in bad.stderr
    none = cli("mocks", "from-tape")
    assert none.code == 2 and "needs a TAPE, or --from-traces FILE" in none.stderr
