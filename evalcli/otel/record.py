"""What a turn's captured spans add to its record (docs/otel.md, "Capture"): the tool calls and model usage the
target did not report itself. Where the reply already has tool calls, or the adapter already counted the turn's model
calls, spans add nothing twice; a turn with no span costs one check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..llm import current_usage
from ..messages import Message
from ..targets import record_target_call
from ..tools import ToolCall
from ..tools.annotate import with_unreported

if TYPE_CHECKING:
    from .turn_capture import TurnCapture

ON_VALUES = ("on", True)
OFF_VALUES = ("off", False)


def spans_on(options: dict[str, Any]) -> bool:
    """Whether a conversation's ``target_options`` leave capture on (``spans: off`` turns it off)."""
    return options.get("spans", True) not in OFF_VALUES


def recorded(turn: TurnCapture | None, messages: list[Message], index: int) -> list[Message]:
    """The turn's messages with the tool calls its spans saw and the reply did not report (each an assistant tool call
    and its result, before the turn's answer); the spans' model calls are recorded as the target's usage when the
    adapter recorded none for this turn."""
    if turn is None or not turn.finished:
        return messages
    need_tools = not any(m.get("tool_calls") for m in messages)
    sink = current_usage.get()
    # only the calls recorded since the turn began can be this turn's: a long conversation is not read again each turn
    need_usage = sink is not None and not any(r.purpose == "target" and r.turn_index == index
                                              for r in sink.records[turn.usage_mark:])
    if not need_tools and not need_usage:
        return messages
    spans = turn.read()
    if need_usage:
        for call in spans.models:
            record_target_call(call.model, call.prompt_tokens, call.completion_tokens, turn_index=index,
                               cached_tokens=call.cached_tokens,
                               duration_ms=max(0, call.span.end_ns - call.span.start_ns) / 1e6)
    if need_tools and spans.tools:
        calls = [ToolCall(index, n, t.name, t.arguments, "live", t.result, t.error, t.call_id)
                 for n, t in enumerate(spans.tools)]
        messages = with_unreported(messages, calls)
    return messages


def arm_capture(dataset: Any, items: list[Any]) -> bool:
    """Before a run plays ``items``: arm capture when one of them calls the target with spans on (``instrument:``
    names the instrumentor families to call first); returns whether capture is on."""
    if dataset.target is None:
        return False
    if not any(spans_on(dataset.options_of(item)) for item in items if not item.recorded):
        return False
    instrument = dataset.target_options.get("instrument") or []
    from .capture import arm

    return arm(list(instrument))
