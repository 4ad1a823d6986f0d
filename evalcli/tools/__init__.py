"""Tools under the dataset's control (docs/hermetic.md): mocks, tapes and hermetic runs.

``spec`` holds what a dataset says (mocks by tool, ``unmocked``, the tape to replay) and the one rule for
matching a call's arguments; ``plan`` one conversation's ``ToolPlan`` in a context variable, which every wrapped
tool asks (``acall``, ``call``); ``annotate`` records a turn's tool calls: each result's ``source``, the calls the plan
saw that the reply did not report, the results that ran outside the plan; ``threads`` carries the plan into the
threads a turn starts; ``decorator`` is ``@evalcli.tool``; ``tape`` reads and writes recorded calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports
from .annotate import Outside, TurnTools, recorded_turn
from .decorator import REGISTERED, tool
from .plan import CURRENT, HermeticRun, MockedToolError, Recorded, ToolCall, ToolPlan, ToolRefused, acall, call, same_tool
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
from .threads import install as carry_plans_into_threads

if TYPE_CHECKING:
    from .tape import SUFFIX, Tape, TapeError, TapeRecorder, read_tape, tape_path

# tapes are read and written only by a dataset that replays one and a run that records one (docs/performance.md
# "Start-up and finish"; evalcli/lazy.py)
__getattr__ = lazy_exports(__name__, {".tape": ("SUFFIX", "Tape", "TapeError", "TapeRecorder", "read_tape", "tape_path")})

__all__ = ["CURRENT", "MATCHES", "REGISTERED", "RESERVED", "SOURCES", "SUFFIX", "UNMOCKED", "Answer", "HermeticRun",
           "Mock", "MockedToolError", "Outside", "Recorded", "Tape", "TapeError", "TapeRecorder", "ToolCall", "ToolPlan",
           "ToolRefused", "ToolsConfig", "TurnTools", "acall", "as_text", "call", "canonical", "carry_plans_into_threads",
           "jsonable", "matches", "read_tape", "recorded_turn", "same_tool", "tape_arguments", "tape_path", "tool"]
