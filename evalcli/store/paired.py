"""Two runs compared conversation by conversation (docs/history.md): over the conversations both runs have, the
discordant pass/fail counts with McNemar's p, per gate and scorer the paired difference B - A, under repeats
each conversation's pass rate compared the same way, and how large a change this many conversations can see.

Everything is computed from the two runs' stored conversations; the arithmetic is in ``stats``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import field
from typing import Any

from ..errors import UsageError
from ..identity import EXPLICIT, LEGACY, changed, identity_of, pair_by_identity
from ..records import record
from ..results import ItemResult, Outcome
from .stats import (
    ALPHA,
    CONFIDENCE,
    POWER,
    PairedDifference,
    conversations_needed,
    differences,
    mcnemar_p,
    paired_difference,
    smallest_detectable,
    spread,
)

Pair = tuple[ItemResult | None, ItemResult | None]
NAME_WIDTH = 48
"""How much of a conversation's first user message names it (``conversation_name``)."""


def conversation_name(item: ItemResult) -> str:
    """How every view of two runs names a conversation (docs/history.md#comparing-runs): its ``id`` when the item
    gives one; otherwise its content, the first user message in quotes (``"Tell me a joke"``), numbered as its
    identity is (``#2`` for the second identical item). Never its position: two runs need not share it."""
    identity = identity_of(item)
    if identity.startswith(EXPLICIT):
        return identity[len(EXPLICIT):]
    digest, _, nth = identity.removeprefix(LEGACY).partition("#")
    first = " ".join(next((turn.input for turn in item.turns if turn.input), "").split())
    if len(first) > NAME_WIDTH:
        first = first[:NAME_WIDTH - 1] + "…"
    return (f'"{first}"' if first else f"content {digest[:8]}") + (f" #{nth}" if nth else "")


def conversation_names(items: Iterable[ItemResult]) -> dict[str, str]:
    """Identity -> ``conversation_name`` for the conversations of the runs a view shows; two conversations whose
    names would read alike (the same first message, other later turns) are told apart by their content digest."""
    names: dict[str, str] = {}
    for item in items:
        names.setdefault(identity_of(item), conversation_name(item))
    return distinct_names(names)


def distinct_names(names: dict[str, str]) -> dict[str, str]:
    """Identity -> ``conversation_name`` (each conversation's first name), with names that read alike told apart by
    their content digest (``conversation_names``; ``diff`` and ``compare`` gather the names as they stream)."""
    counts = Counter(names.values())
    return {key: name if counts[name] == 1 or key.startswith(EXPLICIT) else
            f"{name} ({key.removeprefix(LEGACY)[:8]})" for key, name in names.items()}


def pair_conversations(items_a: list[ItemResult], items_b: list[ItemResult]) -> list[Pair]:
    """The conversations of run A and run B matched one to one by identity (docs/identity.md), A's order first, then those
    only B has. A conversation whose explicit id now names other content is *changed*: it is left out of the
    statistics (as ``diff`` and ``compare`` list it apart), so it appears as one only A and one only B have."""
    pairs: list[Pair] = []
    for item_a, item_b in pair_by_identity(items_a, items_b):
        if item_a is not None and item_b is not None and changed(item_a, item_b):
            pairs.extend([(item_a, None), (None, item_b)])
        else:
            pairs.append((item_a, item_b))
    return pairs


def check_alpha(alpha: float | None) -> None:
    if alpha is not None and not 0 < alpha < 1:
        raise UsageError(f"--alpha {alpha} must be between 0 and 1", "write e.g. --alpha 0.05")


def check_detect(detect: float | None) -> None:
    if detect is not None and not 0 < detect <= 1:
        raise UsageError(f"--detect {detect} must be a change in pass rate above 0 and at most 1",
                         "write e.g. --detect 0.05 for a change of 5 points")


@record(frozen=True)
class PassFail:
    """Pass/fail (every gate passed; an errored conversation fails) over the paired conversations."""

    n: int
    passed_a: int
    passed_b: int
    b: int
    """Passed in A, fail in B."""
    c: int
    """Failed in A, pass in B."""
    p: float
    """McNemar's exact two-sided p."""

    @property
    def change(self) -> float:
        """B's pass rate minus A's, over these conversations (= (c - b) / n)."""
        return (self.passed_b - self.passed_a) / self.n

    def significant_drop(self, alpha: float) -> bool:
        return self.p < alpha and self.b > self.c

    def significant_gain(self, alpha: float) -> bool:
        return self.p < alpha and self.c > self.b

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "passed_a": self.passed_a, "passed_b": self.passed_b, "b": self.b, "c": self.c,
                "p": self.p, "change": self.change}


