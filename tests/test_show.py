"""Seeing what happened from the terminal: ``evalcli show RUN ITEM``, reasons in the JSON, the list of failing
conversations after a run, the turn table naming who failed a turn gate; all through the real CLI."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult
from tests.llm_server import LLMServer, verdict

AGENT = '''
import json

def generate(input, **kw):
    if input == "crash":
        raise RuntimeError("the agent fell over")
    if "weather" in input:
        return {"messages": [
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris", "day": "today"})}}]},
            {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"error": "no forecast for Paris"})},
            {"role": "assistant", "content": "Sorry, I have no forecast for Paris."}]}
    return "Hello there!"
'''

DATASET = """
target: tools:generate
gates: [no_tool_errors]
scorers:
  - scorer: {{judge: {{criterion: The assistant gave a forecast., model: openai/judge, api_base: '{url}'}}}}
    id: forecast-judge
data:
  - id: paris
    turns:
      - input: hi
        gates: [{{called_tool: get_weather}}]
      - input: what is the weather in Paris?
        gates: [{{called_tool: get_weather}}]
  - id: greet
    input: hello
  - id: crash
    input: crash
"""


def run_it(llm_server: LLMServer, write: Callable[..., Path], cli: Callable[..., CliResult]) -> CliResult:
    llm_server.responder = lambda request: verdict(False, "No forecast was given; the tool failed for Paris.")
    write("tools.py", AGENT)
    write("d.yaml", DATASET.format(url=llm_server.url))
    return cli("run", "d.yaml", "--no-cache")


def test_show_item_prints_the_conversation_turn_by_turn(llm_server: LLMServer, write: Callable[..., Path],
                                                        cli: Callable[..., CliResult]) -> None:
    result = run_it(llm_server, write, cli)
    assert result.code == 1, result.stderr
    shown = cli("show", "latest", "paris")
    assert shown.code == 0, shown.stderr
    text = shown.stdout
    for fragment in ("Conversation paris", "User: hi", "User: what is the weather in Paris?",
                     "Assistant: Hello there!", "tool call get_weather", '"city": "Paris"', '"day": "today"',
                     "tool result ERROR get_weather", "no forecast for Paris",
                     "Assistant: Sorry, I have no forecast for Paris.",
                     "turn gate called_tool(get_weather)  0  FAIL", "get_weather called 0 times (needs 1)",
                     "turn gate called_tool(get_weather)  1  pass", "gate no_tool_errors  0  FAIL",
                     "get_weather (c1) failed", "scorer forecast-judge  0",
                     "Criterion not satisfied.", "No forecast was given; the tool failed for Paris."):
        assert fragment in text, (fragment, text)
    assert text.index("User: hi") < text.index("User: what is the weather") < text.index("whole conversation")

    by_index = cli("show", "latest", "2")
    assert by_index.code == 0 and "Conversation crash" in by_index.stdout
    assert "turn 0: the target raised RuntimeError: the agent fell over" in by_index.stdout
    assert "Traceback (most recent call last)" in by_index.stdout and "the agent fell over" in by_index.stdout

    as_json = cli("show", "latest", "paris", "--json", "-")
    item = as_json.json["item"]
    assert as_json.json["run_id"] and item["id"] == "paris" and item["passed"] is False
    assert item["outcomes"]["scorers"]["forecast-judge"]["reason"].startswith("Criterion not satisfied.")
    assert item["turns"][0]["outcomes"]["gates"]["called_tool(get_weather)"] == {
        "score": 0.0, "reason": "get_weather called 0 times (needs 1); calls: none (no tool calls were reported)",
        "passed": False}

    unknown = cli("show", "latest", "nope")
    assert unknown.code == 2 and "has no conversation 'nope'" in unknown.stderr and "paris" in unknown.stderr


def test_a_failing_run_lists_its_failing_conversations(llm_server: LLMServer, write: Callable[..., Path],
                                                       cli: Callable[..., CliResult]) -> None:
    result = run_it(llm_server, write, cli)
    out = result.stdout
    listing = out[out.index("Failing conversations (2):"):]
    assert "paris  gate no_tool_errors scored 0: get_weather (c1) failed" in listing
    assert "crash  error: turn 0: the target raised RuntimeError: the agent fell over" in listing
    run_id = json.loads(cli("show", "latest", "--json", "-").stdout)["run_id"]
    assert f"evalcli show {run_id} paris" in listing and f"evalcli show {run_id} crash" in listing
    assert "greet" not in listing
    # the turn table marks the failing turn gate and names who failed it
    assert "FAIL called_tool(get_weather)=0 (failed by paris)" in out


def test_the_failing_list_stops_at_ten(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    items = "\n".join(f"  - {{id: c{n}, input: q{n}}}" for n in range(13))
    write("d.yaml", f"target: agents:echo\ngates: [{{includes: never}}]\ndata:\n{items}\n")
    result = cli("run", "d.yaml")
    assert result.code == 1
    assert "Failing conversations (13):" in result.stdout and "... and 3 more" in result.stdout
    assert result.stdout.count("evalcli show ") == 10 + 1  # ten commands, and the hint after the count


def test_reasons_of_checks_say_what_they_saw(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", "target: agents:tool_agent\nscorers:\n  - includes: rainy\n  - similarity: sunny 72F\n"
          "  - called_tool: search\n  - no_tool_errors\n  - tool_order: [get_weather, search]\n"
          "data: [{id: a, input: q}]\n")
    result = cli("run", "d.yaml", "--json", "-")
    reasons = {k: v["reason"] for k, v in result.json["items"][0]["outcomes"]["scorers"].items()}
    assert reasons["includes(rainy)"] == "'rainy' not found in \"it is sunny and 72°f in brooklyn.\""
    assert reasons["similarity(sunny 72F)"].startswith("similarity 0.") and "sunny 72F" in reasons["similarity(sunny 72F)"]
    assert reasons["called_tool(search)"] == "search called 0 times (needs 1); calls: get_weather"
    assert reasons["no_tool_errors"] == "1 tool call, no errors"
    assert reasons["tool_order([get_weather, search])"].startswith("get_weather -> search not found in order")


def test_warnings_and_errors_are_never_wrapped_when_not_a_terminal(write: Callable[..., Path],
                                                                    cli: Callable[..., CliResult]) -> None:
    long_value = "a rather long expected phrase " * 8
    name = "a-dataset-with-a-rather-long-name-" * 3 + ".yaml"
    write(name, f"target: agents:echo\nscorers: [{{includes: '{long_value.strip()}'}}]\ndata: [{{input: q}}]\n")
    result = cli("run", name, "--html", "r.html", env={"COLUMNS": "80"})
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and len(warnings[0]) > 160 and warnings[0].endswith("the lines that register it")
    write("bad.yaml", f"target: agents:echo\nscorers: [{{includs: '{long_value.strip()}'}}]\ndata: [{{input: q}}]\n")
    bad = cli("validate", "bad.yaml", env={"COLUMNS": "80"})
    first = bad.stderr.splitlines()[0]
    assert first.startswith("error: bad.yaml:2:12: unknown scorer kind 'includs'") and first.endswith("?)")
