"""Recorded conversations (docs/recorded.md): ``transcript:`` items split into turns at each user message, scored as
``inputs`` items are (exact check scores on a hand-computed transcript), no target called or needed, JSONL
exports through ``data_file``, and every mistake located with file:line:col (exit 2)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from evalcli.dataset import load_dataset
from evalcli.errors import DatasetError
from tests.conftest import CliResult

# A conversation recorded elsewhere: a system prompt, two user turns, three tool calls (one result is an error,
# one call has no result), three assistant texts.
TRANSCRIPT = """
      - {role: system, content: You are a weather bot.}
      - {role: user, content: "Weather in Paris, and the time?"}
      - role: assistant
        content: Checking.
        tool_calls:
          - {id: c1, type: function, function: {name: get_weather, arguments: '{"city": "Paris"}'}}
          - {id: c2, type: function, function: {name: get_time, arguments: {tz: CET}}}
      - {role: tool, tool_call_id: c1, content: '{"temp_c": 18}'}
      - {role: tool, tool_call_id: c2, content: '{"error": "clock broken"}'}
      - {role: assistant, content: It is sunny and 18°C in Paris.}
      - {role: user, content: "And Lyon?"}
      - {role: assistant, content: null, tool_calls: [{id: c3, function: {name: get_weather, arguments: '{"city": "Lyon"}'}}]}
      - {role: assistant, content: "Anything else?"}
"""

# Every expected score worked out by hand from TRANSCRIPT: texts "Checking.", "It is sunny and 18°C in Paris.",
# "Anything else?"; calls get_weather(Paris), get_time(CET), get_weather(Lyon); c2 failed, c3 has no result.
EXPECTED = {
    "includes(sunny)": 1.0,
    "equals": 1.0,                                   # the texts joined with nothing, case ignored
    "called_tool(get_weather, times=2)": 1.0,
    "called_tool(get_time, times=2)": 0.0,
    "tool_order([get_weather, get_time])": 1.0,
    "tool_order([get_time, get_time])": 0.0,
    "max_tool_calls(2)": 0.0,                        # three calls
    "no_tool_errors": 0.0,
    "did_not_call(search)": 1.0,
    "used_no_tools": 0.0,
    "tool_args(get_weather, {city: Lyon})": 1.0,
    "tool_args(get_time, {tz: CET})": 1.0,           # arguments recorded as a mapping, read as JSON
    "strict": 1.0,
    "strict-short": 0.0,
    "tool_f1([get_weather, search])": 0.5,           # precision 1/2, recall 1/2
    "json_output": 0.0,                              # the last text is "Anything else?"
}

DATASET = f"""
scorers:
  - includes: sunny
  - scorer: {{equals: "checking.it is sunny and 18°C in paris.anything else?"}}
    id: equals
  - called_tool: {{name: get_weather, times: 2}}
  - called_tool: {{name: get_time, times: 2}}
  - tool_order: [get_weather, get_time]
  - tool_order: [get_time, get_time]
  - max_tool_calls: 2
  - no_tool_errors
  - did_not_call: search
  - used_no_tools
  - tool_args: {{name: get_weather, args: {{city: Lyon}}}}
  - tool_args: {{name: get_time, args: {{tz: CET}}}}
  - scorer: {{trajectory: {{expected: [get_weather, get_time, get_weather], mode: strict}}}}
    id: strict
  - scorer: {{trajectory: {{expected: [get_weather, get_time], mode: strict}}}}
    id: strict-short
  - tool_f1: [get_weather, search]
  - json_output
data:
  - id: recorded
    transcript:{TRANSCRIPT}"""


def test_checks_score_a_recorded_conversation_exactly(write: Callable[..., Path], cli: Callable[..., CliResult]) -> None:
    write("d.yaml", DATASET)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    item = result.json["items"][0]
    assert item["scores"] == EXPECTED
    assert result.json["scores"] == EXPECTED and result.json["target"] == "(recorded)"
    assert item["form"] == "transcript" and item["thread_id"] is None and item["status"] == "ok"
    assert result.json["turn_results"] == []  # scored as an inputs item: no per-turn results


def test_a_transcript_is_split_into_turns_at_each_user_message(write: Callable[..., Path],
                                                               cli: Callable[..., CliResult]) -> None:
    write("d.yaml", DATASET + """  - id: greeting-first
    transcript:
      - {role: assistant, content: "Hi! How can I help?"}
      - {role: developer, content: be brief}
      - {role: user, content: "Is it sunny?"}
      - {role: assistant, content: [{type: text, text: Yes}, {type: text, text: "sunny, 20°C."}]}
