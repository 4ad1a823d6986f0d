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
import re
from collections.abc import Iterable, Iterator
from dataclasses import field
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

from ..errors import DatasetError, Problem, lone_surrogate, not_utf8
from ..records import record
from .grouping import Grouper, Reopened
from .otlp import Unreadable, decode_attributes, hex_id, read_request
from .positions import Locate, located, one_line
from .spans import Span, SpanEvent


@record
class Ingested:
    """What a trace file holds: its conversations as ``(line, {"id", "messages"})``, made one at a time as they are
    read (once), and the warnings of reading it."""

    conversations: Iterable[tuple[int, dict[str, Any]]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    spans: int = 0
    """How many spans were read."""
    path: Path | None = None

    def no_conversation(self) -> Problem:
        """What is wrong with a trace file none of whose spans makes a conversation (docs/otel.md): said as that,
        never as a dataset with no items and no target."""
        return Problem(str(self.path), f"the trace file holds no conversation: none of its {self.spans} span(s) is a model "
                       "call, a tool call or an agent run with an input or output evalcli reads",
                       "docs/otel.md ('What is read from a span') lists what is read; a file of other spans (HTTP "
                       "requests, database queries) has nothing to score")


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
    """The conversations of a trace file, grouped and ordered (docs/otel.md). A file of one JSON document a line is
    read twice, a line at a time: first for the line where each trace's last span is, then for its spans, each trace
    read into turns at its last line (docs/performance.md#memory); a document written over several lines is read
    whole. A span of a trace already read into turns (the first read missed it) makes the file read again, whole."""
    try:
        try:
            return _ingest(path, streamed=True)
        except Reopened:
            return _ingest(path, streamed=False)
    except UnicodeDecodeError:
        raise DatasetError([not_utf8(path)]) from None


def _ingest(path: Path, *, streamed: bool) -> Ingested:
    found = Ingested(path=path)
    grouper = Grouper()
    for span in _spans(path, found.warnings, grouper if streamed else None):
        grouper.add(span)
    if not grouper.spans:  # what made each span unreadable says more than "no span" alone (the first few)
        why = "".join(f"\n  {warning}" for warning in found.warnings[:5])
        more = f"\n  ... and {len(found.warnings) - 5} more" if len(found.warnings) > 5 else ""
        raise DatasetError([Problem(str(path), f"the trace file has no span evalcli can read{why}{more}",
                                    "export OTLP JSON (the collector's file exporter), or a Jaeger or Phoenix export")])
    found.spans = grouper.spans
    warnings, found.conversations = grouper.conversations()
    found.warnings.extend(warnings)
    return found


def _spans(path: Path, warnings: list[str], grouper: Grouper | None) -> Iterator[Span]:
    """The file's readable spans in the order it writes them (what cannot be read: a located warning); with a file
    of one document a line and a ``grouper``, each trace closed in it after its last line."""
    if _one_a_line(path):
        last = _last_lines(path) if grouper is not None else {}
        for number, document in _lines(path):
            yield from _readable(document, one_line(path, number), warnings)
            if grouper is not None:
                for trace_id in last.pop(number, ()):
                    grouper.close(trace_id)
        return
    text = path.read_text(encoding="utf-8-sig")
    stripped = text.lstrip()
    several = False
    try:
        document = json.loads(text)
    except ValueError as whole:
        if not stripped.startswith("{"):
            raise DatasetError([Problem(f"{path}:1:1", "not a trace file: it is not JSON",
                                        "export OTLP JSON, or a Jaeger or Phoenix JSON export")]) from None
        document = _documents(path, text) if getattr(whole, "msg", "") == "Extra data" else None
        if document is None:
            _not_json(path, whole)
        several = True
    _refuse_lone_surrogate(path, text, 1)
    located_document = located(text, path, document) if "\n" in text.strip() else (document, one_line(path, 1))
    for one in document if several else [document]:  # several documents: each read as a document of its own
        yield from _readable(one, located_document[1], warnings)


def _not_json(path: Path, error: ValueError) -> NoReturn:
    raise DatasetError([Problem(f"{path}:{getattr(error, 'lineno', 1)}:{getattr(error, 'colno', 1)}",
                                f"not valid JSON: {getattr(error, 'msg', error)}",
                                "the file is one JSON document cut short or edited by hand: export it again")]) from None


def _documents(path: Path, text: str) -> list[Any] | None:
    """The JSON documents of a file that writes several one after another, each over several lines (the Python
    SDK's console exporter writing to a file, ``MessageToJson`` requests appended): a list of them, or ``None`` when
    one of them is not a JSON object (the file is then not JSON: the caller says where it breaks)."""
    decoder = json.JSONDecoder()
    found: list[Any] = []
    at = 0
    while True:
        while at < len(text) and text[at] in " \t\r\n":
            at += 1
        if at == len(text):
            return found
        if text[at] != "{":
            return None
        try:
            document, at = decoder.raw_decode(text, at)
        except ValueError as broken:  # a later document cut short: located where it breaks
            _not_json(path, broken)
        found.append(document)


def _readable(document: Any, locate: Locate, warnings: list[str]) -> Iterator[Span]:
    for found in _document(document, locate):
        if isinstance(found, Unreadable):
            warnings.append(f"{found.where or locate(document)}: {found}: skipped")
        else:
            yield found


def _one_a_line(path: Path) -> bool:
    """Whether the file is one JSON document a line: its first line that is not blank is a JSON object of its own
    (a document written over several lines, or a file that is not JSON, is read whole)."""
    with path.open(encoding="utf-8-sig") as handle:
        for line in handle:
            if line.strip():
                if not line.lstrip().startswith("{"):
                    return False
                try:
                    json.loads(line)
                except ValueError:
                    return False
                return True
    return False


def _lines(path: Path) -> Iterator[tuple[int, Any]]:
    with path.open(encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:  # without its newline: a line cut short is located where its JSON breaks, not past its end
                document = json.loads(line.rstrip("\n"))
            except ValueError as exc:
                raise DatasetError([Problem(f"{path}:{number}:{getattr(exc, 'colno', 1)}",
                                            f"not valid JSON: {getattr(exc, 'msg', exc)}",
                                            "each line of a trace file is one JSON document (an OTLP "
                                            "ExportTraceServiceRequest, or a Phoenix span)")]) from None
            _refuse_lone_surrogate(path, line, number)
            yield number, document


def _refuse_lone_surrogate(path: Path, text: str, first_line: int) -> None:
    """A trace file's text that escapes half a surrogate pair alone is refused where it does (docs/otel.md)."""
    problem = lone_surrogate(path, text, first_line)
    if problem is not None:
        raise DatasetError([problem])


TRACE_ID = re.compile(r'"(traceId|traceID|trace_id)"\s*:\s*"((?:[^"\\]|\\.)*)"')
"""A trace id in a line's JSON text: OTLP's ``traceId``, Jaeger's ``traceID``, Phoenix's ``trace_id`` (a quote inside
a JSON string is escaped, so a key is never matched inside a value; a link's trace id is matched too, harmlessly; an
id written with escapes, as a base64 id's ``\\/``, is read as JSON reads it)."""


def _last_lines(path: Path) -> dict[int, list[str]]:
    """The traces whose last span is on each line: the first read of a file of one document a line, which looks
    only for trace ids in each line's text (``TRACE_ID``), as the readers make them."""
    last: dict[str, int] = {}
    with path.open(encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, start=1):
            for key, value in TRACE_ID.findall(line):
                if "\\" in value:
                    value = _unescaped(value)
                found = _jaeger_hex(value) if key == "traceID" else hex_id(value, 16)
                if found is not None:
                    last[found] = number
    by_line: dict[int, list[str]] = {}
    for trace_id, number in last.items():
        by_line.setdefault(number, []).append(trace_id)
    return by_line


def _unescaped(value: str) -> str:
    try:
        return str(json.loads(f'"{value}"'))
    except ValueError:
        return value


def _jaeger_hex(value: str) -> str | None:
    try:
        return _jaeger_id(value, 16)
    except ValueError:
        return None


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
        status = raw.get("status") if isinstance(raw.get("status"), dict) else {}  # the Python SDK's own JSON
        error = None
        if raw.get("status_code") == "ERROR" or status.get("status_code") == "ERROR":
            error = str(raw.get("status_message") or status.get("description") or "")
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


__all__ = ["Ingested", "decode_attributes", "ingest", "is_trace_file"]
