"""Peak resident memory of ``evalcli run`` against the number of conversations (docs/performance.md#memory).

Each size is one real ``evalcli run`` CLI in a subprocess (``--quiet``, a fresh database, check-only scorers) on a
generated ``data_file`` of N conversations; its peak RSS is the process's own (``os.wait4``). ``--form``: ``inputs``
(N x T scripted turns, a zero-latency target), ``transcript`` (JSONL transcripts: a user message, a tool call, its
result and an answer) or ``otlp`` (the same conversations as OTLP JSON, one ``ExportTraceServiceRequest`` a line, the
OpenTelemetry collector's file exporter). The curve shows what memory grows with: the slope in KB per conversation
between sizes. Targets: under 150 MB at 20,000 conversations, under 300 MB at 100,000.

Usage: ``python bench/memory_curve.py [--sizes 2000,20000,100000] [--turns 3] [--workers 1] [--form inputs]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.workload import OUT, Workload, load_average, run_evalcli, write_dataset

TARGETS = {20_000: 150, 100_000: 300}
USER = "What is the weather in Paris?"
ANSWER = "Paris: sunny, 18 degrees."


def recorded_dataset(n: int, form: str) -> Path:
    """A dataset of ``n`` one-turn recorded conversations under ``bench/out`` (reused when it exists): JSONL
    transcripts, or OTLP JSON with one request a conversation (spans as PydanticAI's GenAI attributes write them)."""
    OUT.mkdir(parents=True, exist_ok=True)
    data = OUT / f"recorded-{form}-{n}.jsonl"
    if not data.exists():
        write = _otlp_line if form == "otlp" else _transcript_line
        tmp = data.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as out:
            for i in range(n):
                out.write(write(i))
        tmp.replace(data)
    dataset = OUT / f"recorded-{form}-{n}.yaml"
    dataset.write_text(f"gates: [{{called_tool: get_weather}}]\nscorers: [no_tool_errors]\ndata_file: {data.name}\n")
    return dataset


def _transcript_line(i: int) -> str:
    return json.dumps({"id": f"c{i}", "messages": [
        {"role": "user", "content": USER},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"temp_c": 18}'},
        {"role": "assistant", "content": ANSWER}]}) + "\n"


def _otlp_line(i: int) -> str:
    from evalcli.otel.otlp import encode_request
    from evalcli.otel.spans import Span

    trace, base = f"{i:032x}", i * 10
    root = f"{base + 1:016x}"
    part = {"role": "user", "parts": [{"type": "text", "content": USER}]}
    call = {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "get_weather",
                                             "arguments": {"city": "Paris"}}]}
    answer = {"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}
    spans = [Span(trace, root, None, "invoke_agent", 1, 9, {"gen_ai.conversation.id": f"c{i}",
                                                            "gen_ai.operation.name": "invoke_agent"}),
             Span(trace, f"{base + 2:016x}", root, "chat", 2, 3, {
                 "gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps([part]),
                 "gen_ai.output.messages": json.dumps([call])}),
             Span(trace, f"{base + 3:016x}", root, "execute_tool", 4, 5, {
                 "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather", "gen_ai.tool.call.id": "c1",
                 "gen_ai.tool.call.arguments": '{"city": "Paris"}', "gen_ai.tool.call.result": '{"temp_c": 18}'}),
             Span(trace, f"{base + 4:016x}", root, "chat", 6, 8, {
                 "gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps([answer])})]
    return json.dumps(encode_request(spans, {"service.name": "app"})) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2000,20000,100000", help="numbers of conversations, comma-separated")
    parser.add_argument("--turns", type=int, default=3, help="turns of each conversation")
    parser.add_argument("--workers", type=int, default=1, help="--workers of each run")
    parser.add_argument("--form", choices=("inputs", "transcript", "otlp"), default="inputs",
                        help="scripted inputs, JSONL transcripts or OTLP traces")
    args = parser.parse_args()
    print(f"{'conversations':>13}  {'turns':>5}  {'peak RSS MB':>11}  {'KB/conv (slope)':>15}  {'wall s':>7}  "
          f"{'CPU s':>6}  {'target MB':>9}  load")
    previous: tuple[int, float] | None = None
    for n in (int(x) for x in args.sizes.split(",")):
        dataset = write_dataset(Workload(n, args.turns, 0.0, 64, tools=False)) if args.form == "inputs" \
            else recorded_dataset(n, args.form)
        result = run_evalcli(dataset, extra_args=["--workers", str(args.workers)])
        if result.exit_code != 0:
            raise SystemExit(f"evalcli run exited {result.exit_code}:\n{result.stderr[-2000:]}")
        slope = "" if previous is None else \
            f"{1024 * (result.peak_rss_mb - previous[1]) / (n - previous[0]):.2f}"
        target = TARGETS.get(n)
        turns = args.turns if args.form == "inputs" else 1
        print(f"{n:>13}  {turns:>5}  {result.peak_rss_mb:>11.0f}  {slope:>15}  {result.wall:>7.1f}  "
              f"{result.cpu_seconds:>6.1f}  {target or '':>9}  {load_average()}", flush=True)
        previous = (n, result.peak_rss_mb)


if __name__ == "__main__":
    main()
