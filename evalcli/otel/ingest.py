"""Ingest (docs/otel.md, "Scoring exported traces"): a trace file named by ``data_file:`` read as recorded
conversations (docs/recorded.md).

Read: OTLP JSON (the collector's file exporter: one ``ExportTraceServiceRequest`` a line, or one document), a Jaeger
export (``{"data": [{"traceID", "spans", ...}]}``) and a Phoenix export (its spans API's ``{"data": [...]}``, or one
span a line). Spans are grouped into conversations by ``gen_ai.conversation.id``, else ``session.id``, else the
trace; the conversation's turns are evalcli's own turn spans when the file is an evalcli export, else the root spans
(each an agent run), in time order. A span that cannot be read is a located warning (file, line, span id: in a
document written over several lines, the span's own line, ``positions.located``); a file that is not one of these is
a located error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import DatasetError, Problem
from .otlp import Unreadable, decode_attributes, hex_id, read_request
from .positions import Locate, located, one_line
from .spans import Span, SpanEvent, attribute_json, attribute_text
from .turns import TurnSpans

CONVERSATION_KEYS = ("gen_ai.conversation.id", "session.id")
"""The attributes that name a span's conversation, first found first."""
NO_USER = "(no user message in the trace)"


@dataclass
class Ingested:
    """What a trace file holds: its conversations as ``(line, {"id", "messages"})`` and the warnings of reading it."""

    conversations: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def is_trace_file(path: Path) -> bool:
    """Whether ``path`` holds traces (OTLP, Jaeger or Phoenix) rather than JSONL transcripts: decided by the keys of
    its first line when that line is a JSON object (a transcript whose messages carry a ``traceID`` of their own stays
    a transcript), else by the markers at its head (a document written over several lines)."""
    try:
        with path.open(encoding="utf-8-sig") as handle:
            first = ""
            while not first.strip():
                first = handle.readline()
                if not first:
                    return False
            head = first[:4096] + handle.read(max(0, 4096 - len(first)))
    except (OSError, UnicodeDecodeError):
        return False
    try:  # a first line of over 1 MiB (a whole export on one line) is not read twice: its head decides
        document = json.loads(first) if len(first) <= 1 << 20 else None
    except ValueError:
        document = None
    if document is None:
        return any(marker in head for marker in ('"resourceSpans"', '"traceID"', '"span_id"', '"spanID"'))
    return isinstance(document, dict) and _trace_keys(document)


def _trace_keys(document: dict[str, Any]) -> bool:
    """Whether one JSON object is a trace document: OTLP (``resourceSpans``), a Jaeger or Phoenix export (``data``: a
    list of traces or spans) or one Phoenix span (``context``); never an item (``messages``, ``transcript``, ...)."""
    if "resourceSpans" in document:
        return True
    if any(key in document for key in ("messages", "transcript", "input", "inputs", "turns", "simulate")):
        return False
    return isinstance(document.get("data"), list) or isinstance(document.get("context"), dict)


def ingest(path: Path) -> Ingested:
    """The conversations of a trace file, grouped and ordered (docs/otel.md)."""
    found = Ingested()
    spans = list(_spans(path, found.warnings))
    if not spans:  # what made each span unreadable says more than "no span" alone (the first few)
        why = "".join(f"\n  {warning}" for warning in found.warnings[:5])
        more = f"\n  ... and {len(found.warnings) - 5} more" if len(found.warnings) > 5 else ""
        raise DatasetError([Problem(str(path), f"the trace file has no span evalcli can read{why}{more}",
                                    "export OTLP JSON (the collector's file exporter), or a Jaeger or Phoenix export")])
    for key, turns in _conversations(spans).items():
        messages = _messages(turns, found.warnings)
        if messages:
            line = min((int(r.where.rsplit(":", 1)[-1]) for r, _ in turns if r.where[-1:].isdigit()), default=1)
            found.conversations.append((line, {"id": key, "messages": messages}))
    return found


def _spans(path: Path, warnings: list[str]) -> Iterator[Span]:
    text = path.read_text(encoding="utf-8-sig")
    stripped = text.lstrip()
    try:
        document = json.loads(text)
    except ValueError as whole:
        if not stripped.startswith("{"):
            raise DatasetError([Problem(f"{path}:1:1", "not a trace file: it is not JSON",
                                        "export OTLP JSON, or a Jaeger or Phoenix JSON export")]) from None
        if not _first_line_is_json(stripped):  # one document spread over lines (a pretty-printed export), broken
            raise DatasetError([Problem(f"{path}:{getattr(whole, 'lineno', 1)}:{getattr(whole, 'colno', 1)}",
                                        f"not valid JSON: {getattr(whole, 'msg', whole)}",
                                        "the file is one JSON document cut short or edited by hand: export it "
                                        "again")]) from None
        documents = list(_lines(path, text))
    else:  # one document: over several lines, each span is located at its own line
        documents = [located(text, path, document) if "\n" in text.strip() else (document, one_line(path, 1))]
    for document, locate in documents:
        for found in _document(document, locate):
            if isinstance(found, Unreadable):
                warnings.append(f"{found.where or locate(document)}: {found}: skipped")
            else:
                yield found


