"""The arithmetic of comparisons that know the noise (docs/history.md): McNemar's exact test, paired bootstrap
intervals, Wilcoxon's signed-rank test and the smallest detectable change.

The figures are scipy.stats' own. scipy is imported only inside the functions that compute, and only when
there is something to compute: no discordant conversation, differences that are all equal and a Wilcoxon
test with nothing but zeros have answers on paper (p = 1, an interval of one point), so comparing two runs
that did not change never loads scipy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

from ..records import record
from ..thresholds import same

ALPHA = 0.05
"""The significance level the detectable change is worked out for."""
POWER = 0.8
"""The chance of seeing a change of the detectable size."""
CONFIDENCE = 0.95
"""The bootstrap interval's level."""
RESAMPLES = 10_000
SEED = 0
MIN_CHANGED = 6
"""Fewest conversations that must change, all one way, before a two-sided exact test (McNemar's, or
Wilcoxon's on six equal differences) can reach p < 0.05: 2 * (1/2)**6 = 0.031, while 2 * (1/2)**5 = 0.0625."""


def mcnemar_p(b: int, c: int) -> float:
    """McNemar's exact two-sided p for ``b`` conversations that passed in A and fail in B and ``c`` the other
    way: a binomial test of min(b, c) in b + c at 1/2; 1 when no conversation changed."""
    if b < 0 or c < 0:
        raise ValueError("discordant counts are never negative")
    if b + c == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(min(b, c), b + c, 0.5).pvalue)


@record(frozen=True)
class PairedDifference:
    """B - A over paired conversations: the mean, its bootstrap interval and Wilcoxon's p."""

    n: int
    """Paired conversations."""
    mean: float
    low: float
    high: float
    p: float
    changed: int
    """Conversations whose difference is not zero (those Wilcoxon's test ranks)."""

    @property
    def below_zero(self) -> bool:
        """The whole interval lies below 0 (alone, not evidence: see ``significant_drop``)."""
        return self.high < 0

    def significant_drop(self, alpha: float) -> bool:
        """B is lower than A beyond the noise at ``alpha``: the interval lies wholly below 0 *and* Wilcoxon's p is
        below ``alpha``. A bootstrap over a few conversations that all moved alike gives an interval of one point
        (three conversations each -1: [-1, -1]) while Wilcoxon's p is 0.25: that is no evidence
        (docs/history.md#comparisons-that-know-the-noise)."""
        return self.below_zero and self.p < alpha

    def significant_rise(self, alpha: float) -> bool:
        """B is higher than A beyond the noise at ``alpha``: ``significant_drop``'s mirror."""
        return self.low > 0 and self.p < alpha

    def to_json(self) -> dict[str, float | int]:
        return {"n": self.n, "mean": self.mean, "low": self.low, "high": self.high, "p": self.p,
                "changed": self.changed}


