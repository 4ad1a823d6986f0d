"""One turn's captured spans and the context variable that says which turn a span belongs to (docs/otel.md):
shared by the capture (``capture``) and its OpenTelemetry side (``capture_sdk``)."""

from __future__ import annotations

import copy
from contextvars import ContextVar
from typing import Any

from .spans import Span, SpanEvent, sdk_error
from .turns import TurnSpans


class TurnCapture:
    """One turn's spans, as they end (SDK spans, read only when the turn is over)."""

    __slots__ = ("attached", "finished", "ids", "index", "item", "span", "span_id", "started", "started_ns", "thread",
                 "token", "usage_mark")

    def __init__(self, index: int, thread: str | None, item: str) -> None:
        self.index = index
        self.thread = thread
        self.item = item
        self.started: list[Any] = []
        """Every SDK span started under the turn (the span processor only appends: nothing is read while it runs)."""
        self.finished: list[Any] = []
        """The spans of ``started`` that had ended when the turn ended (evalcli's turn span left out)."""
        self.span: Any = None
        """evalcli's span for this turn, once it is started."""
        self.span_id: int = 0
        self.ids: list[int] = []
        self.started_ns = 0
        self.token: Any = None
        self.attached: Any = None
        """The context token of the turn span made current (detached when the turn ends)."""
        self.usage_mark = 0
        """How many LLM calls the conversation had recorded when the turn began."""

    def close(self) -> None:
        """The turn is over: its finished spans are those of its spans that have ended (read once, here)."""
        turn_span = self.span
        self.finished = [s for s in self.started if s.end_time is not None and s is not turn_span]

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (a ``--workers`` result on its way to the run's process, docs/performance.md#workers) as what a
        reader of the finished turn uses, its spans as plain records: the SDK's spans hold locks, a context token and
        the tracer provider, none of which can leave the process."""
        return CapturedSpans, (self.spans(),)

    def spans(self, *, resource: bool = True) -> list[Span]:
        """The turn's finished spans (evalcli's own turn span left out)."""
        from .spans import from_sdk

        return [from_sdk(s, resource=resource) for s in self.finished]

    def read(self) -> TurnSpans:
        """The turn's tool calls and model usage (messages unread). Each span's attributes are read once, here: only
        the spans a reader can recognise become ``Span`` records (their attributes the SDK's own dict, copied in one
        step), each with the nearest such span above it as its parent (what counting nested calls once needs); the
        others are never formatted or copied."""
        parent_of: dict[int, int | None] = {}
        readable: dict[int, Any] = {}
        for sdk in self.finished:
            parent = sdk.parent
            span_id = sdk.context.span_id
            parent_of[span_id] = parent.span_id if parent is not None else None
            attributes = sdk.attributes.copy()
            if READABLE_KEYS.isdisjoint(attributes):
                continue
            readable[span_id] = (sdk, attributes)
        parents: dict[str, str | None] = {}
        spans: list[Span] = []
        for span_id, (sdk, attributes) in readable.items():
            above = parent_of[span_id]
            while above is not None and above not in readable:
                above = parent_of.get(above)
            hex_id = f"{span_id:016x}"
            parents[hex_id] = f"{above:016x}" if above is not None else None
            spans.append(Span(f"{sdk.context.trace_id:032x}", hex_id, parents[hex_id], sdk.name, sdk.start_time or 0,
                              sdk.end_time or 0, attributes, [SpanEvent(e.name, e.timestamp or 0, dict(e.attributes or {}))
                                                              for e in sdk.events], error=sdk_error(sdk.status)))
        return TurnSpans.of(spans, messages=False, parents=parents)


READABLE_KEYS = frozenset({"gen_ai.operation.name", "openinference.span.kind", "gen_ai.usage.input_tokens",
                           "gcp.vertex.agent.tool_call_args", "gcp.vertex.agent.llm_request", "gen_ai.system",
                           "gen_ai.provider.name"})
"""A span with none of these attributes is no model or tool call (``readers.read``): its events are not looked at (a
span with the deprecated GenAI message events also has ``gen_ai.system`` or ``gen_ai.provider.name``)."""


class CapturedSpans:
    """A finished turn's captured spans in another process than the one that captured them (a ``--workers`` result,
    docs/performance.md#workers): ``TurnCapture.spans`` as the turn had them, for an export."""

    __slots__ = ("kept",)

    def __init__(self, kept: list[Span]) -> None:
        self.kept = kept

    def spans(self, *, resource: bool = True) -> list[Span]:
        """Copies of the turn's spans (a reader may change them, as ``TurnCapture.spans`` gives new ones each time)."""
        fresh = copy.deepcopy(self.kept)
        if not resource:
            for span in fresh:
                span.resource = {}
        return fresh


CURRENT: ContextVar[TurnCapture | None] = ContextVar("evalcli_turn_capture", default=None)
