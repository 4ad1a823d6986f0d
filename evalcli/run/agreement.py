"""How far a scorer agrees with a person (docs/recorded.md): the arithmetic of ``evalcli calibrate``, pure and exact.

A label is what a person decided a scorer should give a conversation, from 0 to 1 (``pass`` is 1, ``fail`` 0).
A scorer's labels are *binary* when every one is 0 or 1: a score then agrees when it is on the same side of
0.5 as its label (0.5 counts as a pass), and the scorer gets Cohen's kappa and a confusion matrix. Otherwise
its labels are a *scale*: a score agrees when it is within 0.1 of its label, and the scorer gets the mean
absolute error. Fleiss' kappa measures how far the raters of a panel (or the samples of a repeated judge)
agree with each other, on the same pass/fail sides. Sums run in dataset order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Any

from ..records import record

PASS_MARK = 0.5
"""A score at or above this is on the pass side."""
SCALE_TOLERANCE = 0.1
"""A score of a scale-labelled scorer agrees when it is this close to its label."""
_EPSILON = 1e-9


def passes(score: float) -> bool:
    """Whether a score (or a label) is on the pass side of 0.5."""
    return score >= PASS_MARK


def binary_labels(labels: Sequence[float]) -> bool:
    """Whether every label is 0 or 1 (a pass/fail judgement), not a point on a scale."""
    return all(label in (0.0, 1.0) for label in labels)


def agrees(label: float, score: float, *, binary: bool) -> bool:
    """Binary labels: the score is on the label's side of 0.5. Scale labels: within 0.1 of it."""
    if binary:
        return passes(score) == passes(label)
    return abs(score - label) <= SCALE_TOLERANCE + _EPSILON


@record(frozen=True)
class Confusion:
    """Labels (rows) against scores (columns), each on its pass/fail side."""

    pass_pass: int = 0
    """Labelled pass, judged pass."""
    pass_fail: int = 0
    """Labelled pass, judged fail."""
    fail_pass: int = 0
    """Labelled fail, judged pass."""
    fail_fail: int = 0
    """Labelled fail, judged fail."""

    @classmethod
    def of(cls, pairs: Sequence[tuple[float, float]]) -> Confusion:
        """The matrix of (label, score) pairs."""
        counts = Counter((passes(label), passes(score)) for label, score in pairs)
        return cls(counts[(True, True)], counts[(True, False)], counts[(False, True)], counts[(False, False)])

    @property
    def total(self) -> int:
        return self.pass_pass + self.pass_fail + self.fail_pass + self.fail_fail

    def to_json(self) -> dict[str, dict[str, int]]:
        return {"label_pass": {"judged_pass": self.pass_pass, "judged_fail": self.pass_fail},
                "label_fail": {"judged_pass": self.fail_pass, "judged_fail": self.fail_fail}}


def cohen_kappa(matrix: Confusion) -> float | None:
    """Cohen's kappa of a 2x2 confusion matrix: (observed - chance agreement) / (1 - chance agreement), where chance
    agreement comes from each side's share of labels and of scores. ``None`` when it is undefined: no pairs, or
    chance agreement is 1 (labels and scores all on one and the same side)."""
    n = matrix.total
    if n == 0:
        return None
    observed = (matrix.pass_pass + matrix.fail_fail) / n
    label_pass, judged_pass = matrix.pass_pass + matrix.pass_fail, matrix.pass_pass + matrix.fail_pass
    chance = (label_pass * judged_pass + (n - label_pass) * (n - judged_pass)) / (n * n)
    if chance >= 1 - _EPSILON:
        return None
    return (observed - chance) / (1 - chance)


def mean_absolute_error(pairs: Sequence[tuple[float, float]]) -> float | None:
    """The mean of |score - label|, summed in order; ``None`` without pairs."""
    if not pairs:
        return None
    total = 0.0
    for label, score in pairs:
        total += abs(score - label)
    return total / len(pairs)


def fleiss_kappa(subjects: Sequence[Sequence[Hashable]]) -> float | None:
    """Fleiss' kappa of raters who each put every subject in a category (each subject: one category per rater,
    the same number of raters for all). ``None`` when undefined: fewer than two raters or no subject, or every
    rating in one category (chance agreement 1)."""
    if not subjects:
        return None
    raters = len(subjects[0])
    if raters < 2 or any(len(s) != raters for s in subjects):
        return None
    per_subject = [Counter(ratings) for ratings in subjects]
    agreement = 0.0
    for counts in per_subject:
        agreement += (sum(c * c for c in counts.values()) - raters) / (raters * (raters - 1))
    observed = agreement / len(subjects)
    totals: Counter[Hashable] = Counter()
    for counts in per_subject:
        totals.update(counts)
    chance = sum((count / (len(subjects) * raters)) ** 2 for count in totals.values())
    if chance >= 1 - _EPSILON:
        return None
    return (observed - chance) / (1 - chance)


def metric_json(value: float | None) -> Any:
    """A metric for JSON: rounded to 6 places, ``None`` when undefined."""
    return None if value is None else round(value, 6)