@record(frozen=True)
class Figure:
    """A gate, a scorer or the pass rate over plays: A's and B's means over the pairs and B - A."""

    role: str
    """``gate``, ``scorer`` or ``pass rate``."""
    id: str
    mean_a: float
    mean_b: float
    difference: PairedDifference

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "id": self.id, "mean_a": self.mean_a, "mean_b": self.mean_b,
                **self.difference.to_json()}


@record(frozen=True)
class Detectable:
    """The smallest change in pass rate ``n`` paired conversations detect (ALPHA, POWER), and with ``--detect D``
    how many conversations D needs, judged by the spread of this comparison's differences."""

    measure: str
    """``pass/fail`` or ``pass rate`` (over the ``--repeat`` plays)."""
    n: int
    change: float | None
    """The smallest detectable change, at most 1 (100 points); ``None``: too few conversations to detect any."""
    needed_for_any: int
    """The fewest conversations that detect a change of 100 points (more than ``n`` when ``change`` is ``None``)."""
    spread: float
    """Mean squared difference per conversation (pass/fail: the share that changed)."""
    step: float
    """The smallest change one conversation's figure can make (1, or 1/k with k plays)."""
    detect: float | None = None
    needed: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"measure": self.measure, "n": self.n, "smallest_detectable_change": self.change,
                "conversations_needed_for_any": self.needed_for_any, "spread": self.spread, "alpha": ALPHA,
                "power": POWER, "detect": self.detect, "conversations_needed": self.needed}


