"""Two stored runs compared (``evalcli diff``, the HTML report's baseline): is the second worse than the first?"""

from __future__ import annotations

import math
from dataclasses import field, replace

from ..errors import ExitCode, UsageError
from ..identity import changed, identity_of
from ..records import record
from ..results import ItemResult, RunResult, Summary, fmt
from ..thresholds import same, within
from .history import load_run
from .paired import PairedStats, PairedTally, check_alpha, check_detect, conversation_name, distinct_names
from .side_by_side import conversation_keys, read_rows
from .store import Store

VERDICT_RANK = {None: 0, "passed": 0, "scored": 1, "failed": 2}


@record(frozen=True)
class Change:
    """One figure in run A and run B; ``regressed`` when B is lower than A by more than the tolerance."""

    id: str
    a: float | None
    b: float | None
    regressed: bool

    @property
    def delta(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a

    @property
    def moved(self) -> bool:
        """A or B differ by more than floating point's noise (``evalcli.thresholds.same``)."""
        return not same(self.a, self.b)


@record
class ItemChange:
    """One conversation matched by identity across the two runs (``evalcli.identity``)."""

    id: str
    """Its item id in run B (in run A when B lacks it): what that run's own views call it."""
    passed_a: bool | None
    passed_b: bool | None
    scores: list[Change]
    changed: bool = False
    """The item names itself (``id``) in both runs, but its content differs: another conversation under one id,
    listed apart and never counted as regressed or fixed."""
    name: str = ""
    """How views of both runs name it (``conversation_name``: its id, else its content; never its position)."""
    status_a: str | None = None
    """Its status in run A (``ok``, ``error``, ``limited``), ``None`` when A lacks it; likewise ``status_b``."""
    status_b: str | None = None

    @property
    def newly_failing(self) -> bool:
        return not self.changed and self.passed_a is True and self.passed_b is False


@record
class RunDiff:
    """Run B against run A: scorer averages, gate scores, verdicts and per-item scores."""

    a: RunResult
    b: RunResult
    tolerance: float
    scorers: list[Change]
    gates: list[Change]
    items: list[ItemChange]
    regressions: list[str] = field(default_factory=list)
    """Why B is worse than A, one line each (empty when it is not)."""
    stats: PairedStats | None = None
    """The paired statistics (docs/history.md), when asked for and the runs share a conversation."""
    alpha: float | None = None
    """With ``--alpha``: only a significant regression (``significant``) sets the exit code."""

    @property
    def significant(self) -> list[str]:
        """With ``alpha``: why B is worse than A beyond the noise (empty when it is not, or without ``alpha``)."""
        if self.alpha is None or self.stats is None:
            return []
        return self.stats.regressions(self.alpha)

    @property
    def judged_by_significance(self) -> bool:
        """Whether ``--alpha`` decides the exit code (it does once the runs share a conversation)."""
        return self.alpha is not None and self.stats is not None
    datasets_differ: bool = False
    """The two runs were of different dataset contents (their stored dataset hashes differ)."""

    @property
    def exit_code(self) -> ExitCode:
        """1 when B is worse than A: with ``--alpha`` only beyond the noise, else by any regression."""
        if self.judged_by_significance:
            return ExitCode.FAILED if self.significant else ExitCode.OK
        return ExitCode.FAILED if self.regressions else ExitCode.OK


def _changes(a: dict[str, float], b: dict[str, float], tolerance: float) -> list[Change]:
    ids = [*a, *(k for k in b if k not in a)]
    return [Change(k, a.get(k), b.get(k), _dropped(a.get(k), b.get(k), tolerance)) for k in ids]


def _dropped(a: float | None, b: float | None, tolerance: float) -> bool:
    """B fell below A by more than ``tolerance``: B does not reach ``A - tolerance`` by the one threshold rule
    (``evalcli.thresholds.within``, docs/scorers.md#thresholds-compare-with-a-tolerance), so exactly the tolerance,
    or 1 - 1e-10 against 1.0, is no regression."""
    if a is None or b is None or math.isnan(a):
        return False
    return math.isnan(b) or (b < a and not within(b, a - tolerance))


def _gate_scores(summary: Summary) -> dict[str, float]:
    scores = {g.id: g.score for g in summary.gate_results}
    for turn in summary.turn_results:
        scores.update({f"turn {turn.index}: {g.id}": g.score for g in turn.gate_results})
    return scores


def item_change(item_a: ItemResult | None, item_b: ItemResult | None, tolerance: float, name: str) -> ItemChange:
    """One conversation of ``pair_by_identity`` in run A and run B."""
    edited = item_a is not None and item_b is not None and changed(item_a, item_b)
    scores_a = {k: o.score for k, o in (item_a.scores if item_a else {}).items() if o.score is not None}
    scores_b = {k: o.score for k, o in (item_b.scores if item_b else {}).items() if o.score is not None}
    shown = item_b if item_b is not None else item_a
    assert shown is not None
    scores = _changes(scores_a, scores_b, tolerance)
    if edited:  # another conversation under one id: its scores are not a regression
        scores = [replace(score, regressed=False) for score in scores]
    return ItemChange(shown.id, item_a.passed if item_a else None, item_b.passed if item_b else None, scores, edited,
                      name, item_a.status if item_a else None, item_b.status if item_b else None)


def pairing_rows(store: Store, run_a: str, run_b: str) -> list[list[int | None]]:
    """The item indexes of ``pair_by_identity``'s pairs of two stored runs, read in SQL (docs/history.md#big-runs):
    every conversation of A in A's order with B's of one identity, then those only B has, in B's order."""
    keys_a, keys_b = conversation_keys(store.conn, run_a), conversation_keys(store.conn, run_b)
    in_b = dict(keys_b)
    rows: list[list[int | None]] = [[index, in_b.get(key)] for key, index in keys_a]
    matched = {key for key, _ in keys_a}
    rows.extend([None, index] for key, index in keys_b if key not in matched)
    return rows


def _stream_items(store: Store, a: str, b: str, tolerance: float, tally: PairedTally) -> list[ItemChange]:
    """Each conversation's change, the two runs read a few hundred conversations at a time and folded into
    ``tally`` (the paired statistics) as they pass."""
    changes, keys, first_names = [], [], {}
    for item_a, item_b in read_rows(store.conn, [a, b], pairing_rows(store, a, b)):
        for item in (item_a, item_b):
            if item is not None and identity_of(item) not in first_names:
                first_names[identity_of(item)] = conversation_name(item)
        shown = item_b if item_b is not None else item_a
        assert shown is not None
        keys.append(identity_of(shown))
        changes.append(item_change(item_a, item_b, tolerance, ""))
        tally.add(item_a, item_b)
    names = distinct_names(first_names)
    for key, change in zip(keys, changes, strict=True):
        change.name = names[key]
    return changes


def diff_runs(store: Store, run_a: str, run_b: str, tolerance: float = 0.0, *,
              allow_different: bool = False, statistics: bool = False, alpha: float | None = None,
              detect: float | None = None) -> RunDiff:
    """Compare run B with run A; ``regressions`` says why B is worse beyond ``tolerance`` (empty if not).

    Runs of different datasets are refused unless ``allow_different``. Conversations are paired by identity
    (``evalcli.identity``); one whose explicit id now names other content is *changed*, never regressed. A
    conversation of A that B lacks (an item without an id that was edited is another conversation) is a
    regression. With ``statistics`` (implied by ``alpha``
    and ``detect``) the paired statistics of docs/history.md are computed; with ``alpha`` they decide the exit code.
    """
    if not (tolerance >= 0 and math.isfinite(tolerance)):
        raise UsageError(f"--tolerance {tolerance} must be a finite number >= 0", "write e.g. --tolerance 0.05")
    check_alpha(alpha)
    check_detect(detect)
    a, b = load_run(store, run_a), load_run(store, run_b)
    if a.result.dataset_name != b.result.dataset_name and not allow_different:
        raise UsageError(f"run {a.result.run_id} is of {a.result.dataset_path} but run {b.result.run_id} is of "
                         f"{b.result.dataset_path}: they are not runs of one dataset",
                         "compare runs of the same dataset, or pass --allow-different")
    tally = PairedTally()
    diff = RunDiff(a.result, b.result, tolerance,
                   _changes(a.result.summary.scores, b.result.summary.scores, tolerance),
                   _changes(_gate_scores(a.result.summary), _gate_scores(b.result.summary), tolerance),
                   _stream_items(store, a.result.run_id, b.result.run_id, tolerance, tally), alpha=alpha,
                   datasets_differ=bool(a.row.get("dataset_hash") and b.row.get("dataset_hash")
                                        and a.row["dataset_hash"] != b.row["dataset_hash"]))
    if statistics or alpha is not None or detect is not None:
        diff.stats = tally.stats(detect)
    for change in diff.scorers:
        if change.regressed:
            diff.regressions.append(f"scorer {change.id}: average {fmt(change.a)} -> {fmt(change.b)}")
    for change in diff.gates:
        if change.regressed:
            diff.regressions.append(f"gate {change.id}: score {fmt(change.a)} -> {fmt(change.b)}")
    if VERDICT_RANK[b.result.verdict] > VERDICT_RANK[a.result.verdict]:
        diff.regressions.append(f"verdict: {a.result.verdict or 'none'} -> {b.result.verdict}")
    diff.regressions.extend(f"item {item.name}: passed in A, fails in B" for item in diff.items if item.newly_failing)
    diff.regressions.extend(f"item {item.name}: in A, missing from B" for item in diff.items
                            if item.passed_a is not None and item.passed_b is None)
    return diff