def differences(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """B - A per pair, rounded to 12 places so that equal changes (1/3 - 2/3 and 2/3 - 1) tie as they should; a pair
    within the threshold tolerance of each other (``evalcli.thresholds.same``: 1.0 and 1 - 1e-10) did not change, so
    floating point's noise is never a difference Wilcoxon ranks or an interval below 0."""
    if len(a) != len(b):
        raise ValueError("paired samples have one value each per conversation")
    return [0.0 if same(x, y) else round(y - x, 12) + 0.0 for x, y in zip(a, b, strict=True)]


def paired_difference(a: Sequence[float], b: Sequence[float]) -> PairedDifference | None:
    """B - A over the pairs (``a[i]``, ``b[i]``); ``None`` when there is no pair."""
    diffs = differences(a, b)
    if not diffs:
        return None
    low, high = bootstrap_interval(diffs)
    return PairedDifference(len(diffs), math.fsum(diffs) / len(diffs), low, high, wilcoxon_p(diffs),
                            sum(1 for d in diffs if d != 0))


BATCH_CELLS = 2_000_000
"""Values a batch of bootstrap resamples holds at most (16 MB of floats, as many indexes)."""


COUNTED_FROM = 10_000
"""Pairs from which, when their differences take at most ``COUNTED_VALUES`` values, a resample is drawn as how many
pairs of each value it holds (docs/history.md#comparisons-that-know-the-noise)."""
COUNTED_VALUES = 200


def bootstrap_interval(diffs: Sequence[float]) -> tuple[float, float]:
    """The 95% percentile bootstrap interval of the mean difference: 10,000 resamples of the pairs, seed 0.
    Equal differences (one pair included) resample to themselves only: the interval is that one point. From
    ``COUNTED_FROM`` pairs whose differences take few values (a gate's are -1, 0 and 1), each resample is drawn as the
    count of each value among n pairs drawn with replacement (a multinomial draw): the same distribution as drawing
    the n pairs, in time that does not grow with n (10,000 resamples of 100,000 pairs took 12 s of CPU)."""
    distinct = set(diffs)
    if len(distinct) == 1:
        return diffs[0], diffs[0]
    import numpy as np

    if len(diffs) >= COUNTED_FROM and len(distinct) <= COUNTED_VALUES:
        return _counted_interval(np.asarray(diffs, dtype=float))
    from scipy.stats import bootstrap

    # resamples drawn a batch at a time, a batch of at most BATCH_CELLS values (the interval is the same for any batch:
    # one stream of draws); 1,000 resamples of 100,000 pairs at once took 1.6 GB
    batch = max(1, min(1000, BATCH_CELLS // len(diffs)))
    result = bootstrap((np.asarray(diffs, dtype=float),), np.mean, n_resamples=RESAMPLES,
                       confidence_level=CONFIDENCE, method="percentile", rng=SEED, batch=batch)
    interval = result.confidence_interval
    return float(interval.low), float(interval.high)


def _counted_interval(diffs: Any) -> tuple[float, float]:
    """``bootstrap_interval`` of many pairs with few distinct differences: per resample, the counts of each value
    (``Generator.multinomial``), its mean their weighted sum over n; the percentiles as scipy.stats.bootstrap's
    ``percentile`` method takes them."""
    import numpy as np

    values, counts = np.unique(diffs, return_counts=True)
    n = len(diffs)
    means = np.random.default_rng(SEED).multinomial(n, counts / n, size=RESAMPLES) @ values / n
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def wilcoxon_p(diffs: Sequence[float]) -> float:
    """Wilcoxon's signed-rank two-sided p with scipy.stats.wilcoxon's defaults (zero differences dropped);
    1 when every difference is zero (nothing to rank)."""
    if not any(diffs):
        return 1.0
    from scipy.stats import wilcoxon

    return float(wilcoxon(list(diffs)).pvalue)


def _z_sum() -> float:
    normal = NormalDist()
    return normal.inv_cdf(1 - ALPHA / 2) + normal.inv_cdf(POWER)


def detectable_change(n: int, spread: float, step: float = 1.0) -> float | None:
    """The smallest change in mean that ``n`` paired conversations detect at ALPHA with POWER:
    (z(1 - alpha/2) + z(power)) * sqrt(spread / n), the normal approximation of a paired test, where
    ``spread`` is the mean of the squared differences (for pass/fail, the share of conversations that
    changed); never below MIN_CHANGED conversations moving by the smallest ``step`` a difference can take.
    ``None`` without conversations."""
    if n <= 0:
        return None
    return max(_z_sum() * math.sqrt(spread / n), MIN_CHANGED * step / n)


def smallest_detectable(n: int, spread: float, step: float = 1.0) -> tuple[float | None, int]:
    """What ``n`` paired conversations can see, as printed: (the ``detectable_change``, or ``None`` when it is above
    100 points, a change no pass rate can make, so none is detectable; the fewest conversations that detect a change
    of 100 points, below which none is). ``n`` is at least 1
    (docs/history.md#how-many-conversations-to-see-a-5-point-change)."""
    change = detectable_change(n, spread, step)
    if change is None:
        raise ValueError("the detectable change needs at least one conversation")
    return (change if change <= 1.0 else None), conversations_needed(1.0, spread, step)


def conversations_needed(change: float, spread: float, step: float = 1.0) -> int:
    """The fewest paired conversations whose ``detectable_change`` is at most ``change`` (> 0)."""
    if not change > 0:
        raise ValueError("the change to detect must be above 0")
    by_spread = (_z_sum() * math.sqrt(spread) / change) ** 2
    n = max(1, math.ceil(by_spread - 1e-9), math.ceil(MIN_CHANGED * step / change - 1e-9))
    while (found := detectable_change(n, spread, step)) is not None and found > change:
        n += 1  # the rounding above can land one short
    return n


def spread(diffs: Sequence[float]) -> float:
    """The mean squared difference (the variance of the differences were there no change at all)."""
    return math.fsum(d * d for d in diffs) / len(diffs) if diffs else 0.0
