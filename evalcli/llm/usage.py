"""What model calls used (docs/budgets.md): one record per call, collected per conversation, summed overall and per
purpose (target, simulator, judge)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import asdict
from typing import Any

from ..records import record
from .budget import PURPOSES, Budget, purpose_group


@record(frozen=True)
class CallRecord:
    """One model call (or cache hit), as stored in ``llm_calls``."""

    purpose: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost: float
    cache_hit: bool
    duration_ms: float
    turn_index: int | None = None
    """The conversation's turn the call was made for (simulator calls), if any."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


USAGE_FIELDS = ("calls", "cache_hits", "prompt_tokens", "completion_tokens", "cost")


def usage_summary(rows: Iterable[tuple[Any, ...]]) -> dict[str, Any]:
    """The one rule for usage totals: rows of (purpose, calls, cache hits, prompt tokens, completion tokens, cost)
    summed overall and per purpose (``purposes``: target, simulator and judge always, then any other). Costs are
    rounded to 10 decimals, so totals summed in another order (the store's) read the same."""
    def zero() -> dict[str, Any]:
        return {"calls": 0, "cache_hits": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost": 0.0}

    total = zero()
    purposes = {p: zero() for p in PURPOSES}
    for purpose, *figures in rows:
        group = purposes.setdefault(purpose_group(str(purpose)), zero())
        for bucket in (total, group):
            for key, value in zip(USAGE_FIELDS, figures, strict=True):
                bucket[key] += value or 0
    for bucket in (total, *purposes.values()):
        bucket["cost"] = round(float(bucket["cost"]), 10)
    return {**total, "purposes": purposes}


class UsageSink:
    """Collects the ``CallRecord`` of every model call made while it is ``current_usage``."""

    def __init__(self, budget: Budget | None = None) -> None:
        self.records: list[CallRecord] = []
        self.budget = budget
        """The run's budget: every call recorded here counts against it."""
        self.refused: str | None = None
        """Why a call this conversation needed was not started (its budget was spent)."""

    def record(self, rec: CallRecord) -> None:
        self.records.append(rec)
        if self.budget is not None:
            self.budget.add(rec.purpose, rec.prompt_tokens + rec.completion_tokens, rec.cost)

    def refusal(self, purpose: str) -> str | None:
        """Why a new call for ``purpose`` may not start under the run's budget (remembered), or ``None``."""
        reason = self.budget.refusal(purpose) if self.budget is not None else None
        if reason is not None:
            self.refused = self.refused or reason
        return reason

    def __iter__(self) -> Iterator[CallRecord]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def totals(self) -> dict[str, Any]:
        """Calls, cache hits, tokens and cost summed over the records, overall and per purpose (``usage_summary``)."""
        return usage_summary(usage_rows(self.records))


def usage_rows(records: Iterable[CallRecord]) -> list[tuple[str, int, int, int, int, float]]:
    """Records as ``usage_summary`` rows, one per record."""
    return [(r.purpose, 1, int(r.cache_hit), r.prompt_tokens, r.completion_tokens, r.cost) for r in records]


current_usage: ContextVar[UsageSink | None] = ContextVar("evalcli_current_usage", default=None)
"""Where model calls are recorded; the runner sets one per conversation."""


def uncounted_warning(records: Iterable[CallRecord], bounded: Callable[[], list[str]]) -> str | None:
    """The one warning for calls a token or cost bound could not count (docs/budgets.md): a call the provider answered
    with no token usage (a self-hosted server that leaves ``usage`` out) counts as 0 tokens and $0, and, under a cost
    bound, a call of a model litellm's table does not price (an ``evalcli.Agent``'s or a framework agent's, whose
    models are not known before the run) counts as $0; so the bounds (``bounded()``: ``--max-tokens``,
    ``limits.cost``, ..., asked only when there is such a call) never saw them. ``None`` when there is none."""
    calls = [r for r in records if not r.cache_hit]
    missing = Counter(r.model for r in calls if r.prompt_tokens + r.completion_tokens == 0)
    free = Counter(r.model for r in calls if r.prompt_tokens + r.completion_tokens > 0 and not r.cost)
    bounds = bounded() if missing or free else []
    costs = [b for b in bounds if b in ("--max-cost", "limits.cost")]
    unpriced = _unpriced(free) if costs else Counter()
    said = []
    if missing and bounds:
        said.append(f"{' and '.join(bounds)} could not count {sum(missing.values())} LLM call(s) whose response "
                    f"reported no token usage: {_named(missing)}; they counted as 0 tokens and $0, so the bound did not "
                    "hold for them (have the server report 'usage' in its responses, or bound the conversations with "
                    "limits: {turns: N})")
    if unpriced:
        said.append(f"{' and '.join(costs)} could not price {sum(unpriced.values())} LLM call(s): litellm's price table "
                    f"has no price for {_named(unpriced)}; they counted as $0, so the bound did not hold for them "
                    "(bound the run with --max-tokens, or the conversations with limits: {tokens: N})")
    return "; ".join(said) or None


def _unpriced(models: Counter[str]) -> Counter[str]:
    """The models of ``models`` that litellm's table does not price (the embedded local model is free, not unpriced)."""
    from .catalog import priced
    from .local_model import is_local

    return Counter({model: count for model, count in models.items() if not is_local(model) and not priced(model)})


def _named(models: Counter[str]) -> str:
    return ", ".join(f"{model} ({count} call{'s' if count != 1 else ''})" for model, count in models.most_common())
