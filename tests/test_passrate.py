"""The one gate rule under repeats and the sequential rule of --repeat auto (docs/verdicts.md#repeats-and-the-pass-rate),
stated as invariants (hypothesis) and checked against scipy's Wilson interval and hand-worked cases."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalcli.passrate import passes_at_rate, settle, wilson

PLAYS = st.integers(min_value=1, max_value=200).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n)))
RATES = st.integers(min_value=1, max_value=100).map(lambda p: p / 100)


@given(PLAYS, RATES)
def test_a_gate_passes_when_at_least_the_pass_rate_of_plays_passed_it(counts: tuple[int, int], rate: float) -> None:
    passed, plays = counts
    assert passes_at_rate(passed, plays, rate) == (Fraction(passed, plays) >= Fraction(str(rate)))
    assert passes_at_rate(passed, plays) == (passed == plays)  # the default: every play
    if passed < plays:
        assert passes_at_rate(passed + 1, plays, rate) or not passes_at_rate(passed, plays, rate)


def test_the_rule_needs_a_play() -> None:
    assert not passes_at_rate(0, 0, 0.5) and passes_at_rate(7, 10, 0.7) and not passes_at_rate(6, 10, 0.7)


@given(PLAYS)
def test_wilson_is_scipys_interval_and_exact_at_the_edges(counts: tuple[int, int]) -> None:
    from scipy.stats import binomtest

    passed, plays = counts
    low, high = wilson(passed, plays)
    assert 0 <= low <= passed / plays <= high <= 1
    reference = binomtest(passed, plays).proportion_ci(method="wilson")  # z = 1.95996...; ours is 1.96
    assert low == pytest.approx(float(reference.low), abs=2e-4) and high == pytest.approx(float(reference.high), abs=2e-4)
    assert (high == 1.0) == (passed == plays) and (low == 0.0) == (passed == 0)


@pytest.mark.parametrize(("passed", "plays", "low", "high"), [
    (1, 1, 0.2065433, 1.0), (4, 4, 0.5101000, 1.0), (0, 4, 0.0, 0.4899000), (3, 4, 0.3006361, 0.9544139),
    (5, 10, 0.2365896, 0.7634104)])
def test_wilson_hand_worked(passed: int, plays: int, low: float, high: float) -> None:
    assert wilson(passed, plays) == pytest.approx((low, high), abs=1e-7)


@given(PLAYS, RATES, st.integers(min_value=2, max_value=200))
def test_a_settled_conversation_agrees_with_the_gate_rule(counts: tuple[int, int], rate: float, most: int) -> None:
    passed, plays = counts
    decided = settle(passed, plays, rate, most)
    if decided == "stable-pass":
        assert passes_at_rate(passed, plays, rate)
    if decided == "stable-fail":
        assert not passes_at_rate(passed, plays, rate)
    if decided == "flaky":
        assert plays >= most and 0 < passed < plays
    if decided is None:
        assert plays < most
    low, high = wilson(passed, plays)
    assert (decided == "stable-pass") == (low > rate or (plays >= most and passed == plays and not high < rate))


@given(st.integers(min_value=1, max_value=200), st.integers(min_value=2, max_value=200))
def test_at_the_default_pass_rate_only_a_failure_or_max_settles(plays: int, most: int) -> None:
    assert settle(plays, plays, 1.0, most) == (None if plays < most else "stable-pass")  # never early
    for passed in range(plays):
        assert settle(passed, plays, 1.0, most) == "stable-fail"  # settled by its first failure


def test_a_lower_pass_rate_lets_stable_conversations_stop_early() -> None:
    assert [settle(n, n, 0.5) for n in range(1, 5)] == [None, None, None, "stable-pass"]
    assert [settle(0, n, 0.5) for n in range(1, 5)] == [None, None, None, "stable-fail"]
    assert settle(5, 10, 0.5) == "flaky" and settle(5, 9, 0.5) is None
    assert settle(7, 8, 0.5) == "stable-pass"  # lower end 0.5293 > 0.5: one failure allowed
