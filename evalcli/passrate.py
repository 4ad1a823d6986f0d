"""Verdicts that know flakiness (docs/verdicts.md#repeats-and-the-pass-rate): the one rule of a gate under repeats,
and the sequential rule of ``--repeat auto[:MAX]``.

- ``passes_at_rate``: a gate passes on a conversation played several times when at least ``--pass-rate P`` of the
  plays that scored it passed it (default 1.0: every play). The verdict, ``diff``, ``compare``, the pytest plugin
  and the paired statistics all read a conversation's pass through it.
- ``settle``: with ``--repeat auto``, after each play, whether the conversation is decided: stable-pass once the
  lower end of the Wilson 95% interval of its pass rate (z = 1.96, no continuity correction) lies strictly above
  P, stable-fail once the upper end lies strictly below it, else undecided until MAX plays, where one that passed
  (failed) every play is stable-pass (stable-fail) and any other flaky. At P = 1.0 no interval lies above P, so a
  conversation is settled by its first failure, or plays MAX.

The stability labels of repeated conversations (``stability_of``) live here too. This is a base module: it imports
nothing of evalcli but ``thresholds``.
"""

from __future__ import annotations

import math

from .thresholds import TOLERANCE

DEFAULT_PASS_RATE = 1.0
"""``--pass-rate``'s default: a gate passes only when every play passed it."""
Z = 1.96
"""The normal quantile of the Wilson 95% interval."""
DEFAULT_MAX_PLAYS = 10
"""``--repeat auto``'s MAX when none is given."""
STABLE_PASS, FLAKY, STABLE_FAIL = "stable-pass", "flaky", "stable-fail"
STABILITIES = (STABLE_PASS, FLAKY, STABLE_FAIL)
"""A conversation played ``--repeat k`` times (docs/history.md): every play passed every gate, some did, none did."""


def stability_of(plays_passed: int | None, plays: int, settled: str | None = None) -> str | None:
    """The one rule of stability: ``stable-pass`` when all ``plays`` passed every gate, ``stable-fail`` when none
    did, else ``flaky``; ``None`` for a conversation played once (or whose plays are not known). Under ``--repeat
    auto`` the label the sequential rule ``settled`` on (``settle``, docs/verdicts.md#sequential-repeats), even
    after one play."""
    if settled is not None:
        return settled
    if plays_passed is None or plays <= 1:
        return None
    return STABLE_PASS if plays_passed >= plays else STABLE_FAIL if plays_passed <= 0 else FLAKY


def stability_counts(found: list[str | None]) -> dict[str, int]:
    """How many conversations are stable-pass, flaky and stable-fail (``{}`` when none was repeated)."""
    counts = {name: found.count(name) for name in STABILITIES}
    return counts if any(counts.values()) else {}


def passes_at_rate(passed: int, plays: int, pass_rate: float = DEFAULT_PASS_RATE) -> bool:
    """The canonical gate rule under repeats: ``passed`` of ``plays`` is at least ``pass_rate`` of them (within
    ``TOLERANCE`` per play, so 7 of 10 meets 0.7 whatever the float product). No play scored: not passed."""
    if plays <= 0:
        return False
    return passed >= pass_rate * plays - TOLERANCE * plays


def wilson(passed: int, plays: int, z: float = Z) -> tuple[float, float]:
    """The Wilson score interval of ``passed`` successes in ``plays`` trials (no continuity correction), clamped to
    [0, 1]; exactly 1 at the top when every play passed and exactly 0 at the bottom when none did (the float formula
    misses both by a rounding error, which at P = 1.0 would decide a conversation that never failed)."""
    if plays <= 0:
        return 0.0, 1.0
    rate = passed / plays
    square = z * z / plays
    centre = (rate + square / 2) / (1 + square)
    half = z * math.sqrt(rate * (1 - rate) / plays + square / (4 * plays)) / (1 + square)
    low = 0.0 if passed <= 0 else max(0.0, centre - half)
    high = 1.0 if passed >= plays else min(1.0, centre + half)
    return low, high


def settle(passed: int, plays: int, pass_rate: float = DEFAULT_PASS_RATE,
           max_plays: int = DEFAULT_MAX_PLAYS) -> str | None:
    """``--repeat auto``'s decision after ``plays`` plays of which ``passed`` passed every gate: ``stable-pass``,
    ``stable-fail``, ``flaky`` (at ``max_plays`` only), or ``None``: play it again."""
    low, high = wilson(passed, plays)
    if low > pass_rate:
        return STABLE_PASS
    if high < pass_rate:
        return STABLE_FAIL
    if plays >= max_plays:
        return STABLE_PASS if passed >= plays else STABLE_FAIL if passed <= 0 else FLAKY
    return None
