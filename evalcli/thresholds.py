"""The one comparison of a score with a bound (docs/scorers.md#thresholds-compare-with-a-tolerance): every
threshold and every gate, per conversation, per turn, over a run, in diff, compare and the pytest plugin, is
decided by ``within``.

A mean within ``TOLERANCE`` (1e-9) of its bound reaches it: the float mean of three 0.7 scores is 0.6999999999999998,
and it reaches a 0.7 threshold (a deliberate deviation from Mastra, whose mean misses it).

This is a base module: it imports nothing of evalcli.
"""

from __future__ import annotations

import math
from typing import Any

from .records import record

TOLERANCE = 1e-9
"""How near a bound a mean may fall and still reach it (docs/scorers.md#thresholds-compare-with-a-tolerance): the
float mean of three 0.7 scores is 0.6999999999999998, and it reaches a 0.7 threshold (a deviation from Mastra)."""
GATE = 1.0
"""What a gate's score (on a conversation, or averaged over a run's) must reach."""


def within(value: float | None, low: float | None, high: float | None = None) -> bool:
    """The one comparison of a score with a bound: ``value`` reaches ``low`` and does not pass ``high`` (either may
    be ``None``), each within ``TOLERANCE``; no value, or a non-finite one, fails. Every threshold and every gate
    (per conversation, per turn, over a run, in diff, compare and pytest) is decided here."""
    if value is None or not math.isfinite(value):
        return False
    if low is not None and value < low - TOLERANCE:
        return False
    return not (high is not None and value > high + TOLERANCE)


def same(a: float | None, b: float | None) -> bool:
    """Whether two scores are one score: both missing, or within ``TOLERANCE`` of each other. A smaller difference is
    floating point's, never a change: ``diff`` counts no regression, ``compare`` and the paired statistics no moved
    conversation, for 1.0 against 1 - 1e-10 (docs/history.md#comparing-runs)."""
    if a is None or b is None:
        return a is None and b is None
    if not (math.isfinite(a) and math.isfinite(b)):
        return a == b or (math.isnan(a) and math.isnan(b))
    return abs(a - b) <= TOLERANCE


def reaches_gate(score: float | None) -> bool:
    """Whether a gate's score (one conversation's, one play's, or a run's mean) reaches 1 (``within``)."""
    return within(score, GATE)


@record(frozen=True)
class Threshold:
    """An inclusive bound on a scorer's average: a number is a minimum, ``{min, max}`` are bounds (either may be
    left out). ``raw`` is the config as written, echoed in results and stored."""

    min: float | None
    max: float | None
    raw: Any

    @classmethod
    def from_raw(cls, raw: Any) -> Threshold:
        """The threshold of an already validated config (as echoed in results and stored plans)."""
        if isinstance(raw, dict):
            return cls(raw.get("min"), raw.get("max"), raw)
        return cls(float(raw), None, raw)

    def passed(self, average: float | None) -> bool:
        """Whether an average meets the bound (``within``: inclusive, with ``TOLERANCE``); no average, or a
        non-finite one, fails."""
        return within(average, self.min, self.max)
