"""Runs the instrumented PydanticAI weather agent (``pydantic_spans``) outside evalcli, as an app in production does,
and writes the spans it emitted as OTLP JSON, one ``ExportTraceServiceRequest`` a line (the collector's file
exporter's format): ``python -m tests.otel_agents.export_spans OUT CONVERSATION:MESSAGE ...``. Turns of the same
conversation id continue its message history (docs/otel.md, "Scoring exported traces")."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evalcli.otel.otlp import encode_request
from evalcli.otel.spans import from_sdk


async def main(out: str, turns: list[str]) -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    trace.set_tracer_provider(provider)
    from tests.otel_agents.pydantic_spans import AGENT

    histories: dict[str, Any] = {}
    for turn in turns:
        conversation, _, message = turn.partition(":")
        result = await AGENT.run(message, message_history=histories.get(conversation), conversation_id=conversation)
        histories[conversation] = result.all_messages()
    with open(out, "w", encoding="utf-8") as handle:
        for span in memory.get_finished_spans():  # one request a span, as a batching exporter may well write them
            handle.write(json.dumps(encode_request([from_sdk(span)], {"service.name": "weather-app"})) + "\n")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
