"""Ingest of the other trace formats and dialects (docs/otel.md, "Scoring exported traces"): a Jaeger JSON export,
Google ADK's ``gcp.vertex.agent.*`` spans in OTLP JSON, and what is wrong in each reader's input (OTLP, Jaeger,
Phoenix) as located warnings and errors: the file, the line, the span. Through the real CLI."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from tests.conftest import REPO, CliResult, run_cli
from tests.otel_traces.shapes import adk_invocation, jaeger_span, jaeger_weather

SCORING = """
    gates:
      - called_tool: get_weather
    scorers: [no_tool_errors]
    data_file: %s
    """


def cli(tmp_path: Path, data_file: str, *args: str, body: str = SCORING) -> CliResult:
    path = tmp_path / "d.yaml"
    path.write_text(textwrap.dedent(body % data_file).lstrip("\n"))
    done = run_cli(["run", str(path), "--db", str(tmp_path / "e.db"), *args], REPO, {})
    return CliResult(done.code, done.stdout, done.stderr, tmp_path)


def roles(item: dict[str, Any], turn: int = 0) -> list[str]:
    return [m["role"] for m in item["turns"][turn]["output"]]


def test_a_jaeger_export_is_scored_as_recorded_conversations(tmp_path: Path) -> None:
    export = {"data": [jaeger_weather("5b8efff798038103d269b633813f0001", "support-1", "Paris"),
                       jaeger_weather("5b8efff798038103d269b633813f0002", "support-2", "Atlantis", fails=True)],
              "total": 0, "limit": 0, "offset": 0, "errors": None}
    (tmp_path / "jaeger.json").write_text(json.dumps(export, indent=2))
    done = cli(tmp_path, "jaeger.json", "--json", "-")
    assert done.code == 0, done.stderr
    by_id = {i["id"]: i for i in done.json["items"]}
    assert set(by_id) == {"support-1", "support-2"}  # grouped by gen_ai.conversation.id, which is the identity
    paris = by_id["support-1"]
    assert paris["turns"][0]["input"] == "What is the weather in Paris?"
    assert roles(paris) == ["assistant", "tool", "assistant"]
    [call] = paris["turns"][0]["output"][0]["tool_calls"]
    assert call["id"] == "call_1" and json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert json.loads(paris["turns"][0]["output"][1]["content"])["condition"] == "sunny"
    assert paris["turns"][0]["output"][2]["content"] == "Paris: sunny, 75°F."
    assert paris["scores"]["no_tool_errors"] == 1.0
    failed = by_id["support-2"]["turns"][0]["output"][1]
    assert failed["is_error"] is True and failed["content"] == "Error: no forecast for Atlantis"
    assert by_id["support-2"]["scores"]["no_tool_errors"] == 0.0


def test_google_adk_spans_are_read_through_their_gcp_vertex_agent_attributes(tmp_path: Path) -> None:
    session = "adk-session-7f3a"
    first = adk_invocation("4bf92f3577b34da6a3ce929d0e0e0001", session, "Weather in Paris?", "Paris", 1_000_000, [])
    history = [{"role": "user", "parts": [{"text": "Weather in Paris?"}]},
               {"role": "model", "parts": [{"text": "Paris: sunny, 75°F."}]}]
    second = adk_invocation("4bf92f3577b34da6a3ce929d0e0e0002", session, "And in Tokyo?", "Tokyo", 9_000_000, history)
    request = {"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "weather-adk"}}]},
        "scopeSpans": [{"scope": {"name": "gcp.vertex.agent", "version": "1.18.0"}, "spans": first + second}]}]}
    (tmp_path / "adk.json").write_text(json.dumps(request))
    done = cli(tmp_path, "adk.json", "--json", "-")
    assert done.code == 0, done.stderr
    [item] = done.json["items"]
    assert item["id"] == session  # the ADK session is the conversation: two invocations, two turns
    assert [t["input"] for t in item["turns"]] == ["Weather in Paris?", "And in Tokyo?"]
    for turn, city in zip(item["turns"], ["Paris", "Tokyo"], strict=True):
        output = turn["output"]
        assert [m["role"] for m in output] == ["assistant", "tool", "assistant"]
        [call] = output[0]["tool_calls"]
        assert call["function"]["name"] == "get_weather"
        assert json.loads(call["function"]["arguments"]) == {"city": city}
        assert output[1]["tool_call_id"] == call["id"]
        assert json.loads(output[1]["content"]) == {"city": city, "condition": "sunny", "temperature_f": 75}
        assert output[2]["content"] == f"{city}: sunny, 75°F."
    assert item["scores"]["no_tool_errors"] == 1.0


def test_an_unreadable_jaeger_span_is_a_warning_naming_the_file_line_and_span(tmp_path: Path) -> None:
    good = jaeger_weather("5b8efff798038103d269b633813f0001", "support-1", "Paris")
    broken = jaeger_span("5b8efff798038103d269b633813f0009", "00000000deadbeef", None, "invoke_agent", 5, {})
    broken["startTime"] = "yesterday"
    lines = [json.dumps({"data": [good]}), json.dumps({"data": [{"traceID": "x", "spans": [broken],
                                                                 "processes": {}}]})]
    (tmp_path / "jaeger.jsonl").write_text("\n".join(lines) + "\n")
    done = cli(tmp_path, "jaeger.jsonl", "--json", "-")
    assert done.code == 0, done.stderr
    assert f"{tmp_path / 'jaeger.jsonl'}:2: span 00000000deadbeef:" in done.stderr, done.stderr
    assert "skipped" in done.stderr and "Traceback" not in done.stderr
    assert [i["id"] for i in done.json["items"]] == ["support-1"]


def test_an_unreadable_phoenix_span_is_a_located_warning_and_a_broken_line_a_located_error(tmp_path: Path) -> None:
    span = {"name": "ChatCompletion", "context": {"trace_id": "ab" * 16, "span_id": "cd" * 8}, "parent_id": None,
            "start_time": "2025-01-01T00:00:00+00:00", "end_time": "2025-01-01T00:00:01+00:00",
            "status_code": "OK", "attributes": {"openinference": {"span": {"kind": "LLM"}},
                                                "session": {"id": "phx-1"},
                                                "input": {"value": "Weather in Paris?"},
                                                "llm": {"model_name": "gpt-4.1-mini", "output_messages": [
                                                    {"message": {"role": "assistant",
                                                                 "content": "Paris: sunny."}}]}}}
    no_context = {"name": "lost", "span_id": "ef" * 8, "attributes": {}}
    bad_time = {**span, "context": {"trace_id": "ab" * 16, "span_id": "12" * 8}, "start_time": "noon"}
    (tmp_path / "phoenix.jsonl").write_text("\n".join(json.dumps(s) for s in (span, no_context, bad_time)) + "\n")
    body = "scorers: [{includes: sunny}]\ndata_file: %s\n"
    done = cli(tmp_path, "phoenix.jsonl", "--json", "-", body=body)
    assert done.code == 0, done.stderr
    where = tmp_path / "phoenix.jsonl"
    assert f"{where}:2: span {'ef' * 8}:" in done.stderr, done.stderr
    assert f"{where}:3: span {'12' * 8}:" in done.stderr, done.stderr
    [item] = done.json["items"]
    assert item["id"] == "phx-1" and item["turns"][0]["input"] == "Weather in Paris?"

    where.write_text(json.dumps(span) + "\n" + json.dumps(span)[:-7] + "\n")
    broken = cli(tmp_path, "phoenix.jsonl", body=body)
    assert broken.code == 2 and "Traceback" not in broken.stderr
    assert f"{where}:2:" in broken.stderr and "not valid JSON" in broken.stderr, broken.stderr


def test_a_document_no_reader_knows_is_a_located_error(tmp_path: Path) -> None:
    (tmp_path / "spans.json").write_text(json.dumps({"data": [{"traceID": "ab" * 16, "spans": "none"}]}))
    done = cli(tmp_path, "spans.json")
    assert done.code == 2 and "Traceback" not in done.stderr
    assert f"{tmp_path / 'spans.json'}" in done.stderr and "no span evalcli can read" in done.stderr, done.stderr


def test_a_pretty_printed_export_cut_short_is_an_error_where_it_breaks(tmp_path: Path) -> None:
    text = json.dumps({"data": [jaeger_weather("5b8efff798038103d269b633813f0001", "support-1", "Paris")]}, indent=2)
    lines = text.splitlines()
    (tmp_path / "jaeger.json").write_text("\n".join(lines[:40]) + "\n")  # an export cut short
    done = cli(tmp_path, "jaeger.json")
    assert done.code == 2 and "Traceback" not in done.stderr
    assert f"{tmp_path / 'jaeger.json'}:41:" in done.stderr and "not valid JSON" in done.stderr, done.stderr
    assert "export it again" in done.stderr


def opening_line(text: str, marker: str, above: int) -> int:
    """The line of the ``{`` that opens the object whose line ``marker`` is, ``above`` lines below it."""
    [found] = [n for n, line in enumerate(text.splitlines(), start=1) if marker in line]
    assert text.splitlines()[found - above - 1].strip() == "{"
    return found - above


def test_an_unreadable_span_of_a_pretty_printed_export_is_located_at_its_own_line(tmp_path: Path) -> None:
    """A one-document export written over lines (Jaeger's, Phoenix's, as their UIs save them): the warning names the
    line where the bad span starts, not line 1 (docs/otel.md, "Mistakes")."""
    broken = jaeger_span("5b8efff798038103d269b633813f0009", "00000000deadbeef", None, "invoke_agent", 5, {})
    broken["startTime"] = "yesterday"
    export = {"data": [jaeger_weather("5b8efff798038103d269b633813f0001", "support-1", "Paris"),
                       {"traceID": "5b8efff798038103d269b633813f0009", "spans": [broken], "processes": {}}]}
    text = json.dumps(export, indent=2)
    (tmp_path / "jaeger.json").write_text(text + "\n")
    line = opening_line(text, '"spanID": "00000000deadbeef"', 2)
    assert line > 40
    done = cli(tmp_path, "jaeger.json", "--json", "-")
    assert done.code == 0, done.stderr
    assert f"{tmp_path / 'jaeger.json'}:{line}: span 00000000deadbeef: " in done.stderr, done.stderr
    assert [i["id"] for i in done.json["items"]] == ["support-1"]

    good = {"name": "ChatCompletion", "context": {"trace_id": "ab" * 16, "span_id": "cd" * 8}, "parent_id": None,
            "start_time": "2025-01-01T00:00:00+00:00", "end_time": "2025-01-01T00:00:01+00:00", "status_code": "OK",
            "attributes": {"session": {"id": "phx-1"}, "input": {"value": "Weather in Paris?"},
                           "output": {"value": "Paris: sunny."}}}
    bad_time = {**good, "context": {"trace_id": "ab" * 16, "span_id": "12" * 8}, "start_time": "noon"}
    text = json.dumps({"data": [good, {"name": "lost", "attributes": {}}, bad_time]}, indent=2)
    (tmp_path / "phoenix.json").write_text(text)
    done = cli(tmp_path, "phoenix.json", "--json", "-", body="scorers: [{includes: sunny}]\ndata_file: %s\n")
    assert done.code == 0, done.stderr
    lost, late = opening_line(text, '"name": "lost"', 1), opening_line(text, '"span_id": "1212', 4)
    assert f"{tmp_path / 'phoenix.json'}:{lost}: span (no span_id): " in done.stderr, done.stderr
    assert f"{tmp_path / 'phoenix.json'}:{late}: span {'12' * 8}: " in done.stderr, done.stderr