def _first_line_is_json(text: str) -> bool:
    try:
        json.loads(text.split("\n", 1)[0])
    except ValueError:
        return False
    return True


def _lines(path: Path, text: str) -> Iterator[tuple[Any, Locate]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield json.loads(line), one_line(path, number)
        except ValueError as exc:
            raise DatasetError([Problem(f"{path}:{number}:{getattr(exc, 'colno', 1)}",
                                        f"not valid JSON: {getattr(exc, 'msg', exc)}",
                                        "each line of a trace file is one JSON document (an OTLP "
                                        "ExportTraceServiceRequest, or a Phoenix span)")]) from None


def _document(document: Any, locate: Locate) -> Iterator[Span | Unreadable]:
    if not isinstance(document, dict):
        yield Unreadable("not a JSON object", locate(document))
        return
    if "resourceSpans" in document:
        yield from read_request(document, locate)
        return
    data = document.get("data")
    if isinstance(data, list):
        for entry in data:
            if isinstance(entry, dict) and "spans" in entry:
                yield from _jaeger(entry, locate)
            else:
                yield _phoenix(entry, locate)
        return
    if "context" in document or "span_id" in document:  # one Phoenix span (a line of its export)
        yield _phoenix(document, locate)
        return
    yield Unreadable("neither OTLP (resourceSpans), Jaeger (data[].spans) nor Phoenix (context.span_id)",
                     locate(document))


def _jaeger(trace: dict[str, Any], locate: Locate) -> Iterator[Span | Unreadable]:
    processes = trace.get("processes") or {}
    for raw in trace.get("spans") or ():
        try:
            parent = next((r.get("spanID") for r in raw.get("references") or () if r.get("refType") == "CHILD_OF"), None)
            tags = {t["key"]: t.get("value") for t in raw.get("tags") or ()}
            error = None
            if tags.get("otel.status_code") == "ERROR" or tags.get("error") is True:
                error = str(tags.get("otel.status_description") or "")
            start = int(raw["startTime"]) * 1000
            process = processes.get(raw.get("processID")) or {}
            yield Span(_jaeger_id(raw["traceID"], 16), _jaeger_id(raw["spanID"], 8),
                       _jaeger_id(parent, 8) if parent else None, str(raw.get("operationName", "")), start,
                       start + int(raw.get("duration") or 0) * 1000, tags,
                       [SpanEvent(str({f["key"]: f.get("value") for f in log.get("fields") or ()}.get("event", "")),
                                  int(log.get("timestamp") or 0) * 1000,
                                  {f["key"]: f.get("value") for f in log.get("fields") or ()})
                        for log in raw.get("logs") or ()],
                       error, resource={t["key"]: t.get("value") for t in process.get("tags") or ()},
                       where=locate(raw))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            span_id = raw.get("spanID") if isinstance(raw, dict) else None
            yield Unreadable(f"span {span_id or '(no spanID)'}: {_problem(exc)}", locate(raw))


def _jaeger_id(value: Any, size: int) -> str:
    text = str(value).lower()
    int(text, 16)
    return text.rjust(size * 2, "0")


def _phoenix(raw: Any, locate: Locate) -> Span | Unreadable:
    try:
        context = raw.get("context")
        if not isinstance(context, dict):
            return Unreadable(f"span {_phoenix_id(raw)}: it has no context (trace_id, span_id)", locate(raw))
        attributes = _flatten(raw.get("attributes") or {})
        events = [SpanEvent(str(e.get("name", "")), _ns(e.get("timestamp")), _flatten(e.get("attributes") or {}))
                  for e in raw.get("events") or ()]
        error = str(raw.get("status_message") or "") if raw.get("status_code") == "ERROR" else None
        trace_id, span_id = hex_id(context["trace_id"], 16), hex_id(context["span_id"], 8)
        if trace_id is None or span_id is None:
            return Unreadable(f"span {context.get('span_id')}: no valid trace_id and span_id", locate(raw))
        parent = raw.get("parent_id")
        return Span(trace_id, span_id, hex_id(parent, 8) if parent else None, str(raw.get("name", "")),
                    _ns(raw.get("start_time")), _ns(raw.get("end_time")), attributes, events, error,
                    where=locate(raw))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return Unreadable(f"span {_phoenix_id(raw)}: {_problem(exc)}", locate(raw))


def _phoenix_id(raw: Any) -> str:
    if not isinstance(raw, dict):
        return "(not a JSON object)"
    context = raw.get("context")
    found = context.get("span_id") if isinstance(context, dict) else None
    return str(found or raw.get("span_id") or "(no span_id)")


def _problem(exc: Exception) -> str:
    """What is wrong with a span, as a person reads it (a missing field by its name, a bad value by its reason)."""
    if isinstance(exc, KeyError):
        return f"it has no {exc.args[0]!r}"
    return f"a value is wrong ({exc})"


def _ns(value: Any) -> int:
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, str) and value:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1e9)
    return 0


