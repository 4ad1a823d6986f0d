"""OpenTelemetry, both ways (docs/otel.md): capture the spans an agent emits during each turn, read traces other
tools exported as recorded conversations, and write a run as spans.

Nothing in this package imports OpenTelemetry at import time: capture loads it only when the target's code did.
"""

from __future__ import annotations

from .capture import arm, armed, begin, end, may_emit_spans
from .readers import ModelCall, ToolUse, read
from .spans import Span, SpanEvent
from .turn_capture import TurnCapture
from .turns import TurnSpans

__all__ = ["ModelCall", "Span", "SpanEvent", "ToolUse", "TurnCapture", "TurnSpans", "arm", "armed",
           "begin", "end", "may_emit_spans",
           "read"]
