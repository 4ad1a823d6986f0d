"""What model calls used (SPEC §27): one record per call, collected per conversation, summed overall and per
purpose (target, simulator, judge)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
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


PURPOSES = ("target", "simulator", "judge")
"""What LLM calls are for, as usage is reported (SPEC §27); ``evalcli.Agent``'s calls (purpose ``agent``) and a
framework agent's count as ``target``."""
USAGE_FIELDS = ("calls", "cache_hits", "prompt_tokens", "completion_tokens", "cost")


def purpose_group(purpose: str) -> str:
    """The purpose a call's usage is reported under: ``agent`` (evalcli.Agent, the target) as ``target``."""
    return "target" if purpose == "agent" else purpose


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


@dataclass
class Budget:
    """``--max-cost`` and ``--max-tokens`` (SPEC §27): per purpose, or for every purpose together (key ``None``). No
    new call of a purpose whose budget is spent starts; what was spent is counted as calls are recorded (a resumed
    run's kept conversations included)."""

    max_cost: dict[str | None, float] = field(default_factory=dict)
    max_tokens: dict[str | None, int] = field(default_factory=dict)
    cost: dict[str, float] = field(default_factory=dict)
    """Spent so far, per purpose."""
    tokens: dict[str, int] = field(default_factory=dict)
    spent: str | None = None
    """Why the first call was refused (``None`` while none was): the run is marked ``budget``."""

    @property
    def active(self) -> bool:
        return bool(self.max_cost or self.max_tokens)

    def add(self, purpose: str, tokens: int, cost: float) -> None:
        group = purpose_group(purpose)
        self.tokens[group] = self.tokens.get(group, 0) + tokens
        self.cost[group] = self.cost.get(group, 0.0) + cost

    def add_rows(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """``usage_summary`` rows (a resumed run's kept conversations)."""
        for purpose, _calls, _hits, prompt, completion, cost in rows:
            self.add(str(purpose), int(prompt or 0) + int(completion or 0), float(cost or 0))

    def refusal(self, purpose: str) -> str | None:
        """Why a new call for ``purpose`` may not start (a budget of it, or of every purpose, is spent), or ``None``."""
        group = purpose_group(purpose)
        for key, limit in self.max_cost.items():
            used = sum(self.cost.values()) if key is None else self.cost.get(group, 0.0)
            if (key is None or key == group) and used >= limit:
                return self._refuse(f"the {'' if key is None else key + ' '}cost budget of ${limit:g} is spent "
                                    f"(${used:.4f})")
        for key, most in self.max_tokens.items():
            count = sum(self.tokens.values()) if key is None else self.tokens.get(group, 0)
            if (key is None or key == group) and count >= most:
                return self._refuse(f"the {'' if key is None else key + ' '}token budget of {most} is spent "
                                    f"({count} tokens)")
        return None

    def _refuse(self, reason: str) -> str:
        self.spent = self.spent or reason
        return reason


def parse_budget(text: str, option: str, whole: bool) -> dict[str | None, float]:
    """``--max-cost 5`` (every purpose together) or ``--max-cost judge=2,target=3,simulator=1`` (per purpose; both may
    be mixed: ``5,judge=2``). ``whole``: the amounts are counts (tokens). A mistake is a ``ValueError`` saying what to
    write."""
    budget: dict[str | None, float] = {}
    example = "--max-tokens 100000 or --max-tokens judge=20000,target=50000" if whole else \
        "--max-cost 5 or --max-cost judge=2,target=3,simulator=1"
    for part in (p.strip() for p in text.split(",")):
        name, _, amount = part.rpartition("=")
        key = name.strip() or None
        if key is not None and key not in PURPOSES:
            raise ValueError(f"{option}: '{key}' is not a purpose (target, simulator or judge); write {example}")
        try:
            value = float(amount)
        except ValueError:
            raise ValueError(f"{option}: '{amount.strip()}' is not a number; write {example}") from None
        if not value >= 0 or value == float("inf") or (whole and not value.is_integer()):
            raise ValueError(f"{option}: '{amount.strip()}' must be a {'whole number' if whole else 'number'} of "
                             f"{'tokens' if whole else 'US dollars'}, 0 or more; write {example}")
        if key in budget:
            raise ValueError(f"{option} names {key or 'the overall budget'} twice; write {example}")
        budget[key] = int(value) if whole else value
    return budget
