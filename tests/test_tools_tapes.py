"""Tapes and hermetic runs (docs/hermetic.md): ``--record-tools DIR`` writes every tool call, ``tools: {replay: PATH}``
answers from it (``exact``: same tool and arguments, nth occurrence; ``name``: same tool, in order), and
``--hermetic`` makes every call no mock or tape answers the conversation's error. Recorded with the real tool,
then replayed with it disabled."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CliResult
from tests.llm_server import LLMServer, scripted_weather

AGENT = '''
import os, pathlib
import evalcli


def get_weather(city: str, day: str = "today") -> dict:
    """Get the weather for a city."""
    if os.environ.get("TOOL_DISABLED"):
        raise RuntimeError("the live weather service must not be called")
    if city == "Atlantis":
        raise LookupError("no such city")
    return {"city": city, "day": day, "condition": "live" + city.lower(), "temperature_f": len(city)}


agent = evalcli.Agent(model="openai/scripted", tools=[get_weather], api_base=os.environ.get("OPENAI_BASE_URL"))
'''

DATA = """
data:
  - id: london
    inputs:
      - What is the weather in London?
      - What is the weather in London tomorrow?
  - id: paris
    input: What is the weather in Paris?
  - id: atlantis
    input: What is the weather in Atlantis?
scorers:
  - includes: "°F"
