"""One turn's captured spans and the context variable that says which turn a span belongs to (docs/otel.md):
shared by the capture (``capture``) and its OpenTelemetry side (``capture_sdk``)."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from .spans import Span
from .turns import TurnSpans


class TurnCapture:
    """One turn's spans, as they end (SDK spans, read only when the turn is over)."""

    __slots__ = ("attached", "finished", "ids", "index", "item", "span", "span_id", "started_ns", "thread", "token", "usage_mark")

    def __init__(self, index: int, thread: str | None, item: str) -> None:
        self.index = index
        self.thread = thread
        self.item = item
        self.finished: list[Any] = []
        self.span: Any = None
        """evalcli's span for this turn, once it is started."""
        self.span_id: int = 0
        self.ids: list[int] = []
        self.started_ns = 0
        self.token: Any = None
        self.attached: Any = None
        self.usage_mark = 0
        """How many LLM calls the conversation had recorded when the turn began."""
        """The context token of the turn span made current (detached when the turn ends)."""

    def spans(self, *, resource: bool = True) -> list[Span]:
        """The turn's finished spans (evalcli's own turn span left out)."""
        from .spans import from_sdk

        return [from_sdk(s, resource=resource) for s in self.finished]

    def read(self) -> TurnSpans:
        """The turn's tool calls and model usage (messages unread): only the spans a reader can recognise are
        copied out of the SDK, the others give only their parent (for counting nested calls once)."""
        from .spans import from_sdk

        parents = {f"{s.context.span_id:016x}": f"{s.parent.span_id:016x}" if s.parent is not None else None
                   for s in self.finished}
        spans = [from_sdk(s, resource=False) for s in self.finished if _readable(s)]
        return TurnSpans.of(spans, messages=False, parents=parents)


READABLE_KEYS = ("gen_ai.operation.name", "openinference.span.kind", "gen_ai.usage.input_tokens",
                 "gcp.vertex.agent.tool_call_args", "gcp.vertex.agent.llm_request")
"""A span with none of these attributes (and no GenAI message event) is no model or tool call (``readers.read``)."""


def _readable(span: Any) -> bool:
    attributes = span.attributes or {}
    return any(key in attributes for key in READABLE_KEYS) or any(e.name.startswith("gen_ai.") for e in span.events)


CURRENT: ContextVar[TurnCapture | None] = ContextVar("evalcli_turn_capture", default=None)
