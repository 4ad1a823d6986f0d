"""OpenTelemetry, both ways (docs/otel.md): capture the spans an agent emits during each turn, read traces other
tools exported as recorded conversations, and write a run as spans.

Nothing in this package imports OpenTelemetry at import time: capture loads it only when the target's code did.
Spans, their readers and a turn's capture are imported when first used (a run whose agent emits no span never
imports them; evalcli/lazy.py, docs/performance.md "Start-up and finish").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports
from .capture import arm, armed, begin, end, may_emit_spans

if TYPE_CHECKING:
    from .readers import ModelCall, ToolUse, read
    from .spans import Span, SpanEvent
    from .turn_capture import TurnCapture
    from .turns import TurnSpans

__getattr__ = lazy_exports(__name__, {
    ".readers": ("ModelCall", "ToolUse", "read"),
    ".spans": ("Span", "SpanEvent"),
    ".turn_capture": ("TurnCapture",),
    ".turns": ("TurnSpans",),
})

__all__ = ["ModelCall", "Span", "SpanEvent", "ToolUse", "TurnCapture", "TurnSpans", "arm", "armed",
           "begin", "end", "may_emit_spans",
           "read"]