"""


def env(server: LLMServer, **more: str) -> dict[str, str]:
    return {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "sk-test-not-a-real-key-0123456789",
            "NO_PROXY": "127.0.0.1", **more}


def answers(result: CliResult) -> dict[str, list[str]]:
    return {item["id"]: [m["content"] for turn in item["turns"] for m in turn["output"]
                         if m["role"] == "assistant" and m.get("content")] for item in result.json["items"]}


def sources(result: CliResult) -> dict[str, list[str]]:
    return {item["id"]: [m["source"] for turn in item["turns"] for m in turn["output"] if m["role"] == "tool"]
            for item in result.json["items"]}


def test_record_then_replay_with_the_live_tool_disabled(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                        llm_server: LLMServer, workdir: Path) -> None:
    llm_server.responder = scripted_weather
    (workdir / "tape_agent.py").write_text(AGENT)
    write("weather.yaml", "target: tape_agent:agent\n" + DATA)
    recorded = cli("run", "weather.yaml", "--record-tools", "tapes", "--json", "-", env=env(llm_server))
    assert recorded.code == 0, recorded.stderr
    tape = workdir / "tapes" / "weather.tape.jsonl"
    lines = [json.loads(line) for line in tape.read_text().splitlines()]
    assert lines == [
        {"identity": "id:london", "turn": 0, "call": 0, "tool": "get_weather",
         "arguments": {"city": "London", "day": "today"},
         "result": {"city": "London", "day": "today", "condition": "livelondon", "temperature_f": 6}},
        {"identity": "id:london", "turn": 1, "call": 1, "tool": "get_weather",
         "arguments": {"city": "London", "day": "tomorrow"},
         "result": {"city": "London", "day": "tomorrow", "condition": "livelondon", "temperature_f": 6}},
        {"identity": "id:paris", "turn": 0, "call": 0, "tool": "get_weather",
         "arguments": {"city": "Paris", "day": "today"},
         "result": {"city": "Paris", "day": "today", "condition": "liveparis", "temperature_f": 5}},
        {"identity": "id:atlantis", "turn": 0, "call": 0, "tool": "get_weather",
         "arguments": {"city": "Atlantis", "day": "today"}, "error": "no such city"}]
    live = answers(recorded)

    write("replayed.yaml", "target: tape_agent:agent\ntools: {replay: tapes/weather.tape.jsonl}\n" + DATA)
    replayed = cli("run", "replayed.yaml", "--hermetic", "--json", "-", env=env(llm_server, TOOL_DISABLED="1"))
    assert replayed.code == 0, replayed.stderr
    assert answers(replayed) == live  # the same answers, the live tool never called
    assert answers(replayed)["london"] == ["Today in London: livelondon, 6°F.", "Tomorrow in London: livelondon, 6°F."]
    assert sources(replayed) == {"london": ["replay", "replay"], "paris": ["replay"], "atlantis": ["replay"]}
    [atlantis] = [m for item in replayed.json["items"] if item["id"] == "atlantis"
                  for m in item["turns"][0]["output"] if m["role"] == "tool"]
    assert atlantis["is_error"] is True and "no such city" in atlantis["content"]  # a recorded error replays as one


def test_hermetic_misses_and_name_matching(write: Callable[..., Path], cli: Callable[..., CliResult],
                                           llm_server: LLMServer, workdir: Path) -> None:
    llm_server.responder = scripted_weather
    (workdir / "tape_agent.py").write_text(AGENT)
    (workdir / "t.tape.jsonl").write_text(json.dumps(
        {"identity": "id:rome", "turn": 0, "call": 0, "tool": "get_weather", "arguments": {"city": "Milan", "day": "today"},
         "result": {"condition": "taped", "temperature_f": 1}}) + "\n")
    body = """
        data:
          - id: rome
            input: What is the weather in Rome?
          - id: oslo
            input: What is the weather in Oslo?
            tools:
              get_weather: {returns: {condition: mocked, temperature_f: 2}}
        scorers:
          - includes: "°F"
    """
    write("exact.yaml", "target: tape_agent:agent\ntools: {replay: t.tape.jsonl}\n" + body.replace("\n        ", "\n"))
    exact = cli("run", "exact.yaml", "--hermetic", "--json", "-", env=env(llm_server, TOOL_DISABLED="1"))
    assert exact.code == 4, exact.stderr
    items = {item["id"]: item for item in exact.json["items"]}
    assert items["rome"]["status"] == "error"  # exact: Rome's arguments are not on the tape
    assert items["rome"]["error"] == ('turn 0: --hermetic: the tool call get_weather({"city":"Rome","day":"today"}) has '
                                      'no mock (and the tape has no answer for it: this conversation\'s recordings not yet '
                                      'replayed are get_weather({"city":"Milan","day":"today"}))')
    assert items["oslo"]["status"] == "ok" and answers(exact)["oslo"] == ["Today in Oslo: mocked, 2°F."]
    write("name.yaml", "target: tape_agent:agent\ntools: {replay: t.tape.jsonl, match: name}\n"
          + body.replace("\n        ", "\n"))
    by_name = cli("run", "name.yaml", "--hermetic", "--json", "-", env=env(llm_server, TOOL_DISABLED="1"))
    assert by_name.code == 0, by_name.stderr
    assert answers(by_name)["rome"] == ["Today in Rome: taped, 1°F."]  # name: the same tool, in order
    unmocked = cli("run", "name.yaml", "--json", "-", env=env(llm_server))  # not hermetic: a miss runs live
    assert unmocked.code == 0 and answers(unmocked)["rome"] == ["Today in Rome: taped, 1°F."]


def test_a_missing_or_broken_tape_is_a_validation_error(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                        llm_server: LLMServer, workdir: Path) -> None:
    (workdir / "tape_agent.py").write_text(AGENT)
    write("d.yaml", "target: tape_agent:agent\ntools: {replay: nope.tape.jsonl, match: fuzzy}\n" + DATA)
    result = cli("validate", "d.yaml", env=env(llm_server))
    assert result.code == 2
    assert "d.yaml:2:41: dataset: tools.match is one of exact, name, not 'fuzzy'" in result.stderr
    write("e.yaml", "target: tape_agent:agent\ntools: {replay: nope.tape.jsonl}\n" + DATA)
    result = cli("validate", "e.yaml", env=env(llm_server))
    assert result.code == 2 and "e.yaml:2:17: dataset: tape 'nope.tape.jsonl' not found" in result.stderr
    (workdir / "bad.tape.jsonl").write_text('{"identity": "a", "tool": "x", "arguments": {}, "result": 1}\nnot json\n')
    write("f.yaml", "target: tape_agent:agent\ntools: {replay: bad.tape.jsonl}\n" + DATA)
    result = cli("validate", "f.yaml", env=env(llm_server))
    assert result.code == 2 and "bad.tape.jsonl:2: dataset: tape 'bad.tape.jsonl': not valid JSON" in result.stderr
