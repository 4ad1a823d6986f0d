"""What the HTML report reads from the database besides the run's conversations.

The run's own row (git commit, start and end, LLM totals) and plan (its gates and scorers), the
means of each registered scorer over the earlier runs of the same dataset (from ``scores`` joined
with ``runs`` on the dataset's stable name), and, with a baseline, ``diff_runs`` against it turned
into one change per conversation. The renderer gets these as values and never queries anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..aggregate import Plan
from ..diff import ItemChange, RunDiff, diff_runs
from ..report import fmt
from ..store import Store

HISTORY_RUNS = 30
"""How many runs of the dataset (the reported one and those before it) the history chart shows."""


@dataclass(frozen=True)
class RunPoint:
    """One run of the dataset with its registered scorers' means."""

    run_id: str
    started_at: str
    means: dict[str, float]


@dataclass(frozen=True)
class ConversationChange:
    """One conversation against the baseline: ``regressed``, ``improved``, ``new``, ``missing`` or ``unchanged``."""

    kind: str
    details: list[str]


@dataclass
class Baseline:
    """``diff_runs(baseline, this run)`` and its verdict per conversation (by item id)."""

    diff: RunDiff
    changes: dict[str, ConversationChange] = field(default_factory=dict)

    @property
    def missing(self) -> list[str]:
        """Conversations of the baseline that this run lacks (they have no row of their own)."""
        return [item_id for item_id, change in self.changes.items() if change.kind == "missing"]

    def count(self, kind: str) -> int:
        return sum(1 for change in self.changes.values() if change.kind == kind)


@dataclass
class ReportSources:
    """Everything the report needs that is not a conversation."""

    row: dict[str, Any]
    plan: Plan
    history: list[RunPoint]
    baseline: Baseline | None = None


def score_history(store: Store, dataset: str, run_id: str, limit: int = HISTORY_RUNS) -> list[RunPoint]:
    """Each registered scorer's mean per run, over the last ``limit`` runs of ``dataset`` up to ``run_id``
    (oldest first). Per-turn rows are kept apart as ``id (per turn)``, gates as ``gate id``."""
    runs = list(store.db.query("SELECT id, started_at FROM runs WHERE dataset = ? AND id <= ? ORDER BY id DESC "
                               "LIMIT ?", [dataset, run_id, limit]))
    runs.reverse()
    if not runs:
        return []
    marks = ", ".join("?" for _ in runs)
    means: dict[str, dict[str, float]] = {r["id"]: {} for r in runs}
    query = (f"SELECT run_id, scorer_id, role, turn_index IS NOT NULL AS per_turn, AVG(score) AS mean FROM scores "
             f"WHERE run_id IN ({marks}) AND score IS NOT NULL GROUP BY run_id, scorer_id, role, per_turn "
             "ORDER BY run_id, role DESC, per_turn, scorer_id")
    for row in store.db.query(query, [r["id"] for r in runs]):
        label = ("gate " if row["role"] == "gate" else "") + row["scorer_id"] + (" (per turn)" if row["per_turn"] else "")
        means[row["run_id"]][label] = float(row["mean"])
    return [RunPoint(r["id"], r["started_at"] or "", means[r["id"]]) for r in runs]


def conversation_change(change: ItemChange, tolerance: float) -> ConversationChange:
    """How one conversation moved: a newly failing one or a score dropped beyond the tolerance is a
    regression (as in ``diff``); one that now passes or gained beyond it an improvement."""
    if change.passed_a is None:
        return ConversationChange("new", ["not in the baseline"])
    if change.passed_b is None:
        return ConversationChange("missing", ["in the baseline, missing from this run"])
    details = []
    if change.passed_a != change.passed_b:
        details.append(f"{_passed(change.passed_a)} -> {_passed(change.passed_b)}")
    gained = False
    for score in change.scores:
        if score.a != score.b and not (_nan(score.a) and _nan(score.b)):
            details.append(f"{score.id}: {fmt(score.a)} -> {fmt(score.b)}")
        gained = gained or (score.delta is not None and score.delta > tolerance + 1e-12)
    if change.newly_failing or any(score.regressed for score in change.scores):
        return ConversationChange("regressed", details)
    if (change.passed_a is False and change.passed_b is True) or gained:
        return ConversationChange("improved", details)
    return ConversationChange("unchanged", details)


def _passed(value: bool | None) -> str:
    return "passed" if value else "FAILED"


def _nan(value: float | None) -> bool:
    return value is not None and math.isnan(value)


def baseline(store: Store, baseline_run: str, run_id: str, tolerance: float = 0.0, *,
             allow_different: bool = False) -> Baseline:
    """This run against ``baseline_run`` as ``evalcli diff BASELINE RUN`` sees it, per conversation too."""
    diff = diff_runs(store, baseline_run, run_id, tolerance, allow_different=allow_different)
    return Baseline(diff, {change.id: conversation_change(change, tolerance) for change in diff.items})


def report_sources(store: Store, run_id: str, baseline_run: str | None = None, tolerance: float = 0.0, *,
                   allow_different: bool = False) -> ReportSources:
    """The run's row, plan and scorer history, and the baseline comparison when one is named."""
    row = store.require_run(run_id)
    return ReportSources(row, store.plan(row["id"]), score_history(store, row["dataset"], row["id"]),
                         baseline(store, baseline_run, row["id"], tolerance, allow_different=allow_different)
                         if baseline_run else None)
