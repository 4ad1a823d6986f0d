"""Recorded conversations at scale (docs/performance.md#memory): an OTLP file of one request a line is read a line at a
time, each trace read into turns once its last span is read, so its spans are never held together; recorded turns
keep their messages as JSON text. Memory is measured with ``tracemalloc`` (allocations, not the machine's load);
grouping across lines through the real CLI."""

from __future__ import annotations

import json
import textwrap
import tracemalloc
from pathlib import Path
from typing import Any

from evalcli.dataset import load_dataset
from evalcli.otel.ingest import ingest
from evalcli.otel.otlp import encode_request
from evalcli.otel.spans import Span
from tests.conftest import REPO, run_cli

USER = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "What is the weather in Paris?"}]}])
CALL = json.dumps([{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "get_weather",
                                                      "arguments": {"city": "Paris"}}]}])
ANSWER = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Paris: sunny, 18 degrees."}]}])


def turn_spans(trace: int, conversation: str, start: int) -> list[Span]:
    """One agent run (a turn): the agent span, a model call asking for a tool, the tool, the model's answer."""
    trace_id, base = f"{trace:032x}", trace * 10
    root = f"{base + 1:016x}"
    return [Span(trace_id, root, None, "invoke_agent", start, start + 9,
                 {"gen_ai.conversation.id": conversation, "gen_ai.operation.name": "invoke_agent"}),
            Span(trace_id, f"{base + 2:016x}", root, "chat", start + 2, start + 3,
                 {"gen_ai.operation.name": "chat", "gen_ai.input.messages": USER, "gen_ai.output.messages": CALL}),
            Span(trace_id, f"{base + 3:016x}", root, "execute_tool", start + 4, start + 5,
                 {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
                  "gen_ai.tool.call.id": "c1", "gen_ai.tool.call.arguments": '{"city": "Paris"}',
                  "gen_ai.tool.call.result": '{"temp_c": 18}'}),
            Span(trace_id, f"{base + 4:016x}", root, "chat", start + 6, start + 8,
                 {"gen_ai.operation.name": "chat", "gen_ai.output.messages": ANSWER})]


def line(spans: list[Span]) -> str:
    return json.dumps(encode_request(spans, {"service.name": "app"})) + "\n"


def test_an_otlp_file_is_not_held_as_spans(tmp_path: Path) -> None:
    """4,000 one-turn conversations, one request a line: reading them holds each trace's spans only until its line
    is read, then the turn's messages as text (old code: the whole file's text and every span at once, 18 KB a
    conversation at the peak; now under 1 KB)."""
    path = tmp_path / "traces.jsonl"
    with path.open("w") as out:
        for n in range(4000):
            out.write(line(turn_spans(n, f"c{n}", n * 100)))
    tracemalloc.start()
    try:
        found = ingest(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    conversations = list(found.conversations)
    assert len(conversations) == 4000 and conversations[0][1]["id"] == "c0"
    assert [m["role"] for m in conversations[0][1]["messages"]] == ["user", "assistant", "tool", "assistant"]
    per_conversation = peak / 4000
    assert per_conversation < 3000, f"{per_conversation:.0f} bytes a conversation at the peak of reading"


def test_recorded_turns_hold_their_messages_as_text(tmp_path: Path) -> None:
    """2,000 transcripts loaded: each recorded turn's messages are one JSON text, read back as the same messages
    (old code: 4.0 KB held a conversation, now 2.0 KB)."""
    messages = [{"role": "user", "content": "What is the weather in Paris?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "P"}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": '{"temp_c": 18}'},
                {"role": "assistant", "content": "Paris: sunny, 18°C."}]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"id": f"c{n}", "messages": messages}) + "\n"
                                              for n in range(2000)))
    (tmp_path / "d.yaml").write_text("gates: [{called_tool: get_weather}]\ndata_file: t.jsonl\n")
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        dataset = load_dataset(tmp_path / "d.yaml")
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    [turn] = dataset.items[7].transcript or ()
    assert turn.input == "What is the weather in Paris?" and list(turn.output) == messages[1:]
    assert turn.output is not turn.output  # read back from text: a scorer that edits them edits its own copy
    assert held / 2000 < 2600, f"{held / 2000:.0f} bytes a conversation held"


