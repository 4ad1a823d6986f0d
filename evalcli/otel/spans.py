"""One span, as evalcli reads it (docs/otel.md): the same plain record whether it was captured live from the
OpenTelemetry SDK or read from an exported file, so the readers, ingest and export share one shape.

Nothing here imports OpenTelemetry: a captured SDK span is turned into a ``Span`` by ``from_sdk``, which only reads
its attributes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from ..records import record


@record(frozen=True)
class SpanEvent:
    """An event on a span (the deprecated GenAI per-message events, exceptions, evaluation results)."""

    name: str
    time_ns: int
    attributes: dict[str, Any]


@record
class Span:
    """A finished span: ids as lower-case hex (32 digits for the trace, 16 for spans), times in nanoseconds."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[SpanEvent] = field(default_factory=list)
    error: str | None = None
    """The status description of a span whose status is ERROR (``""`` when it gave none), else ``None``."""
    kind: int = 1
    """The OTLP span kind (1 internal, 2 server, 3 client, 4 producer, 5 consumer)."""
    resource: dict[str, Any] = field(default_factory=dict)
    scope: str = ""
    where: str = ""
    """Where it was read from (``traces.jsonl:3``) when it came from a file."""


def attribute_text(attributes: Mapping[str, Any], key: str) -> str | None:
    """An attribute as text (a JSON-encoded value is left as it is), or ``None`` when absent."""
    value = attributes.get(key)
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def attribute_json(attributes: Mapping[str, Any], key: str) -> Any:
    """An attribute that holds JSON (as text or already decoded); a text that is not JSON is the text itself."""
    value = attributes.get(key)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def attribute_int(attributes: Mapping[str, Any], *keys: str) -> int:
    """The first of ``keys`` that holds a non-negative whole number (token counts), else 0."""
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, str) and value.isdigit():
            return int(value)
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            return int(value)
    return 0


def from_sdk(span: Any, *, resource: bool = True) -> Span:
    """An OpenTelemetry SDK ``ReadableSpan`` as a ``Span`` (its attributes and events copied, tuples as lists)."""
    context = span.context
    parent = span.parent
    return Span(
        trace_id=f"{context.trace_id:032x}", span_id=f"{context.span_id:016x}",
        parent_id=f"{parent.span_id:016x}" if parent is not None else None, name=span.name,
        start_ns=span.start_time or 0, end_ns=span.end_time or 0, attributes=_plain(span.attributes),
        events=[SpanEvent(e.name, e.timestamp or 0, _plain(e.attributes)) for e in span.events],
        error=sdk_error(span.status), kind=int(span.kind.value) + 1, scope=getattr(span.instrumentation_scope, "name", "") or "",
        resource=_plain(span.resource.attributes) if resource and span.resource is not None else {})


def sdk_error(status: Any) -> str | None:
    """An SDK span status as ``Span.error``: its description when it is ERROR (``""`` when it gave none), else ``None``."""
    return (status.description or "") if status is not None and status.status_code.value == 2 else None


def _plain(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in (attributes or {}).items()}
