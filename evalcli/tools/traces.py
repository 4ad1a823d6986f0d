"""Tool calls read from OpenTelemetry traces (docs/hermetic.md, "Mocks from recordings"): the tool spans of an
OTLP/JSON export, as the GenAI semantic conventions write them, for ``evalcli mocks from-tape --from-traces``.

A tool span is one whose ``gen_ai.operation.name`` is ``execute_tool`` (or that has a ``gen_ai.tool.name``); its
arguments are ``gen_ai.tool.call.arguments`` (JSON), its result ``gen_ai.tool.call.result``, and a span whose status
is an error (or that has ``error.type``) failed with the status's message. A span's conversation is its
``gen_ai.conversation.id``, else its trace; its calls are in the order they started.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import LONE_SURROGATE, lone_surrogate_at
from ..secrets import redactor
from .plan import Recorded
from .spec import tape_arguments


class TracesError(ValueError):
    """A file that is not an OTLP/JSON export."""


def _value(raw: Any) -> Any:
    """An OTLP ``AnyValue`` as a Python value."""
    if not isinstance(raw, dict):
        return raw
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in raw:
            return raw[key]
    if "intValue" in raw:
        return int(raw["intValue"])
    if "arrayValue" in raw:
        return [_value(v) for v in raw["arrayValue"].get("values", [])]
    if "kvlistValue" in raw:
        return {kv["key"]: _value(kv.get("value")) for kv in raw["kvlistValue"].get("values", [])}
    return None


def _json(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _exports(path: Path) -> list[Any]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise TracesError(f"cannot read it: {exc}") from None
    surrogate = lone_surrogate_at(text)  # the mocks made from it could not be read back (docs/datasets.md)
    if surrogate is not None:
        raise TracesError(f"line {surrogate[0]}, column {surrogate[1]}: {LONE_SURROGATE.format(escape=surrogate[2])}")
    try:
        return [json.loads(text)]
    except ValueError:
        pass
    exports = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                exports.append(json.loads(line))
            except ValueError as exc:
                raise TracesError(f"line {number} is not JSON: {exc}") from None
    return exports


def read_trace_calls(path: str | Path) -> dict[str, list[Recorded]]:
    """The tool calls of an export's tool spans, by conversation, in the order they started (secrets redacted)."""
    spans: list[tuple[str, int, Recorded]] = []
    exports = _exports(Path(path))
    if not all(isinstance(e, dict) and isinstance(e.get("resourceSpans"), list) for e in exports):
        raise TracesError("an OTLP/JSON export is an object with 'resourceSpans'")
    redact = redactor()
    for export in exports:
        for resource in export["resourceSpans"]:
            for scope in resource.get("scopeSpans") or ():
                for span in scope.get("spans") or ():
                    attributes = {a.get("key"): _value(a.get("value")) for a in span.get("attributes") or ()}
                    tool = attributes.get("gen_ai.tool.name")
                    if not isinstance(tool, str) or attributes.get("gen_ai.operation.name", "execute_tool") != \
                            "execute_tool":
                        continue
                    arguments = _json(attributes.get("gen_ai.tool.call.arguments"))
                    status = span.get("status") or {}
                    failed = status.get("code") in (2, "STATUS_CODE_ERROR") or "error.type" in attributes
                    error = str(status.get("message") or attributes.get("error.type") or "error") if failed else None
                    result = redact.value(_json(attributes.get("gen_ai.tool.call.result")))
                    conversation = attributes.get("gen_ai.conversation.id") or f"trace:{span.get('traceId')}"
                    spans.append((str(conversation), int(span.get("startTimeUnixNano") or 0),
                                  Recorded(tool, tape_arguments(arguments if isinstance(arguments, dict) else {}),
                                           None if failed else result, None if error is None else redact(error))))
    calls: dict[str, list[Recorded]] = {}
    for conversation, _, recorded in sorted(spans, key=lambda s: (s[0], s[1])):
        calls.setdefault(conversation, []).append(recorded)
    return calls
