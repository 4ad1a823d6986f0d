"""Trace files as other tools write them, for the ingest tests (docs/otel.md, "Scoring exported traces"): a Jaeger
JSON export (the query API's / UI's ``{"data": [{"traceID", "spans", "processes"}]}``, times in microseconds, tags
with their types) and an OTLP document of Google ADK's spans, with the attribute names and values ADK's
``google.adk.telemetry.tracing`` sets (``invocation`` > ``invoke_agent`` > ``call_llm`` / ``execute_tool``)."""

from __future__ import annotations

import json
from typing import Any


def jaeger_tag(key: str, value: Any) -> dict[str, Any]:
    kind = "bool" if isinstance(value, bool) else "int64" if isinstance(value, int) else "string"
    return {"key": key, "type": kind, "value": value}


def jaeger_span(trace: str, span: str, parent: str | None, name: str, start_us: int, tags: dict[str, Any],
                logs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"traceID": trace, "spanID": span, "operationName": name, "flags": 1,
            "references": [{"refType": "CHILD_OF", "traceID": trace, "spanID": parent}] if parent else [],
            "startTime": start_us, "duration": 50, "tags": [jaeger_tag(k, v) for k, v in tags.items()],
            "logs": logs or [], "processID": "p1", "warnings": None}


def jaeger_weather(trace: str, conversation: str, city: str, *, fails: bool = False) -> dict[str, Any]:
    """One agent run, as Jaeger exports it: the user's question, a tool call (failing for ``fails``), the answer."""
    base = int(trace[-4:], 16) * 1000
    root, chat1, tool, chat2 = (f"{trace[-8:]}{n:08x}" for n in range(1, 5))
    question = f"What is the weather in {city}?"
    tool_tags: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather", "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.call.arguments": json.dumps({"city": city})}
    logs = []
    if fails:
        tool_tags.update({"otel.status_code": "ERROR", "error": True,
                          "otel.status_description": f"no forecast for {city}"})
        logs = [{"timestamp": base + 31, "fields": [{"key": "event", "type": "string", "value": "exception"},
                                                    {"key": "exception.message", "type": "string",
                                                     "value": f"no forecast for {city}"}]}]
    else:
        tool_tags["gen_ai.tool.call.result"] = json.dumps({"city": city, "condition": "sunny", "temperature_f": 75})
    answer = f"{city}: not known." if fails else f"{city}: sunny, 75°F."
    spans = [
        jaeger_span(trace, root, None, "invoke_agent weather", base, {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": conversation,
            "input.value": question, "span.kind": "internal"}),
        jaeger_span(trace, chat1, root, "chat gpt-4.1-mini", base + 10, {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4.1-mini",
            "gen_ai.usage.input_tokens": 52, "gen_ai.usage.output_tokens": 12,
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": {"city": city}}]}])}),
        jaeger_span(trace, tool, root, "execute_tool get_weather", base + 30, tool_tags, logs),
        jaeger_span(trace, chat2, root, "chat gpt-4.1-mini", base + 40, {
            "gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}])}),
    ]
    return {"traceID": trace, "spans": spans,
            "processes": {"p1": {"serviceName": "weather-app", "tags": [jaeger_tag("hostname", "box")]}},
            "warnings": None}


def otlp_attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
    def value(v: Any) -> dict[str, Any]:
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}
        if isinstance(v, list):
            return {"arrayValue": {"values": [value(i) for i in v]}}
        return {"stringValue": v}
    return [{"key": k, "value": value(v)} for k, v in values.items()]


def otlp_span(trace: str, span: str, parent: str | None, name: str, start: int, attributes: dict[str, Any],
              *, error: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"traceId": trace, "spanId": span, "name": name, "kind": 1,
                           "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 900),
                           "attributes": otlp_attributes(attributes),
                           "status": {"code": 2, "message": error} if error else {}}
    if parent:
        out["parentSpanId"] = parent
    return out


def adk_invocation(trace: str, session: str, question: str, city: str, start: int,
                   history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One ADK invocation (a turn) of a weather agent in session ``session``: ``invocation`` > ``invoke_agent
    weather_agent`` > ``call_llm`` (the function call), ``execute_tool get_weather``, ``call_llm`` (the answer)."""
    ids = [f"{trace[-6:]}{n:010x}" for n in range(1, 6)]
    user = {"role": "user", "parts": [{"text": question}]}
    call = {"role": "model", "parts": [{"function_call": {"id": f"adk-{trace[-4:]}", "name": "get_weather",
                                                          "args": {"city": city}}}]}
    response = {"city": city, "condition": "sunny", "temperature_f": 75}
    answered = {"role": "user", "parts": [{"function_response": {"id": f"adk-{trace[-4:]}", "name": "get_weather",
                                                                 "response": response}}]}
    answer = {"role": "model", "parts": [{"text": f"{city}: sunny, 75°F."}]}

    def call_llm(span: str, at: int, contents: list[dict[str, Any]], content: dict[str, Any]) -> dict[str, Any]:
        return otlp_span(trace, span, ids[1], "call_llm", at, {
            "gen_ai.system": "gcp.vertex.agent", "gen_ai.request.model": "gemini-2.0-flash",
            "gcp.vertex.agent.invocation_id": f"e-{trace[-4:]}", "gcp.vertex.agent.session_id": session,
            "gcp.vertex.agent.event_id": f"ev-{span}",
            "gcp.vertex.agent.llm_request": json.dumps({"model": "gemini-2.0-flash", "config": {
                "system_instruction": "You are a weather assistant."}, "contents": contents}),
            "gcp.vertex.agent.llm_response": json.dumps({"content": content, "usage_metadata": {
                "prompt_token_count": 40, "candidates_token_count": 8}}),
            "gen_ai.usage.input_tokens": 40, "gen_ai.usage.output_tokens": 8, "gen_ai.response.finish_reasons": ["stop"]})

    return [
        otlp_span(trace, ids[0], None, "invocation", start, {}),
        otlp_span(trace, ids[1], ids[0], "invoke_agent weather_agent", start + 10, {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather_agent",
            "gen_ai.agent.description": "", "gen_ai.conversation.id": session}),
        call_llm(ids[2], start + 20, [*history, user], call),
        otlp_span(trace, ids[3], ids[1], "execute_tool get_weather", start + 30, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.description": "The forecast for a city.",
            "gen_ai.tool.name": "get_weather", "gen_ai.tool.type": "FunctionTool",
            "gcp.vertex.agent.llm_request": "{}", "gcp.vertex.agent.llm_response": "{}",
            "gcp.vertex.agent.tool_call_args": json.dumps({"city": city}), "gen_ai.tool.call.id": f"adk-{trace[-4:]}",
            "gcp.vertex.agent.event_id": f"ev-{ids[3]}", "gcp.vertex.agent.tool_response": json.dumps(response)}),
        call_llm(ids[4], start + 40, [*history, user, call, answered], answer),
    ]