""")
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    first, second = result.json["items"]
    assert [t["input"] for t in first["turns"]] == ["Weather in Paris, and the time?", "And Lyon?"]
    assert [[m["role"] for m in t["output"]] for t in first["turns"]] == [["assistant", "tool", "tool", "assistant"],
                                                                            ["assistant", "assistant"]]
    assert first["turns"][0]["output"][0]["tool_calls"][1]["function"]["arguments"] == '{"tz": "CET"}'
    # what came before the first user message is a turn of its own, with no user message; system and developer
    # messages are in no turn
    assert [t["input"] for t in second["turns"]] == ["", "Is it sunny?"]
    assert second["turns"][0]["output"] == [{"role": "assistant", "content": "Hi! How can I help?"}]
    assert second["scores"]["includes(sunny)"] == 1.0  # the last text part of list content
    assert result.json["scores"]["includes(sunny)"] == 1.0 and result.json["scores"]["used_no_tools"] == 0.5
    rows = result.db().execute("SELECT form, thread_id, input FROM items ORDER BY item_index").fetchall()
    assert [tuple(r) for r in rows] == [("transcript", None, "Weather in Paris, and the time?"), ("transcript", None, "")]
    assert result.db().execute("SELECT COUNT(*) FROM turns").fetchone()[0] == 4
    shown = cli("show", "latest", "recorded")
    assert shown.code == 0 and "User: And Lyon?" in shown.stdout and "tool result ERROR get_time" in shown.stdout


def test_no_target_is_called_for_recorded_conversations(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                        workdir: Path) -> None:
    write("d.yaml", "target: agents:recorder\n" + DATASET)
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    assert not (workdir / "calls.jsonl").exists()
    assert result.json["items"][0]["scores"] == EXPECTED and result.json["target"] == "agents:recorder"
    # a target without memory gets no memory warning for recordings (they do not run on it)
    write("f.yaml", "target: agents:forgetful\n" + DATASET)
    forgetful = cli("run", "f.yaml")
    assert forgetful.code == 0 and "no memory" not in forgetful.stderr


def test_a_dataset_that_is_not_all_recorded_needs_a_target(write: Callable[..., Path],
                                                           cli: Callable[..., CliResult]) -> None:
    write("d.yaml", DATASET + "  - {id: live, input: hello}\n")
    result = cli("validate", "d.yaml")
    assert result.code == 2
    assert "d.yaml:1:1: dataset needs 'target'" in result.stderr
    assert "only a dataset whose items are all recorded transcripts may leave it out" in result.stderr
    write("t.yaml", "target: agents:echo\n" + DATASET + "  - {id: live, input: hello}\n")
    mixed = cli("run", "t.yaml", "--json", "-")
    assert mixed.code == 0, mixed.stderr
    assert [i["form"] for i in mixed.json["items"]] == ["transcript", "input"]
    assert mixed.json["items"][1]["turns"][0]["output"][0]["content"] == "You said: hello"


def test_jsonl_exports_of_recorded_conversations(write: Callable[..., Path], cli: Callable[..., CliResult],
                                                 workdir: Path) -> None:
    lines = [{"id": f"log-{n}", "messages": [{"role": "user", "content": f"Weather {n}?"},
                                            {"role": "assistant", "content": "sunny" if n % 2 else "rain"}],
              "labels": {"sunny": "pass" if n % 2 else "fail"}} for n in range(5)]
    (workdir / "logs.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    write("d.yaml", "scorers:\n  - {scorer: {includes: sunny}, id: sunny}\ndata_file: logs.jsonl\n")
    result = cli("run", "d.yaml", "--json", "-")
    assert result.code == 0, result.stderr
    assert [i["id"] for i in result.json["items"]] == [f"log-{n}" for n in range(5)]
    assert result.json["scores"] == {"sunny": 2 / 5}
    dataset = load_dataset(workdir / "d.yaml")
    assert [i.labels for i in dataset.items] == [{"sunny": float(n % 2)} for n in range(5)]
    # a .jsonl dataset whose header has no target (every line after it is recorded)
    header = {"scorers": [{"scorer": {"includes": "sunny"}, "id": "sunny"}]}
    (workdir / "all.jsonl").write_text(json.dumps(header) + "\n" + "\n".join(json.dumps(line) for line in lines) + "\n")
    whole = cli("run", "all.jsonl", "--json", "-")
    assert whole.code == 0, whole.stderr
    assert whole.json["scores"] == {"sunny": 2 / 5} and whole.json["summary"]["total_items"] == 5


INVALID = """\
scorers:
  - scorer: {includes: x}
    id: x
  - scorer: {judge: {criterion: ok, samples: 2}}
    id: two
  - scorer: {judge: {criterion: ok, samples: 11}}
    id: eleven
  - scorer: {judge: {criterion: ok, model: openai/a, models: [openai/b, openai/c, openai/d]}}
    id: both
