"""Tools under the dataset's control (docs/hermetic.md): mocks, tapes and hermetic runs.

``spec`` holds what a dataset says (mocks by tool, ``unmocked``, the tape to replay) and the one rule for
matching a call's arguments; ``plan`` one conversation's ``ToolPlan`` in a context variable, which every wrapped
tool asks (``acall``, ``call``); ``annotate`` puts each result's ``source`` on the turn's tool messages;
``decorator`` is ``@evalcli.tool``; ``tape`` reads and writes recorded calls.
"""

from __future__ import annotations

from .annotate import annotate
from .decorator import REGISTERED, tool
from .plan import CURRENT, MockedToolError, Recorded, ToolCall, ToolPlan, ToolRefused, acall, call
from .spec import (
    MATCHES,
    RESERVED,
    SOURCES,
    UNMOCKED,
    Answer,
    Mock,
    ToolsConfig,
    as_text,
    canonical,
    jsonable,
    matches,
    tape_arguments,
)
from .tape import SUFFIX, Tape, TapeError, TapeRecorder, read_tape

__all__ = ["CURRENT", "MATCHES", "REGISTERED", "RESERVED", "SOURCES", "SUFFIX", "UNMOCKED", "Answer", "Mock",
           "MockedToolError", "Recorded", "Tape", "TapeError", "TapeRecorder", "ToolCall", "ToolPlan", "ToolRefused",
           "ToolsConfig", "acall", "annotate", "as_text", "call", "canonical", "jsonable", "matches", "read_tape",
           "tape_arguments", "tool"]
