"""OTLP JSON (docs/otel.md): ``ExportTraceServiceRequest`` documents as the OpenTelemetry collector's file exporter
writes them, read into ``Span`` records and written from them. Ids are hex (the OTLP/JSON rule); a base64 id, as
some exporters write it, is read too."""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .spans import Span, SpanEvent


class Unreadable(ValueError):
    """A span (or part of a document) that cannot be read; the message says what is wrong with it, ``where``
    (``FILE:LINE``) where it is."""

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(message)
        self.where = where


def read_request(document: Any, locate: Callable[[Any], str]) -> Iterator[Span | Unreadable]:
    """Each span of one ``ExportTraceServiceRequest`` (``resourceSpans``), or what is wrong with it: a resource or
    scope of the wrong shape is one ``Unreadable`` and its spans are skipped, never an exception. ``locate``: where
    a JSON object of the document is (``FILE:LINE``, evalcli.otel.positions)."""
    for n, resource_spans in enumerate(_list(document.get("resourceSpans"))):
        if not isinstance(resource_spans, dict):
            yield Unreadable(f"resourceSpans[{n}] is not a JSON object", locate(document))
            continue
        try:
            resource = decode_attributes(_object(resource_spans.get("resource")).get("attributes"))
        except (TypeError, ValueError) as exc:
            yield Unreadable(f"resourceSpans[{n}].resource: {exc}", locate(resource_spans))
            continue
        for m, scope_spans in enumerate(_list(resource_spans.get("scopeSpans")
                                              or resource_spans.get("instrumentationLibrarySpans"))):
            if not isinstance(scope_spans, dict):
                yield Unreadable(f"resourceSpans[{n}].scopeSpans[{m}] is not a JSON object", locate(resource_spans))
                continue
            scope = str(_object(scope_spans.get("scope") or scope_spans.get("instrumentationLibrary")).get("name", ""))
            for raw in _list(scope_spans.get("spans")):
                try:
                    span = _span(raw, locate(raw))
                except (Unreadable, TypeError, ValueError, AttributeError) as exc:
                    span_id = raw.get("spanId") if isinstance(raw, dict) else None
                    where = locate(raw if isinstance(raw, dict) else scope_spans)
                    yield Unreadable(f"span {span_id or '(no spanId)'}: {exc}", where)
                    continue
                span.resource, span.scope = resource, scope
                yield span


def _span(raw: Any, where: str) -> Span:
    if not isinstance(raw, dict):
        raise Unreadable("a span must be a JSON object")
    trace_id, span_id = hex_id(raw.get("traceId"), 16), hex_id(raw.get("spanId"), 8)
    if trace_id is None or span_id is None:
        raise Unreadable("it has no valid traceId and spanId")
    parent = raw.get("parentSpanId")
    status = _object(raw.get("status"))
    code = status.get("code")
    error = str(status.get("message") or "") if code in (2, "STATUS_CODE_ERROR") else None
    events = [SpanEvent(str(e.get("name", "")), int(e.get("timeUnixNano") or 0), decode_attributes(e.get("attributes")))
              for e in _list(raw.get("events"))]
    kind = raw.get("kind", 1)
    return Span(trace_id, span_id, hex_id(parent, 8) if parent else None, str(raw.get("name", "")),
                int(raw.get("startTimeUnixNano") or 0), int(raw.get("endTimeUnixNano") or 0),
                decode_attributes(raw.get("attributes")), events, error, kind if isinstance(kind, int) else 1,
                where=where)


def hex_id(value: Any, size: int) -> str | None:
    """An OTLP id as lower-case hex of ``size`` bytes (from hex, ``0x``-prefixed hex or base64), or ``None`` when it
    is none of them."""
    if not isinstance(value, str) or not value:
        return None
    for text in (value, value[2:] if value[:2] in ("0x", "0X") else ""):  # 0x: the Python SDK's JSON (``to_json``)
        if len(text) == size * 2:
            try:
                int(text, 16)
                return text.lower()
            except ValueError:
                pass
    try:  # (a base64 id may begin with 0x too)
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw.hex() if len(raw) == size else None


def decode_attributes(raw: Any) -> dict[str, Any]:
    """OTLP ``KeyValue`` attributes as a plain mapping."""
    return {str(kv.get("key")): decode_value(kv.get("value")) for kv in _list(raw) if isinstance(kv, dict)}


def decode_value(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    for key in ("stringValue", "boolValue"):
        if key in value:
            return value[key]
    if "doubleValue" in value:  # "NaN", "Infinity", "-Infinity": proto3's JSON form of the floats JSON has not
        found = value["doubleValue"]
        return float(found) if isinstance(found, str) else found  # a ValueError: a located warning
    if "intValue" in value:
        return int(value["intValue"])  # a ValueError: the span (or resource) is a located warning
    if "arrayValue" in value:
        return [decode_value(v) for v in _list(_object(value["arrayValue"]).get("values"))]
    if "kvlistValue" in value:
        return decode_attributes(_object(value["kvlistValue"]).get("values"))
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def encode_value(value: Any) -> dict[str, Any]:
    """A Python value as an OTLP ``AnyValue``."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):  # NaN and the infinities as proto3's JSON writes them: JSON has no such number
        return {"doubleValue": value if math.isfinite(value) else _NON_FINITE[str(value)]}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [encode_value(v) for v in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": encode_attributes(value)}}
    return {"stringValue": "" if value is None else str(value)}


_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def encode_attributes(attributes: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": encode_value(v)} for k, v in attributes.items()]


def encode_span(span: Span) -> dict[str, Any]:
    """One span as OTLP JSON."""
    out: dict[str, Any] = {"traceId": span.trace_id, "spanId": span.span_id, "name": span.name, "kind": span.kind,
                           "startTimeUnixNano": str(span.start_ns), "endTimeUnixNano": str(span.end_ns),
                           "attributes": encode_attributes(span.attributes)}
    if span.parent_id:
        out["parentSpanId"] = span.parent_id
    if span.events:
        out["events"] = [{"timeUnixNano": str(e.time_ns), "name": e.name, "attributes": encode_attributes(e.attributes)}
                         for e in span.events]
    out["status"] = {"code": 2, "message": span.error} if span.error is not None else {"code": 0}
    return out


def encode_request(spans: Iterable[Span], resource: dict[str, Any]) -> dict[str, Any]:
    """An ``ExportTraceServiceRequest`` holding ``spans`` under one resource, a scope per instrumentation scope."""
    scopes: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        scopes.setdefault(span.scope or "evalcli", []).append(encode_span(span))
    return {"resourceSpans": [{"resource": {"attributes": encode_attributes(resource)},
                               "scopeSpans": [{"scope": {"name": name}, "spans": found}
                                              for name, found in scopes.items()]}]}