data:
  - id: with-input
    input: hello
    transcript: [{role: user, content: hi}]
  - id: bad-role
    transcript:
      - {role: user, content: hi}
      - {role: bot, content: hello}
  - id: no-call-id
    transcript:
      - {role: user, content: hi}
      - {role: tool, content: '{"temp": 1}'}
  - id: bad-label
    transcript: [{role: user, content: hi}]
    labels: {x: 1.5}
  - id: unknown-label
    transcript: [{role: user, content: hi}]
    labels: {y: pass}
  - id: empty
    transcript: []
"""


def test_mistakes_in_recordings_labels_and_samples_are_located(write: Callable[..., Path],
                                                               cli: Callable[..., CliResult]) -> None:
    path = write("bad.yaml", INVALID)
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    found = {p.where.removeprefix(f"{path}:"): p.message for p in caught.value.problems}
    assert found == {
        "4:46": "multi_turn_judge: 'samples': samples must be an odd number from 1 to 9 (a majority needs an odd count), got 2",
        "6:46": "multi_turn_judge: 'samples': samples must be an odd number from 1 to 9 (a majority needs an odd count), got 11",
        "8:54": "multi_turn_judge: give either 'model' or 'models' (a panel), not both",
        "13:5": "item 0 (with-input): 'transcript' cannot be combined with 'input'",
        "17:16": "item 1 (bad-role) transcript[1]: unknown role 'bot'",
        "21:9": "item 2 (no-call-id) transcript[1]: a tool message needs 'tool_call_id' (the id of the assistant's tool "
                "call it answers)",
        "24:17": "item 3 (bad-label): label 'x' must be a number from 0 to 1, or pass/fail, got 1.5",
        "27:14": "item 4 (unknown-label): label for unknown scorer id 'y'",
        "29:17": "item 5 (empty): 'transcript' must be a non-empty array of messages",
    }
    result = cli("run", "bad.yaml")
    assert result.code == 2 and not (path.parent / "evalcli.db").exists()
    assert "bad.yaml:17:16: item 1 (bad-role) transcript[1]: unknown role 'bot'" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(("snippet", "message"), [
    ("transcript: [{role: user, content: hi}]\n    inputs: [a]", "'transcript' cannot be combined with 'inputs'"),
    ("transcript: [{role: user, content: hi}]\n    messages: [{role: user, content: hi}]",
     "'transcript' cannot be combined with 'messages'"),
    ("transcript: [{role: user}]", "a user message needs text 'content'"),
    ("transcript: [{content: hi}]", "must be a mapping with 'role' and 'content'"),
    ("transcript: [{role: assistant, content: x, tool_calls: [{id: a}]}]", "tool call 0 needs 'function' with a 'name'"),
    ("transcript: [{role: system, content: x}]", "has no user, assistant or tool message"),
    ("transcript: [{role: user, content: hi}]\n    labels: {x: yes}", "label 'x' must be a number from 0 to 1, or "
                                                                     "pass/fail, got True"),
    ("transcript: [{role: user, content: hi}]\n    labels: [x]", "'labels' must be a mapping of scorer id -> score"),
])
def test_each_recording_mistake_has_a_clear_message(workdir: Path, snippet: str, message: str) -> None:
    path = workdir / "d.yaml"
    path.write_text(f"scorers: [{{scorer: {{includes: x}}, id: x}}]\ndata:\n  - id: a\n    {snippet}\n")
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    assert any(message in p.message and p.where.startswith(f"{path}:") for p in caught.value.problems), \
        caught.value.problems


def test_labels_on_scripted_items_and_their_values(workdir: Path) -> None:
    path = workdir / "d.yaml"
    path.write_text("target: agents:echo\ngates: [{scorer: {includes: said}, id: g}]\n"
                    "scorers: [{scorer: {includes: x}, id: x}]\n"
                    "data:\n  - {input: a, labels: {g: pass, x: 0.25}}\n  - {input: b, labels: {x: fail}}\n"
                    "  - {input: c, labels: {g: 1, x: 0}}\n")
    items = load_dataset(path).items
    assert [i.labels for i in items] == [{"g": 1.0, "x": 0.25}, {"x": 0.0}, {"g": 1.0, "x": 0.0}]
    assert [i.recorded for i in items] == [False, False, False]


def test_the_schema_describes_recordings_and_labels() -> None:
    import jsonschema
    import yaml

    from evalcli.dataset.scaffold import dataset_schema
    from tests.conftest import REPO

    schema = dataset_schema()
    shipped = sorted((REPO / "datasets" / "judges").glob("*.yaml"))
    assert len(shipped) == 8
    for path in shipped:
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)
    jsonschema.validate({"scorers": ["x"], "data": [{"messages": [{"role": "user", "content": "hi"}],
                                                    "labels": {"x": "pass"}}]}, schema)
    for wrong in ({"transcript": [{"role": "bot", "content": "hi"}]},
                  {"transcript": [{"role": "user", "content": "hi"}], "labels": {"x": 2}},
                  {"transcript": [{"role": "user", "content": "hi"}], "input": "hi"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"scorers": ["x"], "data": [wrong]}, schema)