def test_a_trace_written_over_several_lines_is_one_turn_and_conversations_keep_their_order(tmp_path: Path) -> None:
    """Trace 1's spans on lines 1 and 3 (a collector batches by time), trace 2 on line 2: trace 1 is read into its
    turn only at line 3, whole; the conversations are ordered by their first turn's start and a conversation's turns
    by theirs (``c-late`` started first though written last)."""
    first = turn_spans(1, "c-a", 1000)
    rows = [line(first[:2]), line(turn_spans(2, "c-b", 2000)), line(first[2:]),
            line(turn_spans(3, "c-a", 3000)), line(turn_spans(4, "c-late", 10))]
    (tmp_path / "traces.jsonl").write_text("".join(rows))
    (tmp_path / "d.yaml").write_text(textwrap.dedent("""\
        gates: [{called_tool: get_weather}]
        data_file: traces.jsonl
        """))
    done = run_cli(["run", str(tmp_path / "d.yaml"), "--db", str(tmp_path / "e.db"), "--json", "-"], REPO, {})
    assert done.code == 0, done.stderr
    items: list[dict[str, Any]] = json.loads(done.stdout)["items"]
    assert [i["id"] for i in items] == ["c-late", "c-a", "c-b"]
    c_a = items[1]
    assert len(c_a["turns"]) == 2
    assert [m["role"] for m in c_a["turns"][0]["output"]] == ["assistant", "tool", "assistant"]
    assert json.loads(c_a["turns"][0]["output"][1]["content"]) == {"temp_c": 18}


def test_a_trace_the_first_read_closed_too_early_is_read_again_whole(tmp_path: Path, monkeypatch: Any) -> None:
    """Should the first read miss a span of a trace (it only looks for trace ids in each line's text), the trace
    would be closed before its last span: that span is noticed and the file is read again, whole, with the same
    result as when nothing is missed."""
    import evalcli.otel.ingest as ingest_module

    first = turn_spans(1, "c-a", 1000)
    path = tmp_path / "traces.jsonl"
    path.write_text("".join([line(first[:2]), line(turn_spans(2, "c-b", 2000)), line(first[2:])]))
    expected = list(ingest(path).conversations)
    real = ingest_module.TRACE_ID
    seen: list[str] = []

    class MissingTheLastLine:
        def findall(self, text: str) -> list[tuple[str, str]]:
            seen.append(text)
            return real.findall(text) if len(seen) < 3 else []

    monkeypatch.setattr(ingest_module, "TRACE_ID", MissingTheLastLine())
    assert list(ingest(path).conversations) == expected
    assert len(seen) == 3
    assert [len(c["messages"]) for _, c in expected] == [4, 4]


def test_a_trace_id_written_with_escapes_is_known_to_the_first_read(tmp_path: Path, monkeypatch: Any) -> None:
    """A base64 trace id whose ``/`` a writer escaped (``\\/``) on one line and not on another is the same trace to the
    first read as to JSON: the file is read once, a line at a time (the old pattern missed the escaped form, closed
    the trace early and read the whole file again)."""
    import base64

    import evalcli.otel.ingest as ingest_module

    trace = "ff" * 16
    b64 = base64.b64encode(bytes.fromhex(trace)).decode()
    assert "/" in b64
    spans = turn_spans(1, "c-a", 1000)
    for span in spans:
        span.trace_id = trace
    rows = []
    for part, escaped in ((spans[:2], False), (turn_spans(2, "c-b", 2000), False), (spans[2:], True)):
        request = encode_request(part, {"service.name": "app"})
        for resource in request["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for raw in scope["spans"]:
                    if raw["traceId"] == trace:
                        raw["traceId"] = b64
        text = json.dumps(request)
        rows.append((text.replace(b64, b64.replace("/", "\\/")) if escaped else text) + "\n")
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(rows))
    reads: list[bool] = []
    real = ingest_module._ingest

    def counted(path: Path, *, streamed: bool) -> Any:
        reads.append(streamed)
        return real(path, streamed=streamed)

    monkeypatch.setattr(ingest_module, "_ingest", counted)
    conversations = list(ingest(path).conversations)
    assert reads == [True]
    assert [c["id"] for _, c in conversations] == ["c-a", "c-b"]
    assert [m["role"] for m in conversations[0][1]["messages"]] == ["user", "assistant", "tool", "assistant"]
