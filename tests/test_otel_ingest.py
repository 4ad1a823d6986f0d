"""Ingest and export (docs/otel.md): OTLP JSON written by a real instrumented agent outside evalcli, and by evalcli's
own ``--otel-file`` around a captured agent, read back with ``data_file:`` as recorded conversations and scored;
located warnings and errors for what cannot be read; secrets redacted in the export."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from evalcli.otel.readers import blocks_text
from tests.conftest import REPO, CliResult, run_cli
from tests.llm_server import LLMServer, scripted_weather
from tests.reliability_helpers import SUBPROCESS_TIMEOUT

KEY = "sk-test-not-a-real-key-0123456789"


def cli(tmp_path: Path, server: LLMServer | None, body: str, *args: str) -> CliResult:
    path = tmp_path / "d.yaml"
    path.write_text(textwrap.dedent(body).lstrip("\n"))
    env = {"OPENAI_API_KEY": KEY, "NO_PROXY": "127.0.0.1"}
    if server is not None:
        env["OPENAI_BASE_URL"] = server.url
    done = run_cli(["run", str(path), "--db", str(tmp_path / "e.db"), *args], REPO, env)
    return CliResult(done.code, done.stdout, done.stderr, tmp_path)


def spans_of(path: Path) -> list[dict[str, Any]]:
    return [span for line in path.read_text().splitlines() for r in json.loads(line)["resourceSpans"]
            for s in r["scopeSpans"] for span in s["spans"]]


def attributes(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}


SCORING = """
    gates:
      - called_tool: get_weather
      - scorer: {includes: "°F"}
        id: gave-fahrenheit
    data_file: traces.jsonl
    """


def test_an_apps_own_otlp_export_is_scored_as_recorded_conversations(llm_server: LLMServer,
                                                                    tmp_path: Path) -> None:
    llm_server.responder = scripted_weather
    out = tmp_path / "traces.jsonl"
    subprocess.run([sys.executable, "-m", "tests.otel_agents.export_spans", str(out),
                    "conv-a:What is the weather in London?", "conv-b:What is the weather in Atlantis?",
                    "conv-a:What about tomorrow?"], cwd=REPO, check=True, timeout=SUBPROCESS_TIMEOUT,
                   env={**__import__("os").environ, "OPENAI_BASE_URL": llm_server.url, "OPENAI_API_KEY": KEY,
                        "PYTHONPATH": str(REPO)})
    done = cli(tmp_path, None, SCORING, "--json", "-")
    assert done.code == 1, done.stderr  # conv-b's tool failed and it gave no forecast
    items = {i["id"]: i for i in done.json["items"]}
    assert set(items) == {"conv-a", "conv-b"}
    a = items["conv-a"]
    assert [t["input"] for t in a["turns"]] == ["What is the weather in London?", "What about tomorrow?"]
    first, second = (t["output"] for t in a["turns"])
    assert [m["role"] for m in first] == ["assistant", "tool", "assistant"]
    assert json.loads(first[0]["tool_calls"][0]["function"]["arguments"]) == {"city": "London", "day": "today"}
    assert '"rainy"' in first[1]["content"] and first[2]["content"] == "Today in London: rainy, 54°F."
    assert second[-1]["content"] == "Tomorrow in London: cloudy, 57°F."
    assert a["gate_scores"] == {"called_tool(get_weather)": 1.0, "gave-fahrenheit": 1.0} and a["passed"] is True
    b = items["conv-b"]["turns"][0]["output"]
    assert b[1]["is_error"] is True and "no forecast for Atlantis" in b[1]["content"]


def test_evalclis_own_export_nests_captured_spans_and_scores_and_reads_back(llm_server: LLMServer,
                                                                           tmp_path: Path) -> None:
    llm_server.responder = scripted_weather
    out = tmp_path / "traces.jsonl"
    done = cli(tmp_path, llm_server, f"""
        target: tests.otel_agents.pydantic_spans:ask
        gates: [{{called_tool: get_weather}}]
        scorers: [{{includes: "{KEY}"}}]
        data:
          - id: london
            turns:
              - input: 'What is the weather in London?'
              - input: 'And my key is {KEY}, what about tomorrow?'
        """, "--otel-file", str(out), "--json", "-")
    assert done.code in (0, 1), done.stderr
    text = out.read_text()
    assert KEY not in text and "[redacted]" in text  # the user's words and the scorer's spec, redacted
    spans = spans_of(out)
    by_id = {s["spanId"]: s for s in spans}
    [run] = [s for s in spans if s["name"].startswith("evalcli.run")]
    [conversation] = [s for s in spans if s["name"].startswith("evalcli.conversation")]
    turns = sorted((s for s in spans if s["name"].startswith("evalcli.turn")), key=lambda s: s["name"])
    assert conversation["parentSpanId"] == run["spanId"] and len(turns) == 2
    assert all(t["parentSpanId"] == conversation["spanId"] for t in turns)
    assert len({s["traceId"] for s in spans}) == 1
    thread = attributes(conversation)["gen_ai.conversation.id"]
    assert thread and all(attributes(t)["gen_ai.conversation.id"] == thread for t in turns)
    agent = [s for s in spans if s["name"].startswith("invoke_agent")]
    assert len(agent) == 2 and {a["parentSpanId"] for a in agent} == {t["spanId"] for t in turns}
    [tool] = [s for s in spans if s["name"] == "execute_tool get_weather"]  # turn 2 has no city: no memory
    assert by_id[tool["parentSpanId"]]["name"].startswith("invoke_agent")
    [called] = [e for e in conversation["events"] if attributes(e)["gen_ai.evaluation.name"] ==
                "called_tool(get_weather)"]
    assert called["name"] == "gen_ai.evaluation.result"
    assert attributes(called)["gen_ai.evaluation.score.value"] == 1.0
    assert attributes(called)["gen_ai.evaluation.score.label"] == "pass"
    assert len(conversation["events"]) == 2

    again = cli(tmp_path, None, SCORING, "--json", "-")
    assert again.code == 0, again.stderr
    [item] = again.json["items"]
    assert item["id"] == thread
    assert item["turns"][0]["input"] == "What is the weather in London?"
    assert [m["role"] for m in item["turns"][0]["output"]] == ["assistant", "tool", "assistant"]


def test_a_malformed_trace_file_is_a_located_error_and_an_unreadable_span_a_located_warning(tmp_path: Path) -> None:
    good = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "chat", "startTimeUnixNano": "1",
            "endTimeUnixNano": "2", "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": "Hi"}]}])}},
                {"key": "gen_ai.output.messages", "value": {"stringValue": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": "Hello °F"}]}])}}]}
    bad = {"traceId": "ab" * 16, "name": "no id"}
    lines = [{"resourceSpans": [{"scopeSpans": [{"spans": [good]}]}]},
             {"resourceSpans": [{"scopeSpans": [{"spans": [bad]}]}]}]
    (tmp_path / "traces.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    done = cli(tmp_path, None, "scorers: [{includes: '°F'}]\ndata_file: traces.jsonl\n", "--json", "-")
    assert done.code == 0, done.stderr
    assert f"{tmp_path / 'traces.jsonl'}:2: span (no spanId): it has no valid traceId and spanId: skipped" \
        in done.stderr
    [item] = done.json["items"]
    assert item["id"] == "ab" * 16 and item["turns"][0]["input"] == "Hi"

    (tmp_path / "traces.jsonl").write_text(json.dumps(lines[0]) + "\n{not json\n")
    broken = cli(tmp_path, None, "scorers: [{includes: '°F'}]\ndata_file: traces.jsonl\n")
    assert broken.code == 2
    assert f"{tmp_path / 'traces.jsonl'}:2:2: not valid JSON" in broken.stderr
    assert "Traceback" not in broken.stderr


def test_a_tool_span_with_its_call_in_per_message_events_is_read_as_strands_writes_it(tmp_path: Path) -> None:
    """Strands' default tool span: the arguments in a ``gen_ai.tool.message`` event, the result (content blocks) in a
    ``gen_ai.choice`` event, a failed call an ERROR status."""
    def value(v: Any) -> dict[str, Any]:
        return {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}

    def span(n: int, name: str, attrs: dict[str, Any], events: list[tuple[str, dict[str, Any]]] = (),
             **extra: Any) -> dict[str, Any]:
        return {"traceId": "ef" * 16, "spanId": f"{n:016x}", "parentSpanId": None if n == 1 else f"{1:016x}",
                "name": name, "startTimeUnixNano": str(n * 10), "endTimeUnixNano": str(n * 10 + 5),
                "attributes": [{"key": k, "value": value(v)} for k, v in attrs.items()],
                "events": [{"name": e, "timeUnixNano": str(n * 10 + 1),
                            "attributes": [{"key": k, "value": value(v)} for k, v in a.items()]} for e, a in events],
                **extra}

    def tool(n: int, city: str, result: str | None) -> dict[str, Any]:
        events = [("gen_ai.tool.message", {"role": "tool", "content": json.dumps({"city": city}), "id": f"t{n}"})]
        if result is not None:
            events.append(("gen_ai.choice", {"message": json.dumps([{"text": result}]), "id": f"t{n}"}))
        status = {"status": {"code": 2, "message": f"no forecast for {city}"}} if result is None else {}
        return span(n, "execute_tool get_weather", {"gen_ai.operation.name": "execute_tool",
                                                    "gen_ai.tool.name": "get_weather", "gen_ai.tool.call.id": f"t{n}",
                                                    "gen_ai.system": "strands-agents"}, events, **status)

    spans = [span(1, "invoke_agent Strands Agents", {"gen_ai.operation.name": "invoke_agent",
                                                     "gen_ai.conversation.id": "strands-1",
                                                     "input.value": "Weather in Paris and Atlantis?",
                                                     "output.value": "Paris: sunny, 70°F."}),
             tool(2, "Paris", json.dumps({"condition": "sunny", "temperature_f": 70})), tool(3, "Atlantis", None)]
    (tmp_path / "traces.json").write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    done = cli(tmp_path, None, """
        gates: [{tool_args: {name: get_weather, args: {city: Paris}}}]
        scorers: [no_tool_errors]
        data_file: traces.json
        """, "--json", "-")
    assert done.code == 0, done.stderr
    [item] = done.json["items"]
    output = item["turns"][0]["output"]
    calls = [json.loads(c["function"]["arguments"]) for m in output for c in m.get("tool_calls") or ()]
    assert calls == [{"city": "Paris"}, {"city": "Atlantis"}]
    results = [m for m in output if m["role"] == "tool"]
    assert json.loads(results[0]["content"]) == {"condition": "sunny", "temperature_f": 70}  # the block's text
    assert results[1]["is_error"] is True and "no forecast for Atlantis" in results[1]["content"]
    assert item["scores"]["no_tool_errors"] == 0.0


@given(st.lists(st.one_of(st.text(), st.dictionaries(st.text(max_size=5), st.integers(), max_size=3)), min_size=1))
def test_content_blocks_read_as_their_texts_and_nothing_else_changes(parts: list[Any]) -> None:
    """Text blocks are their texts and JSON blocks their JSON, one a line; a list with any other block is left as
    it is (docs/otel.md)."""
    blocks = [{"text": p} if isinstance(p, str) else {"json": p} for p in parts]
    assert blocks_text(blocks) == "\n".join(p if isinstance(p, str) else json.dumps(p, ensure_ascii=False)
                                            for p in parts)
    assert blocks_text(json.dumps(blocks)) == blocks_text(blocks)  # the same blocks as a span's JSON text
    other = [*blocks, {"image": {"format": "png"}}]
    assert blocks_text(other) is other