@record
class PairedStats:
    """Run B against run A over the conversations both have."""

    paired: int
    only_a: int
    only_b: int
    pass_fail: PassFail
    figures: list[Figure]
    rates: Figure | None
    detectable: list[Detectable] = field(default_factory=list)
    status_changed: int = 0
    """Paired conversations whose status differs (errored in one run, played in the other): their gates and scorers
    are in no figure, but they changed."""

    @property
    def unchanged(self) -> bool:
        """Nothing moved: no gate, scorer or pass rate differs on any conversation, no conversation passed in one run
        only, and none changed status. Only then may a view say that nothing changed."""
        moved = any(f.difference.changed for f in [*self.figures, *([self.rates] if self.rates else [])])
        return not (moved or self.pass_fail.b or self.pass_fail.c or self.status_changed)

    def regressions(self, alpha: float) -> list[str]:
        """Why B is worse than A beyond the noise at ``alpha``: a significant drop of pass/fail (p < alpha, b > c)
        or a gate whose interval of B - A lies wholly below 0 with Wilcoxon's p below alpha
        (``PairedDifference.significant_drop``); empty when neither."""
        lines = []
        pf = self.pass_fail
        if pf.significant_drop(alpha):
            lines.append(f"pass/fail: {pf.b} passed in A and fail in B, {pf.c} the other way "
                         f"(McNemar p = {pvalue_text(pf.p)} < {alpha:g})")
        lines.extend(f"gate {f.id}: B - A = {f.difference.mean:+.3f}, {CONFIDENCE:.0%} interval "
                     f"[{f.difference.low:+.3f}, {f.difference.high:+.3f}] lies below 0 "
                     f"(Wilcoxon p = {pvalue_text(f.difference.p)} < {alpha:g})"
                     for f in self.figures if f.role == "gate" and f.difference.significant_drop(alpha))
        return lines

    def improved(self, alpha: float) -> bool:
        """B is better than A beyond the noise at ``alpha`` (``regressions``' mirror: pass/fail gained significantly,
        or a gate rose with its interval wholly above 0 and Wilcoxon's p below alpha), so a view can say so rather than
        only "not significantly worse"."""
        return self.pass_fail.significant_gain(alpha) or any(
            f.role == "gate" and f.difference.significant_rise(alpha) for f in self.figures)

    def to_json(self, alpha: float | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {
            "paired": self.paired, "only_a": self.only_a, "only_b": self.only_b,
            "pass_fail": self.pass_fail.to_json(), "figures": [f.to_json() for f in self.figures],
            "pass_rate": self.rates.to_json() if self.rates else None,
            "detectable": [d.to_json() for d in self.detectable], "status_changed": self.status_changed,
            "confidence": CONFIDENCE}
        if alpha is not None:
            data["alpha"] = alpha
            data["significant_regressions"] = self.regressions(alpha)
        return data


def pvalue_text(p: float) -> str:
    """A p-value as people read it: 3 significant digits, ``< 0.0001`` below that."""
    return "< 0.0001" if p < 1e-4 else f"{p:.3g}"


def paired_stats(items_a: list[ItemResult], items_b: list[ItemResult], detect: float | None = None
                 ) -> PairedStats | None:
    """The statistics of B against A; ``None`` when the runs share no conversation."""
    tally = PairedTally()
    for item_a, item_b in pair_by_identity(items_a, items_b):
        tally.add(item_a, item_b)
    return tally.stats(detect)


class PairedTally:
    """``paired_stats`` folded one pair at a time (``diff`` and ``compare`` stream two runs of 100,000
    conversations, docs/history.md#big-runs): counts, and per gate and scorer the paired arrays of floats the
    bootstrap needs; pairs must come in A's order, as ``pair_by_identity`` gives them."""

    def __init__(self) -> None:
        self.only_a = self.only_b = self.both = self.passed_a = self.passed_b = 0
        self.b = self.c = self.status_changed = 0
        self.values: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
        self.rates: tuple[list[float], list[float]] = ([], [])
        self.repeats: set[int] = set()

    def add(self, item_a: ItemResult | None, item_b: ItemResult | None) -> None:
        """One pair of ``pair_by_identity``; a conversation whose content changed counts as one only A and one
        only B have (``pair_conversations``)."""
        if item_a is not None and item_b is not None and changed(item_a, item_b):
            self.only_a, self.only_b = self.only_a + 1, self.only_b + 1
        elif item_b is None:
            self.only_a += item_a is not None
        elif item_a is None:
            self.only_b += 1
        else:
            self._both(item_a, item_b)

    def _both(self, a: ItemResult, b: ItemResult) -> None:
        self.both += 1
        self.passed_a, self.passed_b = self.passed_a + a.passed, self.passed_b + b.passed
        self.b += a.passed and not b.passed
        self.c += b.passed and not a.passed
        self.status_changed += a.status != b.status
        va, vb = _values(a), _values(b)
        for key in (*va, *(k for k in vb if k not in va)):
            found = self.values.setdefault(key, ([], []))
            if key in va and key in vb:
                found[0].append(va[key])
                found[1].append(vb[key])
        if a.repeats > 1 and b.repeats > 1:
            self.rates[0].append(a.pass_rate)
            self.rates[1].append(b.pass_rate)
            self.repeats.update((a.repeats, b.repeats))

    def stats(self, detect: float | None = None) -> PairedStats | None:
        if not self.both:
            return None
        pass_fail = PassFail(self.both, self.passed_a, self.passed_b, self.b, self.c, mcnemar_p(self.b, self.c))
        stats = PairedStats(self.both, self.only_a, self.only_b, pass_fail, self._figures(), self._rates(),
                            status_changed=self.status_changed)
        stats.detectable.append(_detectable("pass/fail", self.both, (self.b + self.c) / self.both, 1.0, detect))
        if stats.rates is not None:
            diffs = differences(*self.rates)
            stats.detectable.append(_detectable("pass rate", len(self.rates[0]), spread(diffs),
                                                1 / math.lcm(*self.repeats), detect))
        return stats

    def _figures(self) -> list[Figure]:
        keys = sorted(self.values, key=lambda k: k[0] != "gate")  # gates first, each group in the order first seen
        figures = []
        for key in keys:
            a_scores, b_scores = self.values[key]
            difference = paired_difference(a_scores, b_scores)
            if difference is not None:
                figures.append(Figure(key[0], key[1], math.fsum(a_scores) / len(a_scores),
                                      math.fsum(b_scores) / len(b_scores), difference))
        return figures

    def _rates(self) -> Figure | None:
        """Each conversation's pass rate over its plays, when both runs played it more than once."""
        a_rates, b_rates = self.rates
        difference = paired_difference(a_rates, b_rates)
        if difference is None:
            return None
        return Figure("pass rate", "every gate, per play", math.fsum(a_rates) / len(a_rates),
                      math.fsum(b_rates) / len(b_rates), difference)


def _detectable(measure: str, n: int, share: float, step: float, detect: float | None) -> Detectable:
    change, needed_for_any = smallest_detectable(n, share, step)
    needed = conversations_needed(detect, share, step) if detect is not None else None
    return Detectable(measure, n, change, needed_for_any, share, step, detect, needed)


def _values(item: ItemResult) -> dict[tuple[str, str], float]:
    """A conversation's scorable gate and scorer scores, per turn as ``turn N: id`` (none when it errored)."""
    if item.status != "ok":
        return {}
    found: dict[tuple[str, str], float] = {}

    def add(role: str, prefix: str, outcomes: dict[str, Outcome]) -> None:
        for key, outcome in outcomes.items():
            score = outcome.score
            if score is not None and not outcome.not_scorable and math.isfinite(score):
                found[(role, prefix + key)] = score

    add("gate", "", item.gate_scores)
    for turn in item.turns:
        add("gate", f"turn {turn.index}: ", turn.gate_scores)
    add("scorer", "", item.scores)
    for turn in item.turns:
        add("scorer", f"turn {turn.index}: ", turn.scores)
    return found
