"""Benchmark ``otel`` (docs/otel.md), in CPU time (``time.process_time``), fastest of ``--repeat`` rounds:

1. capture's cost per turn for an agent emitting 10 spans a turn (an agent span, a model call, a tool call, a
   model call, six plain child spans, GenAI attributes as PydanticAI writes them): the same turns under the same
   SDK tracer provider with and without evalcli's capture (the turn opened and closed, the spans tied to it, then
   read into the turn's tool calls and usage, as for a target that returns only text). Target: < 0.2 ms a turn.
2. ingest: loading a dataset whose ``data_file`` is 10,000 conversations as OTLP JSON (one request a conversation)
   against the same conversations as a JSONL transcript file. Target: within 3x.

Run: ``python bench/otel.py [--turns 2000] [--conversations 10000] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

INPUT = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "What is the weather in Paris?"}]}])
CALL = json.dumps([{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "get_weather",
                                                      "arguments": {"city": "Paris"}}]}])
ANSWER = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Paris: sunny, 18°C."}]}])


def agent_turn(tracer: Any) -> None:
    """One turn of an instrumented agent: 10 spans."""
    with tracer.start_as_current_span("invoke_agent weather", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with tracer.start_as_current_span("chat m", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 50,
                "gen_ai.usage.output_tokens": 10, "gen_ai.input.messages": INPUT, "gen_ai.output.messages": CALL}):
            pass
        with tracer.start_as_current_span("execute_tool get_weather", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": "c1", "gen_ai.tool.call.arguments": '{"city": "Paris"}',
                "gen_ai.tool.call.result": '{"temp_c": 18}'}):
            for n in range(6):
                with tracer.start_as_current_span(f"step {n}"):
                    pass
        with tracer.start_as_current_span("chat m", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 70,
                "gen_ai.usage.output_tokens": 12, "gen_ai.output.messages": ANSWER}):
            pass


def capture_cost(turns: int, repeat: int) -> tuple[float, float]:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    from evalcli.llm import UsageSink, current_usage
    from evalcli.otel import capture
    from evalcli.otel.record import recorded

    provider = TracerProvider()
    trace.set_tracer_provider(provider)
    tracer = provider.get_tracer("bench")
    best_plain = best_captured = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        for _ in range(turns):
            agent_turn(tracer)
        best_plain = min(best_plain, time.process_time() - started)
    capture.arm()
    text = [{"role": "assistant", "content": "Paris: sunny, 18°C."}]
    for _ in range(repeat):
        token = current_usage.set(UsageSink())
        started = time.process_time()
        for index in range(turns):
            turn = capture.begin(index, "thread", "item")
            assert turn is not None
            agent_turn(tracer)
            capture.end(turn)
            messages = recorded(turn, text, index)
        best_captured = min(best_captured, time.process_time() - started)
        current_usage.reset(token)
    assert len(messages) == 3, messages
    return best_plain / turns * 1000, best_captured / turns * 1000


def ingest_cost(conversations: int, repeat: int) -> tuple[float, float]:
    from evalcli.dataset import load_dataset
    from evalcli.otel.otlp import encode_request
    from evalcli.otel.spans import Span

    folder = Path(tempfile.mkdtemp(prefix="evalcli-bench-otel-"))
    with (folder / "traces.jsonl").open("w") as otlp, (folder / "transcripts.jsonl").open("w") as jsonl:
        for n in range(conversations):
            trace_id, base = f"{n:032x}", n * 10
            attrs = {"gen_ai.conversation.id": f"c{n}"}
            spans = [Span(trace_id, f"{base + 1:016x}", None, "invoke_agent", 1, 9, {**attrs,
                          "gen_ai.operation.name": "invoke_agent"}),
                     Span(trace_id, f"{base + 2:016x}", f"{base + 1:016x}", "chat", 2, 3, {
                         "gen_ai.operation.name": "chat", "gen_ai.input.messages": INPUT,
                         "gen_ai.output.messages": CALL}),
                     Span(trace_id, f"{base + 3:016x}", f"{base + 1:016x}", "execute_tool", 4, 5, {
                         "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
                         "gen_ai.tool.call.id": "c1", "gen_ai.tool.call.arguments": '{"city": "Paris"}',
                         "gen_ai.tool.call.result": '{"temp_c": 18}'}),
                     Span(trace_id, f"{base + 4:016x}", f"{base + 1:016x}", "chat", 6, 8, {
                         "gen_ai.operation.name": "chat", "gen_ai.output.messages": ANSWER})]
            otlp.write(json.dumps(encode_request(spans, {"service.name": "app"})) + "\n")
            jsonl.write(json.dumps({"id": f"c{n}", "messages": [
                {"role": "user", "content": "What is the weather in Paris?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "get_weather",
                                                                  "arguments": '{"city": "Paris"}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": '{"temp_c": 18}'},
                {"role": "assistant", "content": "Paris: sunny, 18°C."}]}) + "\n")
    for name in ("traces", "transcripts"):
        (folder / f"{name}.yaml").write_text(f"gates: [{{called_tool: get_weather}}]\ndata_file: {name}.jsonl\n")
    best = {}
    for name in ("traces", "transcripts"):
        times = []
        for _ in range(repeat):
            started = time.process_time()
            dataset = load_dataset(folder / f"{name}.yaml")
            times.append(time.process_time() - started)
            assert len(dataset.items) == conversations
        best[name] = min(times)
    return best["traces"], best["transcripts"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--conversations", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    plain, captured = capture_cost(args.turns, args.repeat)
    print(f"capture: 10 spans a turn: {plain:.3f} ms CPU without capture, {captured:.3f} ms with: "
          f"{captured - plain:.3f} ms a turn (target < 0.2)")
    traces, transcripts = ingest_cost(args.conversations, args.repeat)
    print(f"ingest: {args.conversations} conversations: OTLP JSON {traces:.2f} s CPU, JSONL transcripts "
          f"{transcripts:.2f} s: {traces / transcripts:.2f}x (target within 3x)")


if __name__ == "__main__":
    main()
