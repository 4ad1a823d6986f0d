"""Seeded faults (docs/hermetic.md, "Faults"): a flaky world a dataset can put its agent in.

``faults:`` on a tool (or on ``'*'``, every tool) makes some of its calls fail, time out, answer late or answer with a
malformed result. Whether the nth call of a tool in a conversation is hit, and how, is ``draw``: a pure function of
the seed, the conversation's identity, the tool and that call's index among the conversation's calls of the tool, so
a run and its rerun (or a resume) meet the same faults, whatever order the conversations and their tools run in.
"""

from __future__ import annotations

import hashlib
import math
from statistics import NormalDist
from typing import Any

from ..records import record
from .spec import ALL as ALL
from .spec import as_text, canonical

_P99 = NormalDist().inv_cdf(0.99)


@record(frozen=True)
class Faults:
    """What ``faults:`` says: the share of calls that fail (``error_rate``) or answer malformed (``malformed_rate``),
    the latency every call gets (a log-normal with median ``p50`` and 99th percentile ``p99``, seconds), the
    ``timeout`` past which a call fails as timed out, and the ``seed``."""

    error_rate: float = 0.0
    malformed_rate: float = 0.0
    p50: float = 0.0
    p99: float = 0.0
    timeout: float | None = None
    seed: int = 0


@record(frozen=True)
class Draw:
    """What happens to one call: it fails (``error``), times out (``timed_out``: after ``timeout`` seconds), answers
    malformed, and how long it waits first (``latency``, seconds)."""

    error: bool = False
    malformed: bool = False
    latency: float = 0.0
    timed_out: bool = False

    @property
    def fault(self) -> str | None:
        """How the call's result is not the tool's (``None``: it is, perhaps late): what the record says."""
        if self.timed_out:
            return "timeout"
        if self.error:
            return "error"
        return "malformed" if self.malformed else None


def _uniforms(seed: int, identity: str, tool: str, index: int) -> tuple[float, float, float]:
    digest = hashlib.sha256(canonical([seed, identity, tool, index]).encode()).digest()
    return tuple((int.from_bytes(digest[i:i + 8], "big") + 0.5) / 2.0 ** 64 for i in (0, 8, 16))  # type: ignore[return-value]


def latency(faults: Faults, u: float) -> float:
    """The latency at quantile ``u`` of the log-normal whose median is ``p50`` and 99th percentile ``p99``."""
    if faults.p50 <= 0:
        return 0.0
    sigma = max(math.log(max(faults.p99, faults.p50) / faults.p50), 0.0) / _P99
    return faults.p50 * math.exp(sigma * NormalDist().inv_cdf(u))


def draw(faults: Faults, identity: str, tool: str, index: int) -> Draw:
    """What ``faults`` does to the call of ``tool`` with this ``index`` (0-based, among the conversation's calls of
    that tool) in the conversation ``identity``: the same answer every time (docs/hermetic.md, "Faults")."""
    u_error, u_malformed, u_latency = _uniforms(faults.seed, identity, tool, index)
    waited = latency(faults, u_latency)
    timed_out = faults.timeout is not None and waited > faults.timeout
    error = not timed_out and u_error < faults.error_rate
    malformed = not timed_out and not error and u_malformed < faults.malformed_rate
    return Draw(error, malformed, min(waited, faults.timeout) if timed_out and faults.timeout is not None else waited,
                timed_out)


def malformed(value: Any) -> str:
    """A result as a flaky service sends it broken: its text cut off halfway (a JSON object loses its closing
    brace), so an agent that parses it meets the error a truncated response gives."""
    text = as_text(value)
    return text[: max(len(text) // 2, 1)] if len(text) > 1 else "{"


def fault_message(tool: str, found: Draw, timeout: float | None) -> str:
    """The error an injected failure reports to the agent."""
    if found.timed_out:
        return f"{tool} timed out after {timeout:g}s (injected fault)"
    return f"{tool} failed: service unavailable (injected fault)"
