"""The statistics of docs/history.md against cases worked on paper (the arithmetic is in each comment), and the one
rule of the detectable change as a property: the conversations needed for a change detect exactly it."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalcli.store.stats import (
    bootstrap_interval,
    conversations_needed,
    detectable_change,
    mcnemar_p,
    paired_difference,
    smallest_detectable,
    spread,
    wilcoxon_p,
)
from tests.conftest import REPO


def test_mcnemar_exact_p_by_hand() -> None:
    # b = 5 passed in A and fail in B, c = 1 the other way: n = 6 discordant, min = 1.
    # P(X <= 1 | 6, 1/2) = (C(6,0) + C(6,1)) / 2**6 = 7/64; two-sided = 14/64 = 0.21875.
    assert mcnemar_p(5, 1) == pytest.approx(14 / 64)
    assert mcnemar_p(1, 5) == pytest.approx(14 / 64)  # symmetric
    # six one way, none back: 2 * (1/2)**6 = 2/64 = 0.03125, the fewest that reach p < 0.05 ...
    assert mcnemar_p(6, 0) == pytest.approx(2 / 64)
    # ... five give 2/32 = 0.0625
    assert mcnemar_p(5, 0) == pytest.approx(2 / 32)
    # equal counts: P(X <= 2 | 4) = 11/16, doubled above 1, so 1
    assert mcnemar_p(2, 2) == 1.0
    assert mcnemar_p(0, 0) == 1.0  # nothing changed: 1 by definition


def test_wilcoxon_exact_without_ties_by_hand() -> None:
    # d = 1..5, all positive: W- = 0. Of the 2**5 = 32 equally likely sign patterns, only one has W- <= 0;
    # two-sided p = 2 * 1/32 = 0.0625.
    assert wilcoxon_p([1, 2, 3, 4, 5]) == pytest.approx(2 / 32)
    # d = 1, -2, 3, 4, 5: W- = 2. Subsets of ranks {1..5} summing to <= 2: {}, {1}, {2} = 3 of 32;
    # two-sided p = 6/32 = 0.1875.
    assert wilcoxon_p([1, -2, 3, 4, 5]) == pytest.approx(6 / 32)
    # a zero difference is dropped (scipy's default), so adding one changes nothing
    assert wilcoxon_p([1, 2, 3, 4, 5, 0]) == pytest.approx(2 / 32)


def test_wilcoxon_on_pass_fail_scores_is_a_sign_count_by_hand() -> None:
    # gate scores 0/1: differences four +1, one -1, two 0. Ties, and 7 <= 13 values, so scipy's default is the
    # exact sign-flip permutation over the 5 non-zero differences (every rank 3): R+ = 3 * (number positive).
    # Observed 4 positive; as extreme: 0, 1, 4 or 5 positive = (1 + 5 + 5 + 1) / 32 = 12/32 = 0.375.
    assert wilcoxon_p([1, 1, 1, 1, -1, 0, 0]) == pytest.approx(12 / 32)
    # 20 values (more than 13) with ties: the normal approximation. Eight +1, two -1, ten 0: n = 10 ranked,
    # every rank 5.5, R- = 11; mean n(n+1)/4 = 27.5; variance n(n+1)(2n+1)/24 - (10**3 - 10)/48
    # = 96.25 - 20.625 = 75.625; z = (11 - 27.5) / sqrt(75.625) = -1.8974 (the sign test's (2 - 5)/sqrt(10/4));
    # p = 2 * Phi(-1.8974) = erfc(1.8974 / sqrt 2) = 0.0578.
    z = (11 - 27.5) / math.sqrt(75.625)
    assert wilcoxon_p([1] * 8 + [-1] * 2 + [0] * 10) == pytest.approx(math.erfc(-z / math.sqrt(2)), rel=1e-9)
    assert wilcoxon_p([0, 0, 0]) == 1.0  # nothing to rank


def test_bootstrap_interval_by_hand() -> None:
    # d = -1, -1, -1, 0 (n = 4). A resample's mean is -1 + (zeros drawn)/4, zeros ~ Binomial(4, 1/4):
    # P(mean = -1) = (3/4)**4 = 81/256 = 31.6% > 2.5%, so the 2.5th percentile is -1;
    # P(mean = 0) = 1/256 = 0.4% < 2.5% but P(mean >= -0.25) = (12 + 1)/256 = 5.1% > 2.5%, so the 97.5th is -0.25.
    assert bootstrap_interval([-1, -1, -1, 0]) == pytest.approx((-1.0, -0.25))
    # d = 0, 1: means 0, 0.5, 1 with 1/4, 1/2, 1/4; both tails (25% each) reach the ends: [0, 1]
    assert bootstrap_interval([0, 1]) == pytest.approx((0.0, 1.0))
    # equal differences (or a single pair) only resample to themselves
    assert bootstrap_interval([0.5, 0.5, 0.5]) == (0.5, 0.5)
    assert bootstrap_interval([-1.0]) == (-1.0, -1.0)


def test_paired_difference_is_b_minus_a() -> None:
    # A = 1, 1, 1, 0.5; B = 0, 0, 0, 0.5: differences -1, -1, -1, 0, mean -0.75, interval as above,
    # Wilcoxon on three -1 and a zero: 3 <= 13 values... 4 with ties: exact sign flips of 3: 2/8 = 0.25
    found = paired_difference([1, 1, 1, 0.5], [0, 0, 0, 0.5])
    assert found is not None
    assert (found.n, found.mean, found.changed) == (4, -0.75, 3)
    assert (found.low, found.high) == pytest.approx((-1.0, -0.25))
    assert found.p == pytest.approx(2 / 8)
    assert found.below_zero
    assert paired_difference([], []) is None
    # 1/3 - 2/3 and 2/3 - 1 are the same change of a pass rate: they tie (one distinct value, no scipy needed)
    same = paired_difference([2 / 3, 1.0], [1 / 3, 2 / 3])
    assert same is not None and same.low == same.high == pytest.approx(-1 / 3)


def test_detectable_change_by_hand() -> None:
    # 100 paired conversations, 10 + 5 changed: spread = 15/100 = 0.15. z(0.975) + z(0.8) = 1.95996 + 0.84162
    # = 2.80158; 2.80158 * sqrt(0.15 / 100) = 2.80158 * 0.0387298 = 0.1085: 10.9 points.
    assert detectable_change(100, 0.15) == pytest.approx(0.10850, abs=1e-5)
    # to see 5 points: (2.80158 * sqrt(0.15) / 0.05)**2 = (1.08505 / 0.05)**2 = 21.701**2 = 470.9, so 471
    assert conversations_needed(0.05, 0.15) == 471
    # nothing changed at all: still 6 conversations must move one way, so 6/100 = 6 points, and 6/0.05 = 120
    assert detectable_change(100, 0.0) == pytest.approx(0.06)
    assert conversations_needed(0.05, 0.0) == 120
    # pass rates of 3 plays move in steps of 1/3: six conversations a third each over 100 is 0.02
    assert detectable_change(100, 0.0, step=1 / 3) == pytest.approx(0.02)
    assert detectable_change(0, 0.15) is None
    assert spread([1, -1, 0, 0]) == 0.5


@given(change=st.floats(0.001, 1.0), share=st.floats(0.0, 1.0), step=st.sampled_from([1.0, 0.5, 1 / 3, 0.25]))
def test_conversations_needed_is_the_fewest_that_detect_the_change(change: float, share: float, step: float) -> None:
    n = conversations_needed(change, share, step)
    found = detectable_change(n, share, step)
    assert found is not None and found <= change
    fewer = detectable_change(n - 1, share, step)
    assert n == 1 or (fewer is not None and fewer > change)


def test_statistics_load_scipy_only_when_they_compute() -> None:
    code = ("import sys; from evalcli.store import stats; import evalcli.cli.commands, evalcli.store, evalcli.reports;"
            "assert stats.mcnemar_p(0, 0) == 1 and stats.paired_difference([1, 0], [1, 0]).p == 1;"
            "assert 'scipy' not in sys.modules, 'imported early'; stats.mcnemar_p(3, 1);"
            "assert 'scipy.stats' in sys.modules")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr


@given(plays=st.integers(2, 20), data=st.data())
def test_stability_is_decided_by_the_plays_that_passed(plays: int, data: st.DataObject) -> None:
    from evalcli.results import STABILITIES, stability_counts, stability_of

    passed = data.draw(st.integers(0, plays))
    found = stability_of(passed, plays)
    assert found == ("stable-pass" if passed == plays else "stable-fail" if passed == 0 else "flaky")
    assert stability_of(passed, 1) is None and stability_of(None, plays) is None
    counts = stability_counts([found, None])
    assert sum(counts.values()) == 1 and list(counts) == list(STABILITIES)


@given(n=st.integers(1, 3000), share=st.floats(0.0, 1.0), step=st.sampled_from([1.0, 0.5, 1 / 3, 0.25]))
def test_the_printed_detectable_change_is_never_above_100_points(n: int, share: float, step: float) -> None:
    change, needed = smallest_detectable(n, share, step)
    at_needed = detectable_change(needed, share, step)
    assert at_needed is not None and at_needed <= 1.0  # `needed` conversations see a change of 100 points ...
    if change is None:  # ... and fewer see none, which is what is printed instead of a figure above 100 points
        assert n < needed and (detectable_change(n, share, step) or 0) > 1.0
    else:
        assert 0 < change <= 1.0 and n >= needed and change == detectable_change(n, share, step)


def test_too_few_conversations_detect_nothing_by_hand() -> None:
    # one, two, three conversations: 6/n is 600, 300 and 200 points, more than a pass rate can change
    assert [smallest_detectable(n, 1.0)[0] for n in (1, 2, 3)] == [None, None, None]
    # all moving (spread 1): 2.80158 * sqrt(1/7) = 1.059 > 1, sqrt(1/8) gives 0.990: eight are needed
    assert smallest_detectable(7, 1.0) == (None, 8)
    assert smallest_detectable(8, 1.0)[0] == pytest.approx(0.9905, abs=1e-4)


@given(diffs=st.lists(st.sampled_from([-1.0, -0.5, 0.0, 0.5]), min_size=1, max_size=12),
       alpha=st.sampled_from([0.01, 0.05, 0.1, 0.3]))
def test_an_interval_below_zero_is_a_significant_drop_only_with_wilcoxons_p(diffs: list[float], alpha: float) -> None:
    found = paired_difference([1.0] * len(diffs), [1.0 + d for d in diffs])
    assert found is not None
    assert found.significant_drop(alpha) is (found.high < 0 and found.p < alpha)
    if len(diffs) <= 5:  # two-sided exact p is at least 2 * (1/2)**5 = 0.0625 on five pairs
        assert not found.significant_drop(0.05)


def test_many_pairs_of_few_differences_resample_as_counts_with_scipys_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    """From 10,000 pairs with few distinct differences, a resample is the counts of each value: the same distribution
    as scipy.stats.bootstrap's draw of the pairs, so the same interval but for the resampling's own noise."""
    import random

    from evalcli.store import stats

    draw = random.Random(7)
    diffs = [draw.choice([-1.0, 0.0, 0.0, 0.0, 0.5, 1.0]) for _ in range(12_000)]
    counted = bootstrap_interval(diffs)
    monkeypatch.setattr(stats, "COUNTED_FROM", 10**9)
    drawn = bootstrap_interval(diffs)
    assert counted != drawn  # the other way was taken
    assert counted == pytest.approx(drawn, abs=0.002)
    assert counted[0] < sum(diffs) / len(diffs) < counted[1]
