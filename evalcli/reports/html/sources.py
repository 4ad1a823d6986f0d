"""What the HTML report reads from the database besides the run's conversations.

The run's own row (git commit, start and end, LLM totals) and plan (its gates and scorers), the
means of each registered scorer over the earlier runs of the same dataset (from ``scores`` joined
with ``runs`` on the dataset's stable name), and, with a baseline, ``diff_runs`` against it turned
into one change per conversation. The renderer gets these as values and never queries anything.
"""

from __future__ import annotations

from dataclasses import field, replace
from typing import Any

from ...records import record
from ...results import Plan
from ...store import ItemChange, RunDiff, RunPoint, Store, diff_runs, score_history
from ...thresholds import within
from ..text import fmt


@record(frozen=True)
class ConversationChange:
    """One conversation against the baseline: ``regressed``, ``improved``, ``new``, ``missing`` or ``unchanged``."""

    kind: str
    details: list[str]
    name: str = ""
    """How views of both runs name the conversation (its id, else its content; never its position)."""


@record
class Baseline:
    """``diff_runs(baseline, this run)`` and its verdict per conversation: those of this run by this run's item id
    (its rows), those only the baseline had apart (paired by identity, so neither hides the other)."""

    diff: RunDiff
    changes: dict[str, ConversationChange] = field(default_factory=dict)
    gone: list[ConversationChange] = field(default_factory=list)
    """Conversations of the baseline that this run lacks (they have no row of their own)."""

    @property
    def missing(self) -> list[str]:
        """The names of the conversations of the baseline that this run lacks."""
        return [change.name for change in self.gone]

    def count(self, kind: str) -> int:
        return sum(1 for change in [*self.changes.values(), *self.gone] if change.kind == kind)


@record
class ReportSources:
    """Everything the report needs that is not a conversation."""

    row: dict[str, Any]
    plan: Plan
    history: list[RunPoint]
    baseline: Baseline | None = None
    registered: frozenset[str] | None = None
    """The ids of the run's registered gates and scorers (those with rows in ``scores``); ``None``: not read."""


def conversation_change(change: ItemChange, tolerance: float) -> ConversationChange:
    """How one conversation moved: a newly failing one or a score dropped beyond the tolerance is a
    regression (as in ``diff``); one that now passes or gained beyond it an improvement."""
    if change.passed_a is None:
        return ConversationChange("new", ["not in the baseline"])
    if change.passed_b is None:
        return ConversationChange("missing", ["in the baseline, missing from this run"])
    if change.changed:
        return ConversationChange("changed", ["the same id, other content: neither regressed nor fixed"])
    details = []
    if change.passed_a != change.passed_b:
        details.append(f"{_passed(change.passed_a)} -> {_passed(change.passed_b)}")
    gained = False
    for score in change.scores:
        if score.moved:  # by more than float noise (``evalcli.thresholds.same``)
            details.append(f"{score.id}: {fmt(score.a)} -> {fmt(score.b)}")
        # gained beyond the tolerance: A does not reach B - tolerance by the one threshold rule, as ``diff`` drops
        gained = gained or (score.a is not None and score.b is not None and score.b > score.a
                            and not within(score.a, score.b - tolerance))
    if change.newly_failing or any(score.regressed for score in change.scores):
        return ConversationChange("regressed", details)
    if (change.passed_a is False and change.passed_b is True) or gained:
        return ConversationChange("improved", details)
    return ConversationChange("unchanged", details)


def _passed(value: bool | None) -> str:
    return "passed" if value else "FAILED"


def baseline(store: Store, baseline_run: str, run_id: str, tolerance: float = 0.0, *,
             allow_different: bool = False) -> Baseline:
    """This run against ``baseline_run`` as ``evalcli diff BASELINE RUN`` sees it, per conversation too."""
    diff = diff_runs(store, baseline_run, run_id, tolerance, allow_different=allow_different)
    # this run's conversations by its item ids (its rows); one only the baseline had is kept apart, so that it
    # never hides, nor is hidden by, one of this run under the same positional id
    moved = [(change, replace(conversation_change(change, tolerance), name=change.name)) for change in diff.items]
    return Baseline(diff, {change.id: kind for change, kind in moved if change.passed_b is not None},
                    [kind for change, kind in moved if change.passed_b is None])


def report_sources(store: Store, run_id: str, baseline_run: str | None = None, tolerance: float = 0.0, *,
                   allow_different: bool = False) -> ReportSources:
    """The run's row, plan and scorer history, and the baseline comparison when one is named."""
    row = store.require_run(run_id)
    registered = frozenset(r["scorer_id"] for r in store.query("SELECT scorer_id FROM scorers WHERE run_id = ?",
                                                                [row["id"]]))
    return ReportSources(row, store.plan(row["id"]), score_history(store, row["dataset"], row["id"]),
                         baseline(store, baseline_run, row["id"], tolerance, allow_different=allow_different)
                         if baseline_run else None, registered)
