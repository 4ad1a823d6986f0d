"""The OpenTelemetry side of capture (docs/otel.md): the span processor, evalcli's turn span and the provider set
when the user set none. Imported only once a target's code imported OpenTelemetry (``capture.arm``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import context as context_api
from opentelemetry import trace

from ..version import __version__
from .turn_capture import CURRENT, TurnCapture

SCOPE = "evalcli"


class Capture:
    """Ties spans to turns: a span started while a turn is current, or under a span of a turn, is that turn's."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider
        """The provider evalcli's turn spans come from: the user's, or ``LazyProvider`` (its SDK loaded on demand)."""
        self.by_span: dict[int, TurnCapture] = {}
        self._tracer: Any = None

    # the SpanProcessor interface (the SDK calls these on the thread that starts or ends a span)
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        turn = CURRENT.get()
        if turn is None:
            parent = span.parent
            turn = self.by_span.get(parent.span_id) if parent is not None else None
            if turn is None:
                return
        span_id = span.context.span_id
        self.by_span[span_id] = turn
        turn.ids.append(span_id)
        turn.started.append(span)

    def on_end(self, span: Any) -> None:
        pass  # nothing per span: the turn's spans are read once, when it ends (``TurnCapture.close``)

    def _on_ending(self, span: Any) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def begin(self, turn: TurnCapture) -> None:
        turn.started_ns = time.time_ns()
        if isinstance(self.provider, LazyProvider) and self.provider.sdk is None:
            return  # started with the turn's first span (LazyTracer), so a turn without spans loads nothing
        self.start_turn_span(turn)
        turn.attached = context_api.attach(trace.set_span_in_context(turn.span))

    def start_turn_span(self, turn: TurnCapture, *, start_time: int | None = None) -> None:
        if self._tracer is None:  # made once: an SDK tracer is not cheap to make
            tracer = self.provider.get_tracer(SCOPE, __version__)
            self._tracer = tracer.real() if isinstance(tracer, LazyTracer) else tracer
        tracer = self._tracer
        attributes = {"evalcli.turn.index": turn.index, "evalcli.item.id": turn.item}
        if turn.thread:
            attributes["gen_ai.conversation.id"] = turn.thread
        span = tracer.start_span(f"evalcli.turn {turn.index}", attributes=attributes, start_time=start_time,
                                 context=context_api.Context())
        turn.span, turn.span_id = span, span.get_span_context().span_id
        self.by_span[turn.span_id] = turn

    def end(self, turn: TurnCapture) -> None:
        if turn.attached is not None:
            context_api.detach(turn.attached)
        if turn.span is not None:
            turn.span.end()
        turn.close()
        for span_id in turn.ids:
            self.by_span.pop(span_id, None)
        self.by_span.pop(turn.span_id, None)


class LazyProvider(trace.TracerProvider):
    """The provider evalcli sets when the user set none: its tracers load the SDK at the first span started inside a
    turn; outside a turn, until then, their spans are the API's no-op ones (as they were without evalcli)."""

    def __init__(self) -> None:
        self.sdk: Any = None
        self.capture: Capture | None = None
        self._lock = threading.Lock()

    def get_tracer(self, instrumenting_module_name: str, instrumenting_library_version: str | None = None,
                   schema_url: str | None = None, attributes: Mapping[str, Any] | None = None) -> trace.Tracer:
        return LazyTracer(self, (instrumenting_module_name, instrumenting_library_version, schema_url, attributes))

    def load(self) -> Any:
        with self._lock:
            if self.sdk is None:
                from opentelemetry.sdk.trace import TracerProvider

                sdk = TracerProvider()
                sdk.add_span_processor(self.capture)  # type: ignore[arg-type]
                self.sdk = sdk
        return self.sdk

    # the SDK provider's own methods, for code that adds processors to the global provider after evalcli set it
    def add_span_processor(self, processor: Any) -> None:
        self.load().add_span_processor(processor)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.sdk.force_flush(timeout_millis)) if self.sdk is not None else True

    def shutdown(self) -> None:
        if self.sdk is not None:
            self.sdk.shutdown()


class LazyTracer(trace.Tracer):
    def __init__(self, provider: LazyProvider, args: tuple[Any, ...]) -> None:
        self._provider = provider
        self._args = args
        self._tracer: Any = None

    def real(self) -> Any:
        if self._tracer is None:
            self._tracer = self._provider.load().get_tracer(*self._args)
        return self._tracer

    def start_span(self, name: str, context: context_api.Context | None = None,
                   kind: trace.SpanKind = trace.SpanKind.INTERNAL, attributes: Any = None,
                   links: Sequence[trace.Link] | None = None, start_time: int | None = None,
                   record_exception: bool = True, set_status_on_exception: bool = True) -> trace.Span:
        turn = CURRENT.get()
        if self._provider.sdk is None and turn is None:
            return trace.INVALID_SPAN
        if turn is not None and not trace.get_current_span(context).get_span_context().is_valid:
            capture = self._provider.capture
            if turn.span is None and capture is not None:  # the turn's first span: now the turn has its own
                self.real()
                capture.start_turn_span(turn, start_time=turn.started_ns)
            if turn.span is not None:
                context = trace.set_span_in_context(turn.span, context)
        return self.real().start_span(name, context, kind, attributes, links, start_time, record_exception,  # type: ignore[no-any-return]
                                      set_status_on_exception)

    def start_as_current_span(self, name: str, context: context_api.Context | None = None,
                              kind: trace.SpanKind = trace.SpanKind.INTERNAL, attributes: Any = None,
                              links: Sequence[trace.Link] | None = None, start_time: int | None = None,
                              record_exception: bool = True, set_status_on_exception: bool = True,
                              end_on_exit: bool = True) -> Any:
        span = self.start_span(name, context, kind, attributes, links, start_time, record_exception,
                               set_status_on_exception)
        return trace.use_span(span, end_on_exit=end_on_exit, record_exception=record_exception,
                              set_status_on_exception=set_status_on_exception)


def install() -> Capture | str:
    """Add evalcli's processor to the user's SDK provider, or set a ``LazyProvider`` when they set none; a provider
    the user set that takes no span processor (``NoOpTracerProvider``, a vendor's own) is left as it is: the reason
    capture is off is returned instead (docs/otel.md)."""
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):  # the API's stand-in: no provider was set
        lazy = LazyProvider()
        trace.set_tracer_provider(lazy)
        provider = trace.get_tracer_provider()
        if provider is lazy:
            capture = Capture(lazy)
            lazy.capture = capture
            return capture
        # another provider won the race: it is the user's, and is read below (never tried again: no recursion)
    if not hasattr(provider, "add_span_processor"):
        return (f"the tracer provider the target set ({type(provider).__name__}) takes no span processor, so its "
                "spans are not captured; set an opentelemetry-sdk TracerProvider, or none")
    capture = Capture(provider)
    provider.add_span_processor(capture)
    return capture