def _flatten(value: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Phoenix's nested attributes (``{"llm": {"model_name": ...}}``) as flat OpenTelemetry keys."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, dict) and item:
            out.update(_flatten(item, name + "."))
        elif isinstance(item, list) and item and all(isinstance(i, dict) for i in item):
            for n, entry in enumerate(item):
                out.update(_flatten(entry, f"{name}.{n}."))
        else:
            out[name] = item
    return out


def _conversations(spans: list[Span]) -> dict[str, list[tuple[Span, list[Span]]]]:
    """Each turn (its root span and the spans under it) grouped by conversation: the first conversation id its root,
    else any span under it, names; else its trace."""
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if "evalcli.turn.index" in s.attributes]
    if not roots:
        roots = [s for s in spans if s.parent_id is None or s.parent_id not in ids]
    children: dict[str, list[Span]] = {}
    for span in spans:
        if span.parent_id is not None:
            children.setdefault(span.parent_id, []).append(span)
    out: dict[str, list[tuple[Span, list[Span]]]] = {}
    for root in sorted(roots, key=lambda s: s.start_ns):
        tree = _subtree(root, children)
        key = next((text for k in CONVERSATION_KEYS for s in tree if (text := attribute_text(s.attributes, k))),
                   root.trace_id)
        out.setdefault(key, []).append((root, tree))
    return out


def _messages(turns: list[tuple[Span, list[Span]]], warnings: list[str]) -> list[dict[str, Any]]:
    """A conversation's transcript: each turn's user message and response messages, in time order."""
    out: list[dict[str, Any]] = []
    for root, tree in turns:
        turn = TurnSpans.of(tree)
        if "evalcli.turn.index" in root.attributes:
            user = attribute_text(root.attributes, "evalcli.turn.input")
            messages = _recorded_output(root) or turn.messages()
        else:
            user = _root_input(root) or turn.user_text()
            messages = turn.messages(_root_output(root))
        if not messages and user is None:
            continue
        if user is None:
            warnings.append(f"{root.where}: span {root.span_id}: no user message found for this turn; recorded as "
                            f"'{NO_USER}'")
        out.append({"role": "user", "content": user if user is not None else NO_USER})
        out.extend(_valid(messages))
    return out


def _subtree(root: Span, children: dict[str, list[Span]]) -> list[Span]:
    """The root and every span under it, each once: a file whose span ids repeat (a span its own parent, two spans
    each other's) is read to its end, never walked round a cycle."""
    out, todo, seen = [], [root], {id(root)}
    while todo:
        span = todo.pop()
        out.append(span)
        for child in children.get(span.span_id, ()):
            if id(child) not in seen:
                seen.add(id(child))
                todo.append(child)
    return out


def _root_input(root: Span) -> str | None:
    a = root.attributes
    value = attribute_json(a, "input.value")
    if isinstance(value, str):
        return value
    if isinstance(value, dict):  # a chain's input as a mapping: its messages' last user text, or a text field
        for key in ("input", "query", "question", "message", "messages"):
            found = value.get(key)
            if isinstance(found, str):
                return found
    messages = attribute_json(a, "gen_ai.input.messages")
    if isinstance(messages, list):
        from .readers import genai_messages

        users = [m for m in genai_messages(messages) if m.get("role") == "user" and isinstance(m.get("content"), str)]
        return str(users[-1]["content"]) if users else None
    return None


def _root_output(root: Span) -> str | None:
    a = root.attributes
    for key in ("output.value", "final_result", "gen_ai.completion"):
        value = attribute_json(a, key)
        if isinstance(value, str):
            return value
    return None


def _recorded_output(root: Span) -> list[dict[str, Any]]:
    value = attribute_json(root.attributes, "evalcli.turn.output")
    return value if isinstance(value, list) else []


def _valid(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages a transcript accepts: every tool message answers a call id, every call has a name."""
    out = []
    for n, message in enumerate(messages):
        if message.get("role") == "tool" and not message.get("tool_call_id"):
            message = {**message, "tool_call_id": f"unknown_{n}"}
        if message.get("role") not in ("assistant", "tool"):
            continue
        out.append(message)
    return out


__all__ = ["Ingested", "decode_attributes", "ingest", "is_trace_file"]
