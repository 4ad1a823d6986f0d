"""Capture (docs/otel.md): the OpenTelemetry spans an agent emits during a turn, tied to that conversation and turn.

``arm`` is called once a run has loaded its target. When the target's code imported OpenTelemetry (every framework
that emits spans does), it adds evalcli's span processor to the tracer provider the user set, or, when there is
none, sets a provider of its own that loads the OpenTelemetry SDK only when a span is started inside a turn: a run
whose agent emits no span never imports the SDK. Without OpenTelemetry imported, nothing is done at all.

Each turn is a ``TurnCapture`` in a context variable (``CURRENT``) for as long as the target's call runs: the
conversation's task and the worker threads evalcli starts carry it, so concurrent conversations never see each
other's spans. A span started under it belongs to that turn, and so does every span whose parent does (a thread
the agent starts without the context still reaches its turn through the parent). Each turn runs inside an evalcli
span (``evalcli.turn``), the parent of the agent's spans.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any

from ..llm.usage import current_usage

if TYPE_CHECKING:
    from .turn_capture import TurnCapture


class _State:
    armed = False
    lock = threading.Lock()
    processor: Any = None
    """The SDK side (``capture_sdk.Capture``), once armed."""
    refused: str | None = None
    """Why capture cannot be on in this process (the user's provider takes no processor), once found."""


def arm(instrument: list[str] | None = None) -> bool:
    """Start capturing for this process if an agent can emit spans (OpenTelemetry is imported, or ``instrument``
    asks for instrumentors); returns whether capture is on. Safe to call again."""
    with _State.lock:
        if _State.armed:
            return True
        if "opentelemetry.trace" not in sys.modules and not instrument:
            return False
        from . import capture_sdk

        installed = capture_sdk.install()
        if isinstance(installed, str):
            _State.refused = installed
            return False
        _State.processor = installed
        _State.armed = True
    if instrument:
        from .instrument import instrument_frameworks

        instrument_frameworks(instrument)
    return True


def refused() -> str | None:
    """Why capture is off although the target can emit spans (``arm`` found a provider it cannot add to), or ``None``."""
    return _State.refused


def may_emit_spans() -> bool:
    """Whether the code imported so far can emit OpenTelemetry spans (it imported the API): then capture can see a
    target's tool calls even when its replies are text."""
    return "opentelemetry.trace" in sys.modules


def armed() -> bool:
    return _State.armed


def begin(index: int, thread: str | None, item: str) -> TurnCapture | None:
    """Open turn ``index``'s capture in the current context (``None`` when capture is not armed); ``end`` closes it."""
    if not _State.armed:
        return None
    from .turn_capture import CURRENT, TurnCapture  # spans, their readers: only once capture is armed

    turn = TurnCapture(index, thread, item)
    sink = current_usage.get()
    turn.usage_mark = len(sink.records) if sink is not None else 0
    turn.token = CURRENT.set(turn)
    _State.processor.begin(turn)
    return turn


def end(turn: TurnCapture) -> None:
    """Close the turn's capture: spans that end after this are no longer its own."""
    from .turn_capture import CURRENT

    _State.processor.end(turn)
    CURRENT.reset(turn.token)
